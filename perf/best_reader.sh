#!/usr/bin/env bash
# best_reader.sh - issue 33 item 3: ringload against the best reader of the
# same bytes on the same medium, cold, whole processes.
#
# Two files under DIR, written once by safetensors' writer (the venv's
# python): "large", 32 F32 tensors of 4096x4096 (2 GiB: few large
# tensors), and "small", SMALL_N F32 tensors of 64 KiB each (many small
# tensors, 1.25 GiB for 20,000). For each file, ROUNDS interleaved rounds
# (the readers in a new random order each round, from SEED: a reader that
# follows one that freed gigabytes pays this VM's slow faults, and a fixed
# neighbour would always make the same one pay), the page cache dropped
# and, with PRIME=1, the file's size of fresh memory touched
# (build/perf/bench_fill, docs/benchmarks.md "Method") before every run,
# each reader a whole process under /usr/bin/time:
#   fio       seq read of the file, --direct=0 and --direct=1, bs 1M and 4M,
#             io_uring at iodepth 16 and 64, psync (depth 1), numjobs 1
#             and 2 (two jobs read a half each: --offset_increment), the
#             fio process's wall time (FIO_GRID=small: bs 4M, numjobs 1)
#   cat       cat FILE >/dev/null (buffered, the kernel's readahead)
#   st-mmap   safetensors.torch.load_file, every page of every tensor touched
#   rl-whole  ringload load FILE (auto, direct, buffered)
#   rl-stream ringload load FILE --staging-budget 256M (auto, buffered)
#   rl-torch  ringload.torch.load_file, every page touched (auto, buffered)
#   st-numpy, rl-numpy  safetensors.numpy's and ringload.numpy's load_file,
#             every page touched (auto)
# GB/s is the file's bytes over the whole process's wall time (python
# readers pay their imports, fio its setup: their "call GB/s" column is
# the load call and the touch, as perf/py_peers.py times it, and fio's own
# bandwidth). A reader's ratio to the best takes the better of its two. Prints one markdown table
# per file: median GB/s, the median of the call alone where there is one,
# and each reader's ratio to the best median; raw rows go to OUT.
#
#   perf/best_reader.sh [ROUNDS]                  (root: drops caches; 3 rounds)
#
# Settings (environment): DIR (/var/tmp/ringload-best), FILES ("large
# small"), SMALL_N (20000), FIO_GRID (full|small), BUDGET (256M), PRIME (1),
# SEED (the time), BUILD (build), OUT (bench-out), PY (the venv's python:
# make -s print-venv-python), BASE (a built tree of another revision, e.g.
# a git archive of main built with make: its rl-whole, rl-stream,
# rl-torch and rl-numpy run too, as base-*, interleaved with the rest: before/after).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
ROUNDS=${1:-${ROUNDS:-3}}
DIR=${DIR:-/var/tmp/ringload-best} FILES=${FILES:-"large small"} SMALL_N=${SMALL_N:-20000}
FIO_GRID=${FIO_GRID:-full} BUDGET=${BUDGET:-256M} BUILD=${BUILD:-build} OUT=${OUT:-bench-out}
PRIME=${PRIME:-1} SEED=${SEED:-$(date +%s)}
PY=${PY:-$(make -s -C "$root" print-venv-python)}
BASE=${BASE:-}
rl=$root/$BUILD/ringload

