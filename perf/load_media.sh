#!/usr/bin/env bash
# load_media.sh - `ringload load` against the medium's limit, on every medium
# (issue 12's benchmark; docs/benchmarks.md, "Loading on every medium").
#
# On one checkpoint file, in one run, per medium:
#   disk    the file on the local disk, page cache dropped before every run
#   loop    the file on ext4 on a loop device over a tmpfs file, attached
#           with --direct-io=on (a RAM disk that O_DIRECT reaches), cold
#   tmpfs   the file on tmpfs (/dev/shm), read with O_DIRECT where allowed
# ROUNDS interleaved rounds of: `ringload load FILE` with default options
# (bytes over the wall time of the whole process, exec to exit); fio's grid
# (io_uring, O_DIRECT, fixedbufs; numjobs J in FIO_JOBS, each job a disjoint
# 1/J of the file, --size and --offset_increment; bs in FIO_BS; iodepth in
# FIO_QD), whose best median is "fio best"; the fresh-memory fill rate
# (build/perf/bench_fill: the file's size mapped, huge pages advised, every
# page touched by one thread per core), since no loader fills staging
# faster than the machine faults it in. On tmpfs also `--workers W` for W
# in WORKERS (the scaling), and on the disk a hot round: `cat` reads the
# file, then `ringload load` and `cat` time a hot read each.
#
# Prints (and saves in OUT) medians, ringload / min(fio best, fill) per
# medium, hot ringload / min(cat, fill), CPU seconds per GB of each reader,
# and draws them (gnuplot). Targets: >= 0.95, >= 0.9, CPU no worse than
# fio's plus the fill's.
#
#   sudo perf/load_media.sh          (root: drop_caches, losetup, mount)
#
# Settings (environment): SIZE (checkpoint size, default min(16G, a third
# of the available memory)), ROUNDS (3), MEDIA ("disk loop tmpfs"),
# FIO_JOBS (1 2 4 .. cores), FIO_BS ("1M 4M"), FIO_QD ("16 64"), WORKERS
# (1 2 4 .. cores), PRIME (1: touch SIZE of fresh memory before every timed
# run, for VMs that hand freed memory back to their host), HOT (1),
# RL_BENCH_DIR (/var/tmp/rlmedia: the disk copy), SHM (/dev/shm), OUT
# (bench-out), BUILD (build), RL_LOAD_ARGS (extra `ringload load` options).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
me=load_media.sh kind=media
# shellcheck source=perf/media_lib.sh
. "$here/media_lib.sh"
HOT=${HOT:-1}
FIO_BS=${FIO_BS:-"1M 4M"}
FIO_QD=${FIO_QD:-"16 64"}
extra=${RL_LOAD_ARGS:-}
FIO_JOBS=${FIO_JOBS:-$(pow2s "$cores")}
WORKERS=${WORKERS:-$(pow2s "$cores")}

tsv=$raw/runs.tsv inproc=$raw/inproc.tsv
: >"$tsv"
: >"$inproc"

# record MEDIUM READER CONFIG ROUND SECONDS BYTES CPU_S
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$tsv"; }

run_ringload() { # medium file cold label [args]
	local m=$1 f=$2 cold=$3 label=$4
	shift 4
	prime
	[ "$cold" = 1 ] && drop
	# shellcheck disable=SC2086
	timed "$BUILD/ringload" load "$f" --quiet --json $extra "$@"
	record "$m" ringload "$label" "$r" "$SECS" "$bytes" "$CPU"
	# The same run's own time (open, plan, read: its summary's total), so
	# that the time outside it (exec, linking, teardown, exit) shows.
	printf '%s\t%s\t%s\t%s\t%s\n' "$m" "$label" "$r" "$SECS" \
		"$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"]["total"])' "$raw/last.out")" \
		>>"$inproc"
}

