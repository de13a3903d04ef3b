# compare.gp - rlperf vs fio, median bandwidth per job (perf/bench.sh).
# gnuplot -e "in='compare-med.dat'; out='compare.svg'" perf/compare.gp
# in: lines "job rlperf_MBps fio_MBps"
set terminal svg size 720,420 dynamic noenhanced font "sans,12"
set output out
set title "rlperf vs fio: same job, interleaved rounds, medians"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set ylabel "MB/s"
set yrange [0:*]
set grid ytics
set key top right
plot in using 2:xtic(1) title "rlperf (ringload engine)" lc rgb "#1f77b4", \
     '' using 3 title "fio" lc rgb "#ff7f0e", \
     '' using 0:2:(sprintf("%.0f", $2)) with labels offset -2.2,0.7 notitle, \
     '' using 0:3:(sprintf("%.0f", $3)) with labels offset 2.2,0.7 notitle
