#!/usr/bin/env bash
# cluster_bench.sh - reading once in a cluster against independent loads
# (docs/benchmarks.md): N MPI ranks on this machine each load the whole of
# a fully replicated checkpoint (every rank needs every byte), either each
# reading it all itself (independent loads: N x the checkpoint from the
# drive) or with RL_PLAN_READ_ONCE (each byte read by one rank and sent to
# the others: 1.00 x). Rounds interleave the modes and the rank counts;
# the page cache is dropped before every run. Prints a markdown table of
# medians: the slowest rank's seconds (checkpoint open to every shard in
# memory), the whole mpirun's wall seconds, and bytes read in the cluster
# against the checkpoint. MODES picks the modes (default both). The
# modes' order alternates round by round (a run that follows one that
# freed gigabytes pays this VM's slow faults), and with PRIME=1 (default)
# build/perf/bench_fill touches the ranks' memory (np x the checkpoint)
# before every run (docs/benchmarks.md, "Method").
#
#   perf/cluster_bench.sh [CHECKPOINT] [ROUNDS] [NPS]     (root: drops caches)
#
# Defaults: a 1.5 GiB llama-like checkpoint in 4 files made once by mkckpt
# under $RL_BENCH_DIR (default /var/tmp/ringload-bench), 5 rounds, NPS "2 4".
# RL_BACKEND picks the backend (default auto). BASE=<another build dir>
# adds the mode once-base: --read-once with that build's mpi_bench, so a
# change compares with its base in the same interleaved rounds
# (MODES="once once-base"). A smoke test: ROUNDS=1 on a small checkpoint;
# the figures need a quiet machine. User and system seconds are the whole
# mpirun's (every rank), the steadiest figure on these VMs, whose fresh
# pages fault in at a rate that varies several-fold between runs.
set -euo pipefail

BUILD=${BUILD:-build}
DIR=${RL_BENCH_DIR:-/var/tmp/ringload-bench}
ckpt=${1:-$DIR/cluster-1536m}
rounds=${2:-5}
nps=${3:-"2 4"}
backend=${RL_BACKEND:-auto}
modes=${MODES:-"independent once"}
prime=${PRIME:-1}

die() { echo "cluster_bench.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root to drop the page cache"
[ -x "$BUILD/perf/mpi_bench" ] || die "no $BUILD/perf/mpi_bench (make with Open MPI: make deps)"
command -v mpirun >/dev/null || die "mpirun not found (make deps)"
if [ ! -e "$ckpt" ]; then
	mkdir -p "$(dirname "$ckpt")"
	"$BUILD/mkckpt" "$ckpt" --size 1536M --files 4 --seed 1 >/dev/null || die "mkckpt failed"
fi
if [ -d "$ckpt" ]; then
	size=$(du -b --apparent-size -c "$ckpt"/*.safetensors | tail -1 | cut -f1)
else    # one file (the pipeline above fails on it: no match)
	size=$(stat -c %s "$ckpt")
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

spec() {        # np processes, one device each, nothing split: replicated
	local np=$1 devs=""
	for ((d = 0; d < np; d++)); do devs="$devs${devs:+,}$d"; done
	echo "{\"mesh\":{\"shape\":[$np],\"axes\":[\"p\"],\"process_of_device\":[$devs]}}" \
		>"$out/spec$np.json"
}

run() {         # np mode round: one JSON line into the mode's file
	local np=$1 mode=$2 flags="" t0 t1 bin=$BUILD/perf/mpi_bench cpu TIMEFORMAT='%U %S'
	case $mode in
	independent) ;;
	once) flags=--read-once ;;
	once-base)
		flags=--read-once bin=${BASE:?once-base needs BASE=<build dir>}/perf/mpi_bench
		[ -x "$bin" ] || die "no $bin" ;;
	*) die "MODES: independent, once or once-base, not '$mode'" ;;
	esac
	sync
	echo 3 >/proc/sys/vm/drop_caches
	[ "$prime" != 1 ] || "$BUILD/perf/bench_fill" "$((np * size))" >/dev/null ||
		die "bench_fill failed"
	t0=$(date +%s.%N)
	{ time mpirun --allow-run-as-root --oversubscribe -np "$np" "$bin" "$ckpt" \
		--spec "$out/spec$np.json" --backend "$backend" $flags >"$out/line" ||
		die "np $np $mode: mpirun failed"; } 2>"$out/cpu"
	t1=$(date +%s.%N)
	cpu=$(tail -1 "$out/cpu")
	sed "s/}\$/,\"wall\":$(awk "BEGIN { printf \"%.3f\", $t1 - $t0 }"),\"user\":${cpu% *},\"sys\":${cpu#* }}/" \
		"$out/line" >>"$out/$np-$mode.jsonl"
}

for np in $nps; do spec "$np"; done
for ((r = 1; r <= rounds; r++)); do
	for np in $nps; do
		order=$modes
		((r % 2)) || order=$(printf '%s\n' $modes | tac)
		for mode in $order; do run "$np" "$mode"; done
	done
done

python3 - "$out" "$size" "$rounds" "$modes" $nps <<'PY'
import json, statistics, sys
out, size, rounds, modes, nps = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5:]
names = {"independent": "independent loads", "once": "--read-once",
         "once-base": "--read-once, BASE"}
def med(np, mode, key):
    rows = [json.loads(l) for l in open(f"{out}/{np}-{mode}.jsonl")]
    return statistics.median(r[key] for r in rows)
print(f"checkpoint {size} bytes, {rounds} rounds, medians, cold page cache\n")
print(f"| ranks | mode | load s | mpirun wall s | user s | sys s | bytes read | x checkpoint | load s vs {names[modes[0]]} |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for np in nps:
    base = med(np, modes[0], "seconds")
    for mode in modes:
        s, w, b = med(np, mode, "seconds"), med(np, mode, "wall"), med(np, mode, "bytes_read")
        u, k = med(np, mode, "user"), med(np, mode, "sys")
        print(f"| {np} | {names[mode]} | {s:.2f} | {w:.2f} | {u:.2f} | {k:.2f} | {int(b)} | {b / size:.2f} | {s / base:.2f} |")
PY
