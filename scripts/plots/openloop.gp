# SPDX-License-Identifier: Apache-2.0
# Criteo's figures, open loop: each estimator's count of the trailing window against the true count
# on the same offered traffic, one panel per estimator, all panels on ONE y-scale.
# CSV (sluice sim --open-loop --csv): t_s, true, then one column per estimator.
# Variables (gnuplot -e): csv, out (a PNG file), heading, limit, cols (a string of CSV column
# numbers, "3 8 9"), names (their headers, same order), ymax (the top of every panel's y axis).
set datafile separator ","
n = words(cols)
rows = (n + 1) / 2
set terminal pngcairo size 1100, 260 * rows + 60 noenhanced font "sans,10" background "white"
set output out
set multiplot layout rows, 2 title heading font ",12" margins 0.07, 0.98, 0.05, 0.93 spacing 0.08, 0.11
set key top left horizontal samplen 3 width -3 font ",8"
set grid ytics lc rgb "#dddddd"
set xlabel "t (s)" offset 0,0.5
set ylabel "count in window" offset 1,0
set yrange [0:ymax]
set samples 2   # the limit is a constant: two points draw it
do for [i = 1:n] {
    c = int(word(cols, i))
    set title word(names, i) font ",10" offset 0,-0.4
    plot csv using 1:2 with lines lc rgb "#a0a0a0" lw 3 title "true (sliding log)", \
         csv using 1:c with lines lc rgb "#e6550d" lw 1.5 dt 2 title "estimate", \
         limit with lines lc rgb "#3182bd" dt 3 title "limit"
}
unset multiplot