die() { echo "best_reader.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root to drop the page cache"
[ -x "$rl" ] || die "build first (make)"
[ -z "$BASE" ] || [ -x "$BASE/$BUILD/ringload" ] || die "BASE=$BASE: no $BASE/$BUILD/ringload (make there)"
[ "$PRIME" != 1 ] || [ -x "$root/$BUILD/perf/bench_fill" ] || die "no $BUILD/perf/bench_fill (make)"
command -v fio >/dev/null || die "fio not installed (make deps)"
[ -x /usr/bin/time ] || die "needs /usr/bin/time (apt-get install time)"
"$PY" -c "import safetensors, torch" 2>/dev/null || die "$PY lacks safetensors or torch (make pydeps)"
mkdir -p "$DIR" "$OUT"

# The files, written once.
make_file() {
	local kind=$1 path=$DIR/$1.safetensors
	[ -f "$path" ] && return 0
	echo "writing $path" >&2
	"$PY" - "$kind" "$path" "$SMALL_N" <<'EOF'
import sys
import numpy as np
import safetensors.numpy
kind, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(33)
if kind == "large":
    d = {f"t{i:02d}": rng.standard_normal((4096, 4096), dtype=np.float32) for i in range(32)}
else:
    d = {f"t{i:05d}": rng.standard_normal(16384, dtype=np.float32) for i in range(n)}
safetensors.numpy.save_file(d, path + ".tmp")
import os
os.rename(path + ".tmp", path)
EOF
}

# The python child: the clock around the load call and one byte of every
# page of every tensor; prints "SECONDS".
CHILD='
import sys, time, torch
reader, path, mode = sys.argv[1], sys.argv[2], sys.argv[3]
kw = {} if mode == "auto" else {"read_mode": mode}
if reader == "st-mmap":
    import safetensors.torch
    load = lambda: safetensors.torch.load_file(path)
elif reader == "st-numpy":
    import safetensors.numpy
    load = lambda: safetensors.numpy.load_file(path)
elif reader == "rl-numpy":
    import ringload.numpy
    load = lambda: ringload.numpy.load_file(path, **kw)
else:
    import ringload.torch
    load = lambda: ringload.torch.load_file(path, **kw)
t0 = time.perf_counter()
out = load()
s = 0
for t in out.values():
    if not isinstance(t, torch.Tensor):  # numpy: the same touch
        t = torch.from_numpy(t)
    if t.numel():
        b = t.reshape(-1).view(torch.uint8)
        s += int(b[::4096].sum()) + int(b[-1])
print(time.perf_counter() - t0)
'

# The readers: "name|command" (FILE and SIZE substituted at run time).
readers() {
	local bss=(1M 4M) jobs=(1 2) depths=(16 64)
	if [ "$FIO_GRID" = small ]; then bss=(4M) jobs=(1); fi
	for d in 1 0; do
		for bs in "${bss[@]}"; do
			for nj in "${jobs[@]}"; do
				for qd in "${depths[@]}"; do
					echo "fio-uring-d$d-$bs-qd$qd-j$nj|fio io_uring $d $bs $qd $nj"
				done
				echo "fio-psync-d$d-$bs-j$nj|fio psync $d $bs 1 $nj"
			done
		done
	done
	echo "cat|cat"
	echo "st-mmap|py st-mmap auto"
	echo "rl-whole|rl whole auto"
	echo "rl-whole-direct|rl whole direct"
	echo "rl-whole-buffered|rl whole buffered"
	echo "rl-stream|rl stream auto"
	echo "rl-stream-buffered|rl stream buffered"
	echo "rl-torch|py rl-torch auto"
	echo "rl-torch-buffered|py rl-torch buffered"
	echo "st-numpy|py st-numpy auto"
	echo "rl-numpy|py rl-numpy auto"
	if [ -n "$BASE" ]; then
		echo "base-rl-whole|rl whole auto base"
		echo "base-rl-stream|rl stream auto base"
		echo "base-rl-torch|py rl-torch auto base"
		echo "base-rl-numpy|py rl-numpy auto base"
	fi
}

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# One run: prints "WALL CALL" (CALL "-" where the reader has no call time).
run_one() {
	local file=$1 size=$2 kind=$3 a b c d e tf call="-" tree=$root
	read -r kind a b c d e <<<"$4"
	[ "$c" = base ] && [ "$kind" != fio ] && tree=$BASE
	tf=$(mktemp)
	drop
	[ "$PRIME" != 1 ] || "$root/$BUILD/perf/bench_fill" "$size" >/dev/null
	case $kind in
	fio)
		# e jobs of a share each, a multiple of 4 MiB (O_DIRECT offsets;
		# the last < 4 MiB per job unread: wall GB/s counts the file);
		# its own bandwidth (terse field 7, KiB/s) as the "call" time
		local share=$(((size / e) >> 22 << 22))
		call=$(/usr/bin/time -f %e -o "$tf" fio --name=r --filename="$file" --rw=read \
			--bs="$c" --ioengine="$a" --direct="$b" --iodepth="$d" --numjobs="$e" \
			--size="$share" --offset_increment="$share" --group_reporting \
			--invalidate=1 --output-format=terse --terse-version=3 |
			awk -F';' -v s="$size" '$7 > 0 { print s / ($7 * 1024) }') ||
			die "fio $4 failed"
		[ -n "$call" ] || die "fio $4: no bandwidth" ;;
	cat)
		/usr/bin/time -f %e -o "$tf" cat "$file" >/dev/null ;;
	rl)
		local extra=(--read-mode "$b")
		[ "$a" = stream ] && extra+=(--staging-budget "$BUDGET")
		/usr/bin/time -f %e -o "$tf" "$tree/$BUILD/ringload" load "$file" --quiet "${extra[@]}" ;;
	py)
		call=$(PYTHONPATH=$tree/python /usr/bin/time -f %e -o "$tf" "$PY" -c "$CHILD" \
			"$a" "$file" "$b") ;;
	esac
	echo "$(tail -n 1 "$tf") $call"
	rm -f "$tf"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; else print "-"}'; }

