#!/usr/bin/env bash
# sweep.sh - rlperf over queue depth x request size x registered buffers x
# backend on one file, O_DIRECT: the table, the best configuration, the
# cheapest one within 5% of it (what ringload's defaults are chosen from),
# and a chart per request size (gnuplot).
#
# Settings (environment): RL_BENCH_CKPT or FILE (the file read; default the
# bench checkpoint, generated if absent), QDS ("1 4 16 32 64"), BSS
# ("64k 256k 1M 4M"), BACKENDS ("io_uring libaio psync"), RW (read),
# RUNTIME (3 s per point), RAMP (1 s), ROUNDS (3: medians of interleaved
# passes over the grid), OUT (bench-out), BUILD (build).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build}
DIR=${RL_BENCH_DIR:-/var/tmp/rlbench}
FILE=${FILE:-${RL_BENCH_CKPT:-$DIR/ckpt-4g.safetensors}}
QDS=${QDS:-"1 4 16 32 64"}
BSS=${BSS:-"64k 256k 1M 4M"}
BACKENDS=${BACKENDS:-"io_uring libaio psync"}
RW=${RW:-read}
RUNTIME=${RUNTIME:-3}
RAMP=${RAMP:-1}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-bench-out}
stamp=$(date -u +%Y%m%d-%H%M%S)
raw=$OUT/raw/sweep-$stamp

[ -x "$BUILD/rlperf" ] || { echo "sweep.sh: $BUILD/rlperf not built (make)" >&2; exit 1; }
if [ ! -e "$FILE" ]; then
	mkdir -p "$(dirname "$FILE")"
	"$BUILD/mkckpt" "$FILE" --size 4G
fi
mkdir -p "$raw"
tsv=$raw/sweep.tsv
: >"$tsv"

# rounds outermost: drift of a shared machine spreads over every point
for round in $(seq 1 "$ROUNDS"); do
for bs in $BSS; do
	for qd in $QDS; do
		for be in $BACKENDS; do
			regs=0
			[ "$be" = io_uring ] && regs="0 1"
			for reg in $regs; do
				flags=
				[ "$reg" = 1 ] && flags="--fixedbufs --registerfiles"
				out=$raw/$be-$reg-$bs-$qd-$round.json
				# shellcheck disable=SC2086
				"$BUILD/rlperf" --name=sweep --filename="$FILE" --rw="$RW" --bs="$bs" \
					--iodepth="$qd" --direct=1 --ioengine="$be" $flags \
					--runtime="$RUNTIME" --time_based --ramp_time="$RAMP" \
					--output-format=json >"$out"
				m=$(python3 "$here/benchlib.py" metrics "$out")
				printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$be" "$reg" "$qd" "$bs" "$round" "$m" >>"$tsv"
				echo "round $round $be reg=$reg bs=$bs qd=$qd: $(echo "$m" | awk '{printf "%.1f MB/s, %.3f CPU s/GB", $1/1e6, $5}')"
			done
		done
	done
done
done

report=$OUT/sweep-$stamp.md
{
	echo "# rlperf sweep $stamp"
	echo
	echo "- $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(uname -srm), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- file: $FILE; rw=$RW, O_DIRECT, ${RUNTIME}s per point after a ${RAMP}s ramp, medians of $ROUNDS interleaved rounds; psync = the engine's pread pool with iodepth threads"
	echo
	python3 "$here/benchlib.py" sweep "$tsv" "$raw/medians.tsv"
} >"$report"
cp "$raw/medians.tsv" "$OUT/sweep-$stamp.tsv"

if command -v gnuplot >/dev/null 2>&1; then
	gnuplot -e "in='$raw/medians.tsv'; out='$OUT/sweep-$stamp.svg'; bss='$BSS'" "$here/sweep.gp" &&
		echo "chart: $OUT/sweep-$stamp.svg"
fi
cat "$report"
echo "report: $report"
