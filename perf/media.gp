# media.gp - ringload load against the medium's limit (perf/load_media.sh):
# per medium, ringload's median GB/s beside min(fio best, fill) (hot: min(cat,
# fill)), labelled with their ratio; the tmpfs scaling rows show ringload alone.
# gnuplot -e "in='chart.dat'; out='media.svg'" perf/media.gp
# in: lines "label ringload_gbps limit_gbps ratio"
set terminal svg size 820,440 dynamic noenhanced font "sans,12"
set output out
set title "ringload load (defaults) vs the medium's limit: medians of interleaved rounds"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set ylabel "GB/s"
set yrange [0:*]
set grid ytics
set key top left
plot in using 2:xtic(1) title "ringload load" lc rgb "#1f77b4", \
     '' using 3 title "min(fio best | cat, fill)" lc rgb "#ff7f0e", \
     '' using 0:2:($4 > 0 ? sprintf("%.2fx", $4) : "") with labels offset -2.2,0.8 notitle
