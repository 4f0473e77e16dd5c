# SPDX-License-Identifier: Apache-2.0
# Distributed limiting against one sweep variable (k limiters, or the GLOBAL sync period s): on the
# left the requests admitted relative to the perfect window, on the right the most admitted in one
# window relative to the limit. CSV (sluice sim --csv, sweep mode): k, sync_ms, then per algorithm
# <alg>_over_pct and <alg>_peak_ratio.
# Variables (gnuplot -e): csv, csv2 ("" for none), label1, label2 (legend suffixes of the two
# files), out (an SVG file), heading, xcol (1 = k, 2 = sync_ms), xlabel_text, names (algorithm names,
# space-separated, in CSV order), logx (0/1).
set datafile separator ","
nalgs = words(names)
set terminal svg size 1000,500 dynamic noenhanced font "sans,10" background "white"
set output out
set multiplot layout 1, 2 title heading font ",11"
set grid lc rgb "#dddddd"
set xlabel xlabel_text
if (logx) { set logscale x 10 }
set xtics nomirror
set pointsize 0.7
set key outside below center horizontal maxcols 2 samplen 3 font ",8"
do for [panel = 0:1] {
    if (panel == 0) {
        set ylabel "admitted vs perfect window (%)"
    } else {
        set ylabel "peak in one window / limit"
    }
    if (csv2 eq "") {
        plot for [a = 0:nalgs - 1] csv using xcol:(column(3 + 2 * a + panel)) skip 1 \
             with linespoints lw 1.5 pt 7 lc a + 1 title word(names, a + 1)
    } else {
        plot for [a = 0:nalgs - 1] csv using xcol:(column(3 + 2 * a + panel)) skip 1 \
             with linespoints lw 1.5 pt 7 lc a + 1 title word(names, a + 1) . " " . label1, \
             for [a = 0:nalgs - 1] csv2 using xcol:(column(3 + 2 * a + panel)) skip 1 \
             with linespoints lw 1.5 pt 6 dt 2 lc a + 1 title word(names, a + 1) . " " . label2
    }
}
unset multiplot
