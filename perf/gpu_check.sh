#!/usr/bin/env bash
# gpu_check.sh - the GPU half of issue 22, for a machine with a GPU lent:
#
#  1. Correctness against the real driver: `ringload load --device cuda:0
#     --verify` of a small generated checkpoint (whole and sharded over two
#     spec devices sharing GPU 0: every shard read back and compared with
#     the file), and python/tests/test_gpu.py + test_cuda_sink.py with the
#     venv's CUDA torch (VENV_PY).
#  2. The benchmark: a SIZE (16G) checkpoint to cuda:0 from each medium of
#     MEDIA ("loop disk": a loop device over tmpfs with --direct-io=on and
#     ext4, O_DIRECT; the local disk, page cache dropped), ROUNDS (3)
#     interleaved rounds, whole processes timed exec to exit, medians:
#       ringload  build/ringload load F --device cuda:0 --staging-budget
#                 BUDGET (256M) --json (its peak_host_bytes kept too)
#       fio       fio's best over numjobs 1..cores x bs 1M/4M x QD 16/64
#                 (io_uring, O_DIRECT, fixedbufs) on the same file, once
#                 per medium (its own bandwidth)
#       st        safetensors.torch.load_file(F, device="cuda:0")
#       fst       fastsafetensors SafeTensorsFileLoader(nogds=True) to
#                 cuda:0, copy_files_to_device + get_tensor of every key
#                 (where importable)
#     Writes OUT/gpu-STAMP.md: a table per medium (GB/s, ratio to fio's
#     best, peak host memory) and the targets of issue 22 (>= 0.9x fio,
#     host <= budget + 10%, >= 1.5x fastsafetensors).
#
# DRY=1: no GPU needed: SIZE 256M, the fake driver of the tests
# (build/tests/fakecuda, RL_LIBCUDA) for ringload, the Python peers and
# the real-driver tests skipped; checks the script's non-GPU parts.
# Needs root (drop_caches, losetup, mount), fio, make before.
set -euo pipefail
me=gpu_check.sh kind=gpu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
DRY=${DRY:-0}
BUDGET=${BUDGET:-256M}
MEDIA=${MEDIA:-"loop disk"}
VENV_PY=${VENV_PY:-/root/.cache/ringload/venv-probe/bin/python}
if [ "$DRY" = 1 ]; then
	SIZE=${SIZE:-256M}
	export RL_LIBCUDA=$PWD/${BUILD:-build}/tests/fakecuda/libcuda.so.1 FAKECUDA_DEVICES=1 FAKECUDA_DELAY_US=0
	[ -e "$RL_LIBCUDA" ] || { echo "$me: DRY=1 needs $RL_LIBCUDA (make build/tests/test_cuda)" >&2; exit 1; }
else
	SIZE=${SIZE:-16G}
	nvidia-smi -L >/dev/null 2>&1 || { echo "$me: no GPU (nvidia-smi -L fails); DRY=1 checks the rest" >&2; exit 1; }
fi
# shellcheck source=perf/media_lib.sh
. "$here/media_lib.sh"
report=$OUT/gpu-$stamp.md
results=$raw/results.tsv   # medium reader round seconds peak_host_bytes
: >"$results"

# 1. Correctness against the driver (the fake one with DRY=1)
check_driver() {
	local small=$raw/small.safetensors spec=$raw/two.json
	"$BUILD/mkckpt" "$small" --size 64M --files 1 --seed 2 >/dev/null
	printf '{"mesh":{"shape":[2],"axes":["d"]},"rules":[{"match":".*","spec":["d"]}]}' >"$spec"
	"$BUILD/ringload" load "$small" --device cuda:0 --verify --staging-budget 8M ||
		die "ringload load --device cuda:0 --verify failed"
	"$BUILD/ringload" load "$small" --sharding "$spec" --device cuda --device-map 0,0 --verify ||
		die "the sharded load onto one GPU failed"
	if [ "$DRY" != 1 ]; then
		RL_BUILD=$BUILD RINGLOAD_LIB=$PWD/$BUILD/libringload.so.0 PYTHONPATH=python:python/tests \
			"$VENV_PY" -m pytest -q -p no:cacheprovider python/tests/test_gpu.py ||
			die "python/tests/test_gpu.py failed on the GPU"
	fi
}

# One timed process; appends a result line (peak host bytes: ringload's own
# report, else time(1)'s maximum resident set).
run_one() { # medium reader round cmd...
	local m=$1 who=$2 r=$3 peak
	shift 3
	prime
	[ "$COLD" = 1 ] && drop
	timed /usr/bin/time -f '%M' -o "$raw/rss.out" "$@"
	peak=$(( $(tail -n 1 "$raw/rss.out") * 1024 ))
	if [ "$who" = ringload ]; then
		peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_host_bytes"])' "$raw/last.out")
	fi
	printf '%s\t%s\t%s\t%s\t%s\n' "$m" "$who" "$r" "$SECS" "$peak" >>"$results"
}

