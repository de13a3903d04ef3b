# sweep.gp - bandwidth against queue depth, one panel per request size, one
# line per backend (io_uring with and without registered buffers, libaio,
# psync), from perf/sweep.sh's TSV.
# gnuplot -e "in='sweep.tsv'; out='sweep.svg'; bss='64k 256k 1M 4M'" perf/sweep.gp
# in: lines "backend registered qd bs bw_bytes iops p50 p99 cpu_s_per_gb"
n = words(bss)
cols = (n > 2) ? 2 : n
rows = (n + cols - 1) / cols
set terminal svg size 480*cols, 340*rows dynamic noenhanced font "sans,11"
set output out
set multiplot layout rows, cols title "rlperf sweep: bandwidth vs queue depth (O_DIRECT)"
set logscale x 2
set xlabel "queue depth"
set ylabel "MB/s"
set yrange [0:*]
set grid
set key bottom right
sel(be, reg, bs) = sprintf("< awk '$1==\"%s\" && $2==%d && $4==\"%s\"' %s | sort -n -k3", be, reg, bs, in)
do for [i = 1:n] {
	bs = word(bss, i)
	set title "bs=".bs
	plot sel("io_uring", 1, bs) using 3:($5/1e6) with linespoints title "io_uring, registered", \
	     sel("io_uring", 0, bs) using 3:($5/1e6) with linespoints title "io_uring", \
	     sel("libaio", 0, bs) using 3:($5/1e6) with linespoints title "libaio", \
	     sel("psync", 0, bs) using 3:($5/1e6) with linespoints title "psync (pread pool)"
}
unset multiplot