raw=$OUT/best-reader-$(date -u +%Y%m%d-%H%M%S).tsv
printf 'file\treader\tround\twall_s\tcall_s\tgbps\tcall_gbps\n' >"$raw"
mapfile -t list < <(readers)
for kind in $FILES; do
	make_file "$kind"
	file=$DIR/$kind.safetensors
	size=$(stat -c %s "$file")
	for r in $(seq "$ROUNDS"); do
		mapfile -t order < <(printf '%s\n' "${list[@]}" |
			shuf --random-source=<(yes "$SEED-$kind-$r"))
		for entry in "${order[@]}"; do
			name=${entry%%|*}
			read -r wall call <<<"$(run_one "$file" "$size" "$kind" "${entry#*|}")"
			awk -v f="$kind" -v n="$name" -v r="$r" -v w="$wall" -v c="$call" -v s="$size" \
				'BEGIN { printf "%s\t%s\t%d\t%s\t%s\t%.3f\t%s\n", f, n, r, w, c, s / w / 1e9,
					 c == "-" ? "-" : sprintf("%.3f", s / c / 1e9) }' >>"$raw"
		done
		echo "$kind: round $r of $ROUNDS done" >&2
	done
done

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$(uname -n), $(nproc) CPUs, $(date -u +%F), load average $load (machine busy: indicative);" \
	"PRIME=$PRIME SEED=$SEED"
for kind in $FILES; do
	size=$(stat -c %s "$DIR/$kind.safetensors")
	echo
	echo "$kind: $size bytes, $ROUNDS rounds interleaved, cold, medians; raw rows in $raw"
	echo
	echo "| reader | GB/s (whole process) | call GB/s | / best |"
	echo "|---|---:|---:|---:|"
	rows=$(cut -f2 "$raw" | sort -u | grep -v '^reader$' | while read -r name; do
		g=$(awk -F'\t' -v f="$kind" -v n="$name" '$1 == f && $2 == n { print $6 }' "$raw" | median)
		c=$(awk -F'\t' -v f="$kind" -v n="$name" '$1 == f && $2 == n && $7 != "-" { print $7 }' "$raw" | median)
		echo "$name $g $c"
	done)
	best=$(echo "$rows" | awk '{ g = $2; if ($3 != "-" && $3 > g) g = $3; if (g > b) b = g } END { print b }')
	echo "$rows" | sort -k2 -g -r | awk -v b="$best" '{ g = $2; if ($3 != "-" && $3 > g) g = $3
		printf "| %s | %.2f | %s | %.2f |\n", $1, $2, $3, g / b }'
	echo
	echo "best: $best GB/s; each ratio takes the better of a reader's two columns"
done
