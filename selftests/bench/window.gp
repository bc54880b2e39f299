# gnuplot script for bench.sh: the stop_machine window.
# Called with -e "ndata=N" -e "files='DAT1 KVER1 DAT2 KVER2 ...'"
# -e "ranfiles='RAN1 KVER1 RAN2 KVER2 ...'" -e "out='window.png'".
# Each DAT has the columns
# tasks kpatch_f1 kpatch_f100 kpatch_f1000 seed_f1 seed_f100 seed_f1000;
# each RAN has "tasks_that_ran kpatch_window seed_window" (4000 tasks, 100
# functions).
# One panel per kernel (window vs sleeping tasks), then one for all
# kernels (window vs tasks that ran between the pre-walk and
# stop_machine()).
set terminal png size 1500,560 font ",10"
set output out
set multiplot layout 1, ndata + 1
set logscale xy
set key top left inside vertical maxrows 3 font ",9"
set grid
set format y "%.0s%c"
set ylabel "instructions (= ns) inside stop_machine" noenhanced
set xlabel "sleeping tasks"
set xtics ("100" 100, "1000" 1000, "4000" 4000)
set xrange [70:5500]
do for [i = 1:ndata] {
	dat = word(files, 2 * i - 1)
	set title word(files, 2 * i)
	plot dat using 1:2 with linespoints lc 1 pt 7 title "kpatch F=1", \
	     dat using 1:3 with linespoints lc 2 pt 7 title "kpatch F=100", \
	     dat using 1:4 with linespoints lc 3 pt 7 title "kpatch F=1000", \
	     dat using 1:5 with linespoints lc 1 pt 5 dt 2 title "seed F=1", \
	     dat using 1:6 with linespoints lc 2 pt 5 dt 2 title "seed F=100", \
	     dat using 1:7 with linespoints lc 3 pt 5 dt 2 title "seed F=1000"
}
set title "4000 tasks, F=100: window vs tasks that ran" noenhanced
set xlabel "tasks that ran between the pre-walk and stop_machine" noenhanced
set xtics ("1" 1, "10" 10, "100" 100, "1000" 1000)
set xrange [0.7:1500]
set key left center inside vertical maxrows 6 font ",9" noenhanced
plot for [i = 1:ndata] word(ranfiles, 2 * i - 1) using 1:2 \
	with linespoints lc i pt 7 title "kpatch ".word(ranfiles, 2 * i), \
     for [i = 1:ndata] word(ranfiles, 2 * i - 1) using 1:3 \
	with lines lc i dt 2 title "seed ".word(ranfiles, 2 * i)
unset multiplot
