# gnuplot script for bench.sh: an update at many tasks.
# Called with -e "ndata=N" -e "files='DAT1 KVER1 DAT2 KVER2 ...'"
# -e "out='many.png'".  Each DAT has the columns
# threads kpatch_patch_ms kpatch_unpatch_ms lp_enable_ms lp_disable_ms
# window_patch_us window_unpatch_us (medians of the runs).
# One panel per kernel: the times against the threads asleep in user
# space (left axis, ms), and kpatch's stop_machine() window (right axis,
# us), with the target of 200 us.
set terminal png size 1500,600 font ",10"
set output out
set multiplot layout 1, ndata
set logscale x
set logscale y
set logscale y2
set key top left inside vertical font ",8" noenhanced opaque
set grid
set xlabel "threads asleep in user space"
set ylabel "guest ms (patch, unpatch, enable, disable)" noenhanced
set y2label "stop_machine window, guest us" noenhanced
set ytics nomirror
set y2tics
set xtics ("1k" 1000, "10k" 10000, "50k" 50000, "100k" 100000)
set xrange [700:140000]
do for [i = 1:ndata] {
	dat = word(files, 2 * i - 1)
	set title word(files, 2 * i) noenhanced
	plot dat using 1:2 with linespoints lw 2 lc rgb "#1f77b4" pt 7 title "kpatch patch (ms)", \
	     dat using 1:3 with linespoints lw 2 lc rgb "#2ca02c" pt 7 title "kpatch unpatch (ms)", \
	     dat using 1:4 with linespoints lc rgb "#9ecae1" pt 5 title "livepatch enable (ms)", \
	     dat using 1:5 with linespoints lc rgb "#a1d99b" pt 5 title "livepatch disable (ms)", \
	     dat using 1:6 axes x1y2 with linespoints lw 2 lc rgb "#d62728" pt 9 title "kpatch window, patch (us)", \
	     dat using 1:7 axes x1y2 with linespoints lw 2 lc rgb "#ff7f0e" pt 9 title "kpatch window, unpatch (us)", \
	     200 axes x1y2 with lines lc rgb "#d62728" title "target: window 200 us (right axis)"
}
unset multiplot
