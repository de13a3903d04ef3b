#!/usr/bin/env bash
# load_vs_fio.sh - the loader's benchmark (docs/benchmarks.md): on one >= 2 GiB
# checkpoint read whole, interleaved over ROUNDS rounds with the page cache
# dropped before every run, compares
#   ringload load   bytes / wall time of the whole process
#   fio             --rw=read --bs=1M --iodepth=16 --ioengine=io_uring --direct=1
#                   --fixedbufs --registerfiles (its own bandwidth)
#   cat             cold buffered read (what mmap-based loaders get)
# and prints a markdown table of medians and ratios, then the peak memory
# of a load with caller-supplied staging and a 64 MiB in-flight bound.
#
#   perf/load_vs_fio.sh [CHECKPOINT] [ROUNDS]     (root: drops caches)
#
# Without CHECKPOINT, a llama-like BF16 checkpoint of 2200 MiB (one file) is
# generated once under $RL_BENCH_DIR (default /var/tmp/ringload-bench).
set -euo pipefail

BUILD=${BUILD:-build}
DIR=${RL_BENCH_DIR:-/var/tmp/ringload-bench}
ckpt=${1:-$DIR/llama-2g.safetensors}
rounds=${2:-5}
extra=${RL_LOAD_ARGS:-}

die() { echo "load_vs_fio.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root to drop the page cache"
[ -x "$BUILD/ringload" ] || die "build first (make)"
command -v fio >/dev/null || die "fio not installed (make deps)"

if [ ! -e "$ckpt" ]; then
	mkdir -p "$(dirname "$ckpt")"
	if [ -x "$BUILD/mkckpt" ]; then
		"$BUILD/mkckpt" "$ckpt" --size 2200M --files 1 --seed 1 >/dev/null ||
			die "mkckpt failed"
	else
		die "no $ckpt and no $BUILD/mkckpt to generate it"
	fi
fi
size=$(stat -c %s "$ckpt")
[ "$size" -ge $((2 << 30)) ] || echo "warning: $ckpt is under 2 GiB" >&2

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
calc() { awk "BEGIN { print $1 }"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

rl=() fio_bw=() fio8_bw=() cat_bw=()
for r in $(seq "$rounds"); do
	drop
	t0=$(now)
	# shellcheck disable=SC2086
	"$BUILD/ringload" load "$ckpt" --quiet $extra >/dev/null
	t1=$(now)
	rl+=("$(calc "$size / ($t1 - $t0) / 1e9")")

	drop
	bw=$(fio --name=seq --filename="$ckpt" --rw=read --bs=1M --iodepth=16 \
		--ioengine=io_uring --direct=1 --fixedbufs --registerfiles \
		--size="$size" --output-format=terse --terse-version=3 | cut -d';' -f7)
	fio_bw+=("$(calc "$bw * 1024 / 1e9")")   # terse bw is KiB/s

	# The same job with 8 MiB blocks: what the drive gives large requests
	# (reported for context; the target is the 1M job above).
	drop
	bw=$(fio --name=seq8 --filename="$ckpt" --rw=read --bs=8M --iodepth=16 \
		--ioengine=io_uring --direct=1 --fixedbufs --registerfiles \
		--size="$size" --output-format=terse --terse-version=3 | cut -d';' -f7)
	fio8_bw+=("$(calc "$bw * 1024 / 1e9")")

	drop
	t0=$(now)
	cat "$ckpt" >/dev/null
	t1=$(now)
	cat_bw+=("$(calc "$size / ($t1 - $t0) / 1e9")")
	printf 'round %d: ringload %.2f, fio %.2f, fio 8M %.2f, cat %.2f GB/s\n' "$r" \
		"${rl[-1]}" "${fio_bw[-1]}" "${fio8_bw[-1]}" "${cat_bw[-1]}" >&2
done

m_rl=$(printf '%s\n' "${rl[@]}" | median)
m_fio=$(printf '%s\n' "${fio_bw[@]}" | median)
m_fio8=$(printf '%s\n' "${fio8_bw[@]}" | median)
m_cat=$(printf '%s\n' "${cat_bw[@]}" | median)

# Peak memory: caller staging (the checkpoint's size) + 64 MiB bound.
drop
peak_kb=$( { /usr/bin/time -f '%M' "$BUILD/ringload" load "$ckpt" --quiet \
	--staging caller --inflight-bytes 64M >/dev/null; } 2>&1 | tail -n 1)
limit_mib=$(( size / 1048576 + 64 + 64 ))

echo
echo "$(basename "$ckpt"): $size bytes, $rounds rounds interleaved, cold cache, medians"
echo
echo "| reader | GB/s | ringload / reader |"
echo "|---|---|---|"
printf '| ringload load (whole process) | %.2f | 1.00 |\n' "$m_rl"
printf '| fio io_uring 1M QD16 direct fixedbufs | %.2f | %.2f |\n' "$m_fio" "$(calc "$m_rl / $m_fio")"
printf '| fio, same job with --bs=8M (for context) | %.2f | %.2f |\n' "$m_fio8" "$(calc "$m_rl / $m_fio8")"
printf '| cat, cold page cache (read_ahead_kb %s) | %.2f | %.2f |\n' \
	"$(cat "/sys/class/block/$(basename "$(df --output=source "$ckpt" | tail -n 1)")/queue/read_ahead_kb" 2>/dev/null || echo '?')" \
	"$m_cat" "$(calc "$m_rl / $m_cat")"
echo
printf 'peak RSS with --staging caller --inflight-bytes 64M: %d MiB; limit staging %d MiB + bound 64 MiB + 64 MiB = %d MiB: %s\n' \
	$((peak_kb / 1024)) $((size / 1048576)) "$limit_mib" \
	"$([ $((peak_kb / 1024)) -le "$limit_mib" ] && echo within || echo OVER)"
