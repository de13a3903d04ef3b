#!/usr/bin/env bash
# load_grid.sh - the sweep that chooses `ringload load`'s defaults: on each
# medium (disk cold, loop device over tmpfs with --direct-io=on cold, tmpfs;
# perf/media_lib.sh), ROUNDS interleaved passes over ringload's own option
# grid, workers x queue depth x request size, plus the defaults; medians,
# the best point, and the defaults' ratio to it (target >= 0.95 on every
# medium). Whole-process wall time of `ringload load`, as perf/load_media.sh.
#
#   sudo perf/load_grid.sh           (root: drop_caches, losetup, mount)
#
# Settings (environment): SIZE (default as load_media.sh), ROUNDS (3),
# MEDIA ("disk loop tmpfs"), GRID_WORKERS (1 2 4 .. cores), GRID_QD
# ("4 16 64"), GRID_REQ ("1M 4M 8M 16M"), PRIME (1), RL_BENCH_DIR, SHM, OUT
# (bench-out), BUILD (build).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
me=load_grid.sh kind=grid
# shellcheck source=perf/media_lib.sh
. "$here/media_lib.sh"
GRID_WORKERS=${GRID_WORKERS:-$(pow2s "$cores")}
GRID_QD=${GRID_QD:-"4 16 64"}
GRID_REQ=${GRID_REQ:-"1M 4M 8M 16M"}

tsv=$raw/grid.tsv
: >"$tsv"

point() { # medium file cold round label [ringload options]
	local m=$1 f=$2 cold=$3 r=$4 label=$5
	shift 5
	prime
	[ "$cold" = 1 ] && drop
	timed "$BUILD/ringload" load "$f" --quiet "$@"
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$label" "$r" "$SECS" "$bytes" "$CPU" >>"$tsv"
}

for m in $MEDIA; do
	setup_medium "$m" || continue
	echo "== $m: $FILE ($bytes bytes)" >&2
	for r in $(seq 1 "$ROUNDS"); do
		point "$m" "$FILE" "$COLD" "$r" defaults
		for w in $GRID_WORKERS; do
			for qd in $GRID_QD; do
				for req in $GRID_REQ; do
					point "$m" "$FILE" "$COLD" "$r" "W$w-QD$qd-$req" \
						--workers "$w" --queue-depth "$qd" --request-bytes "$req"
				done
			done
		done
		echo "   round $r done ($(( $(date +%s) - t_start )) s so far)" >&2
	done
	teardown_medium
done

report=$OUT/grid-$stamp.md
{
	echo "# ringload load option grid, $stamp"
	echo
	echo "- $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -srm), $cores CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- $(basename "$src"): $bytes bytes; $ROUNDS interleaved rounds, medians; workers {$GRID_WORKERS } x QD {$GRID_QD} x request {$GRID_REQ}; took $(( $(date +%s) - t_start )) s"
	echo
	python3 "$here/benchlib.py" grid "$tsv"
} >"$report"
cp "$tsv" "$OUT/grid-$stamp.tsv"
cat "$report"
echo "report: $report"
