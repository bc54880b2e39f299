# gnuplot script for bench.sh: stop_machine window vs sleeping tasks.
# Called with -e "ndata=N" -e "files='DAT1 KVER1 DAT2 KVER2 ...'"
# -e "out='window.png'"; each DAT has the columns
# tasks kpatch_f1 kpatch_f100 kpatch_f1000 seed_f1 seed_f100 seed_f1000.
set terminal png size 1100,560 font ",10"
set output out
set multiplot layout 1, ndata
set logscale xy
set xlabel "sleeping tasks"
set key top left inside vertical maxrows 3 font ",9"
set grid
set xtics ("100" 100, "1000" 1000, "4000" 4000)
set xrange [70:5500]
set format y "%.0s%c"
set ylabel "instructions (= ns) inside stop_machine" noenhanced
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
unset multiplot
