# SPDX-License-Identifier: Apache-2.0
# Each algorithm's admitted count in the trailing window against the perfect sliding window, over
# time (Criteo's figures): one panel per algorithm, the perfect window in grey underneath.
# CSV (sluice sim --csv, single mode): t_s, perfect, then one column per algorithm.
# Variables (gnuplot -e): csv, out (an SVG file), heading, limit, ncols (algorithms).
set datafile separator ","
set terminal svg size 960,1100 dynamic noenhanced font "sans,10" background "white"
set output out
set multiplot layout (ncols + 1) / 2, 2 title heading font ",12"
set key top right horizontal samplen 2 font ",8"
set offsets 0, 0, graph 0.25, 0  # headroom for the key
set grid ytics lc rgb "#dddddd"
set xlabel "t (s)" offset 0,0.5
set ylabel "admitted in window" offset 1,0
set yrange [0:*]
set samples 2   # the limit is a constant: two points draw it
set tmargin 1.5
set bmargin 2.8
do for [c = 3:ncols + 2] {
    plot csv using 1:2 with lines lc rgb "#a0a0a0" lw 2 title "perfect", \
         csv using 1:c with lines lc rgb "#e6550d" lw 1 title columnheader(c), \
         limit with lines lc rgb "#3182bd" dt 3 title "limit"
}
unset multiplot