py_st='import sys, torch, safetensors.torch as st
t = st.load_file(sys.argv[1], device="cuda:0"); torch.cuda.synchronize()'
py_fst='import sys, torch
from fastsafetensors import SafeTensorsFileLoader, SingleGroup
ld = SafeTensorsFileLoader(SingleGroup(), "cuda:0", nogds=True)
ld.add_filenames({0: [sys.argv[1]]}); fb = ld.copy_files_to_device()
ts = [fb.get_tensor(k) for k in ld.get_keys()]; torch.cuda.synchronize()
fb.close(); ld.close()'

peers() { # medium round file
	[ "$DRY" = 1 ] && return 0
	run_one "$1" st "$2" "$VENV_PY" -c "$py_st" "$3"
	if "$VENV_PY" -c 'import fastsafetensors' 2>/dev/null; then
		run_one "$1" fst "$2" "$VENV_PY" -c "$py_fst" "$3"
	fi
}

# fio's best on the file: every job count, block size and depth once.
fio_best() { # medium file
	local m=$1 f=$2 best=0 j bs qd per bw
	for j in $(pow2s "$cores"); do for bs in 1M 4M; do for qd in 16 64; do
		per=$(( bytes / j / 4194304 * 4194304 ))
		[ "$COLD" = 1 ] && drop
		fio --name=best --filename="$f" --rw=read --ioengine=io_uring --direct=1 \
			--fixedbufs --bs="$bs" --iodepth="$qd" --numjobs="$j" --size="$per" \
			--offset_increment="$per" --group_reporting --output-format=json >"$raw/fio.json"
		bw=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs"][0]["read"]["bw_bytes"])' "$raw/fio.json")
		[ "$bw" -gt "$best" ] && best=$bw
	done; done; done
	printf '%s\tfio\t0\t%s\t0\n' "$m" "$(awk -v b="$bytes" -v w="$best" 'BEGIN { printf "%.4f", b / w }')" >>"$results"
}

check_driver
for m in $MEDIA; do
	setup_medium "$m" || continue
	fio_best "$m" "$FILE"
	for r in $(seq 1 "$ROUNDS"); do
		run_one "$m" ringload "$r" "$BUILD/ringload" load "$FILE" --device cuda:0 \
			--staging-budget "$BUDGET" --quiet --json
		peers "$m" "$r" "$FILE"
	done
	teardown_medium
done

python3 - "$results" "$bytes" "$BUDGET" "$SIZE" "$DRY" >"$report" <<'PY'
import statistics, sys
from collections import defaultdict
path, nbytes, budget, size, dry = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
budget_b = int(budget[:-1]) * mult[budget[-1]] if budget[-1] in mult else int(budget)
runs = defaultdict(list)
for line in open(path):
    m, who, r, secs, peak = line.split("\t")
    runs[m, who].append((float(secs), int(peak)))
print(f"# {size} checkpoint to cuda:0{' (DRY=1: the fake driver, no GPU)' if dry == '1' else ''}\n")
for m in sorted({m for m, _ in runs}):
    fio = nbytes / runs[m, "fio"][0][0] / 1e9 if (m, "fio") in runs else None
    print(f"## {m}\n\n| reader | GB/s (median) | x fio best | peak host MiB |\n|---|---|---|---|")
    rates = {}
    for who in ("fio", "ringload", "st", "fst"):
        if (m, who) not in runs:
            continue
        secs = statistics.median(s for s, _ in runs[m, who])
        peak = max(p for _, p in runs[m, who])
        rates[who] = nbytes / secs / 1e9
        ratio = f"{rates[who] / fio:.2f}" if fio else "-"
        print(f"| {who} | {rates[who]:.2f} | {ratio} | {peak / 2**20:.0f} |")
    rl = rates.get("ringload")
    peak = max(p for _, p in runs[m, "ringload"]) if (m, "ringload") in runs else 0
    print()
    if rl and fio:
        print(f"- ringload / fio best: {rl / fio:.2f} (target >= 0.9)")
    print(f"- ringload peak host memory: {peak / 2**20:.0f} MiB against budget + 10% "
          f"{budget_b * 1.1 / 2**20:.0f} MiB")
    if rl and "fst" in rates:
        print(f"- ringload / fastsafetensors (nogds): {rl / rates['fst']:.2f} (target >= 1.5)")
    print()
PY
cat "$report"
echo "$me: report in $report, raw results in $raw" >&2
