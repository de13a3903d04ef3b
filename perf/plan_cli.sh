#!/usr/bin/env bash
# plan_cli.sh - `ringload plan` at scale, from the command line: wall time and peak memory
# of the whole process (start-up, header parse, plan, JSON out, exit) for one process of
# 100,000 tensors on 256 devices (8 processes x 32), the target being < 1 s and < 256 MiB;
# and the same with --all-processes (every process's statistics) for comparison.
#
#   perf/plan_cli.sh [ROUNDS] [LAYOUT]   default 5 rounds; BUILD=build
#
# LAYOUT 1d (default): rows split over the 32 local devices, ["model"], columns [null,"model"];
# 2d (issue 24's): rows over both axes, ["data","model"], columns [null,"model"]; rows (issue
# 33's short rows): 100,000 BF16 [64, 256] tensors of bench_plan's 100k-rows checkpoint, half
# split over both axes (8 rows of 16 bytes per device), half [null,"model"]. The table is
# of the command with --json, without it (the table), and with --all-processes; CPU is user +
# system seconds, which is what a loaded machine leaves comparable.
#
# The checkpoint and spec are build/perf/bench_plan's 100k scenario (header-only sparse
# files: nothing but headers touches the disk), written once under $RL_BENCH_DIR (default
# /tmp/ringload-bench-plan) by `bench_plan --only 100k`. Each round runs both commands,
# interleaved, under /usr/bin/time -v; the table gives medians (and min-max) of the wall
# time and of the maximum resident set size. Needs a quiet machine for figures to report.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$here/../build}
DIR=${RL_BENCH_DIR:-/tmp/ringload-bench-plan}
ROUNDS=${1:-5}
LAYOUT=${2:-1d}
CKPT=$DIR/100k ONLY=100k
case $LAYOUT in
1d) SPEC=$DIR/100k.json ;;
2d) SPEC=$DIR/100k-2d.json ;;
rows) SPEC=$DIR/100k-rows.json CKPT=$DIR/100k-rows ONLY=100k-rows ;;
*) echo "plan_cli.sh: LAYOUT is 1d, 2d or rows" >&2; exit 2 ;;
esac

die() { echo "plan_cli.sh: $*" >&2; exit 1; }
[ -x "$BUILD/ringload" ] && [ -x "$BUILD/perf/bench_plan" ] || die "build first (make)"
[ -x /usr/bin/time ] || die "needs /usr/bin/time (make deps installs the package time)"
if [ ! -f "$SPEC" ] || [ ! -d "$CKPT" ]; then
	echo "writing the $ONLY checkpoint under $DIR (bench_plan --only $ONLY)" >&2
	"$BUILD/perf/bench_plan" --dir "$DIR" --only "$ONLY" >/dev/null
fi

raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT

# One run: appends "seconds peak_kib cpu_seconds" to $raw/$1.
run() {
	local mode=$1
	shift
	/usr/bin/time -v "$BUILD/ringload" plan "$CKPT" --sharding "$SPEC" \
		--process 3 "$@" >"$raw/out.json" 2>"$raw/time.txt" ||
		die "ringload plan failed: $(tail -n 3 "$raw/time.txt")"
	awk -F': ' '
		/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0
			for (i = 1; i <= n; i++) s = s * 60 + t[i] }
		/Maximum resident set size/ { kib = $2 }
		/User time|System time/ { cpu += $2 }
		END { printf "%.3f %d %.3f\n", s, kib, cpu }' "$raw/time.txt" >>"$raw/$mode"
}

for r in $(seq "$ROUNDS"); do
	run json --json
	run table
	run all --json --all-processes
	printf 'round %d: --json %s; table %s; all processes %s (s KiB cpu_s)\n' "$r" \
		"$(tail -n 1 "$raw/json")" "$(tail -n 1 "$raw/table")" "$(tail -n 1 "$raw/all")" >&2
done

# median, min and max of column $2 of file $1
stat() { sort -g -k "$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END {
	printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR] }'; }

echo "| \`ringload plan\` of process 3, 100k tensors x 256 devices, layout $LAYOUT |" \
	"wall s median (min-max) | CPU s median | peak MiB median (min-max) | target |"
echo "|---|---:|---:|---:|---|"
for mode in json table all; do
	read -r sm s0 s1 <<<"$(stat "$raw/$mode" 1)"
	read -r km k0 k1 <<<"$(stat "$raw/$mode" 2)"
	read -r cm _ _ <<<"$(stat "$raw/$mode" 3)"
	case $mode in
	json) label="--json"; target="< 1 s, < 256 MiB" ;;
	table) label="table (no --json)"; target="< 1 s, < 256 MiB" ;;
	all) label="--json --all-processes"; target="(comparison)" ;;
	esac
	printf '| %s | %.2f (%.2f-%.2f) | %.2f | %d (%d-%d) | %s |\n' "$label" "$sm" "$s0" "$s1" \
		"$cm" $((km / 1024)) $((k0 / 1024)) $((k1 / 1024)) "$target"
done
echo
echo "$ROUNDS rounds, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end;" \
	"$(git -C "$here/.." describe --always --dirty 2>/dev/null || echo '?')"