run_fio() { # medium file cold jobs bs qd
	local m=$1 f=$2 cold=$3 j=$4 bs=$5 qd=$6 per bw io
	per=$(( bytes / j / 4194304 * 4194304 ))
	prime
	[ "$cold" = 1 ] && drop
	timed fio --name=best --filename="$f" --rw=read --ioengine=io_uring --direct=1 \
		--fixedbufs --bs="$bs" --iodepth="$qd" --numjobs="$j" --size="$per" \
		--offset_increment="$per" --group_reporting --output-format=json
	read -r bw io < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["jobs"][0]["read"]; print(r["bw_bytes"], r["io_bytes"])' "$raw/last.out")
	# fio's own bandwidth (its start-up not counted): seconds = bytes / bw
	record "$m" fio "J$j-$bs-QD$qd" "$r" "$(awk -v i="$io" -v b="$bw" 'BEGIN { printf "%.4f", i / b }')" "$io" "$CPU"
	# and the same run timed as ringload is, exec to exit (start-up, its
	# buffers' allocation and registration, exit included), as the
	# issue's own table times every reader
	record "$m" fio-process "J$j-$bs-QD$qd" "$r" "$SECS" "$io" "$CPU"
}

run_fill() { # medium
	local g c
	prime
	read -r g c _ < <("$BUILD/perf/bench_fill" "$bytes")
	record "$1" fill "${cores}threads" "$r" "$(awk -v g="$g" -v n="$bytes" 'BEGIN { printf "%.4f", n / g / 1e9 }')" "$bytes" "$c"
}

run_cat() { # medium file cold label
	prime
	[ "$3" = 1 ] && drop
	timed sh -c 'exec cat "$1" >/dev/null' cat "$2"   # not into timed's file
	record "$1" cat "$4" "$r" "$SECS" "$bytes" "$CPU"
}

# One round on medium m reading file f (cold: drop caches before each run).
round() {
	local m=$1 f=$2 cold=$3
	run_ringload "$m" "$f" "$cold" defaults
	for j in $FIO_JOBS; do
		for bs in $FIO_BS; do
			for qd in $FIO_QD; do
				run_fio "$m" "$f" "$cold" "$j" "$bs" "$qd"
			done
		done
	done
	run_fill "$m"
	if [ "$m" = tmpfs ]; then
		for w in $WORKERS; do
			run_ringload "$m" "$f" 0 "workers-$w" --workers "$w"
		done
	fi
	if [ "$m" = disk ] && [ "$HOT" = 1 ]; then
		cat "$f" >/dev/null
		run_ringload hot "$f" 0 defaults
		cat "$f" >/dev/null
		run_cat hot "$f" 0 hot
	fi
}

# What the loader chose on this medium (untimed, for the report).
shape() { # medium file cold
	[ "$3" = 1 ] && drop
	"$BUILD/perf/bench_load" "$2" >"$raw/shape-$1.txt" 2>&1 || true
	[ "$1" = disk ] && { cat "$2" >/dev/null; "$BUILD/perf/bench_load" "$2" >"$raw/shape-hot.txt" 2>&1 || true; }
	return 0
}

for m in $MEDIA; do
	setup_medium "$m" || continue
	echo "== $m: $FILE ($bytes bytes), $ROUNDS rounds" >&2
	for r in $(seq 1 "$ROUNDS"); do
		round "$m" "$FILE" "$COLD"
		echo "   round $r done ($(( $(date +%s) - t_start )) s so far)" >&2
	done
	shape "$m" "$FILE" "$COLD"
	teardown_medium
done

report=$OUT/media-$stamp.md
{
	echo "# ringload load on every medium, $stamp"
	echo
	echo "- $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -srm), $cores CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- $(basename "$src"): $bytes bytes; $ROUNDS interleaved rounds, medians; PRIME=$PRIME; fio $(fio --version)"
	echo "- command: \`sudo SIZE=$SIZE ROUNDS=$ROUNDS MEDIA=\"$MEDIA\" perf/load_media.sh\`; took $(( $(date +%s) - t_start )) s"
	echo
	python3 "$here/benchlib.py" media "$tsv" "$raw/chart.dat"
	echo
	python3 "$here/benchlib.py" inproc "$inproc" "$bytes"
	for f in "$raw"/shape-*.txt; do
		[ -e "$f" ] || continue
		echo
		echo "What the loader chose ($(basename "$f" .txt | sed 's/shape-//')):"
		echo
		sed 's/^/    /' "$f"
	done
} >"$report"
cp "$tsv" "$OUT/media-$stamp.tsv"
if command -v gnuplot >/dev/null 2>&1 && [ -s "$raw/chart.dat" ]; then
	gnuplot -e "in='$raw/chart.dat'; out='$OUT/media-$stamp.svg'" "$here/media.gp" &&
		echo "chart: $OUT/media-$stamp.svg"
fi
cat "$report"
echo "report: $report ($(( $(date +%s) - t_start )) s)"
