#!/usr/bin/env bash
# stream_host.sh - issue 22 item 7, the host half: streaming under a
# 256 MiB budget against fio's best and against `cat`, whole processes, on
# one 4 GiB file, then where streaming's time goes.
#
# 1. perf/load_media.sh with RL_LOAD_ARGS="--staging-budget $BUDGET" on
#    MEDIA (default "tmpfs disk"): ROUNDS interleaved rounds of
#    `ringload load FILE --staging-budget 256M` (exec to exit), fio's grid
#    (numjobs 1..cores x bs 1M/4M x QD 16/64, io_uring, O_DIRECT,
#    fixedbufs; its own bandwidth and timed exec to exit), the fresh-memory
#    fill rate, on the disk cold and hot (`cat` when hot); medians.
# 2. A profile of one streaming load of the same file from tmpfs:
#    `perf record -g` (where perf runs) with the top symbols of the
#    process, and `perf stat` of the scheduler's counts (waits show as
#    context switches); the load's own JSON summary (open, plan, read).
#
#   sudo perf/stream_host.sh        (root: drop_caches, tmpfs copy)
#
# Settings (environment): SIZE (4G), ROUNDS (5), MEDIA ("tmpfs disk"),
# BUDGET (256M), OUT (bench-out), and every setting of load_media.sh.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export SIZE=${SIZE:-4G} ROUNDS=${ROUNDS:-5} MEDIA=${MEDIA:-"tmpfs disk"}
BUDGET=${BUDGET:-256M}
export RL_LOAD_ARGS="--staging-budget $BUDGET ${RL_LOAD_ARGS:-}"
export OUT=${OUT:-bench-out} BUILD=${BUILD:-build}
DIR=${RL_BENCH_DIR:-/var/tmp/rlmedia}

"$here/load_media.sh"

# The profile: one streaming load of the tmpfs copy, page cache irrelevant.
src=$DIR/ckpt-$SIZE.safetensors
shm=$(mktemp -d /dev/shm/rlstream.XXXXXX)
trap 'rm -rf "$shm"' EXIT
cp "$src" "$shm/"
file=$shm/$(basename "$src")
prof=$OUT/stream-profile-$(date -u +%Y%m%d-%H%M%S).txt
{
	echo "# streaming profile: ringload load $(basename "$file") --staging-budget $BUDGET (tmpfs)"
	echo
	echo "its own summary (--json):"
	"$BUILD/ringload" load "$file" --staging-budget "$BUDGET" --quiet --json | sed 's/^/    /'
	if command -v perf >/dev/null && perf stat -e task-clock true >/dev/null 2>&1; then
		echo
		echo "perf stat:"
		perf stat -e task-clock,context-switches,cpu-migrations,page-faults \
			"$BUILD/ringload" load "$file" --staging-budget "$BUDGET" --quiet 2>&1 |
			sed 's/^/    /'
		perf record -q -g -o "$shm/perf.data" "$BUILD/ringload" load "$file" \
			--staging-budget "$BUDGET" --quiet >/dev/null 2>&1
		echo
		echo "perf report (self time, top 25 symbols):"
		perf report -i "$shm/perf.data" --no-children --sort dso,sym --stdio 2>/dev/null |
			grep -v '^#' | grep '%' | head -25 | sed 's/^/    /'
	else
		echo "perf does not run here: the summary above is the profile"
	fi
} >"$prof"
cat "$prof"
echo "profile: $prof"
