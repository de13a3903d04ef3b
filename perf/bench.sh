#!/usr/bin/env bash
# bench.sh - ringload's comparison suite (make bench).
#
#  1. rlperf against fio, the same jobs on the same file, interleaved
#     (rlperf, fio, rlperf, fio, ...) for ROUNDS rounds: sequential 1 MiB at
#     QD16 and random 4 KiB at QD32, io_uring, O_DIRECT. Medians and ratios
#     of bandwidth, IOPS, latency and CPU per GB.
#  2. `ringload load` against fio's sequential read of the whole file (the
#     drive's limit) and a cold buffered read (what mmap-based loaders get):
#     perf/load_vs_fio.sh where it exists, else the same three readers here.
#  3. A markdown report with the date and the machine, saved in OUT, and
#     a chart (gnuplot) of the comparison.
#
# Settings (environment): RL_BENCH_DIR (/var/tmp/rlbench), RL_BENCH_CKPT
# (DIR/ckpt-4g.safetensors, generated if absent), ROUNDS (5), RUNTIME (10 s
# per run), RAMP (1 s), REGISTERED (1 adds --fixedbufs --registerfiles
# variants of both jobs), IOMEM (mmaphuge: both tools read into huge pages;
# malloc: into 4 KiB pages, as fio's default), OUT (bench-out), BUILD (build).
#
# Why huge pages: a 1 MiB read into 4 KiB pages is as many device segments
# as its pages are physically scattered, and a virtio disk takes 254: on
# the development VM each tool's buffers came out anywhere from 17 to 256
# segments per MiB, run to run, so one tool's reads were split in two and
# the other's not, and the comparison measured the page allocator (rlperf
# 0.72x fio on 2026-11-29). In huge pages both make the same 1 MiB device
# requests. fio's mmaphuge needs hugetlb pages: the script reserves them
# and gives them back at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build}
DIR=${RL_BENCH_DIR:-/var/tmp/rlbench}
CKPT=${RL_BENCH_CKPT:-$DIR/ckpt-4g.safetensors}
ROUNDS=${ROUNDS:-5}
RUNTIME=${RUNTIME:-10}
RAMP=${RAMP:-1}
REGISTERED=${REGISTERED:-0}
IOMEM=${IOMEM:-mmaphuge}
OUT=${OUT:-bench-out}
stamp=$(date -u +%Y%m%d-%H%M%S)
raw=$OUT/raw/bench-$stamp
report=$OUT/bench-$stamp.md

die() { echo "bench.sh: $*" >&2; exit 1; }
for t in fio python3 "$BUILD/rlperf" "$BUILD/mkckpt"; do
	command -v "$t" >/dev/null 2>&1 || [ -x "$t" ] || die "$t not found (make deps; make)"
done
mkdir -p "$DIR" "$raw"

if [ ! -e "$CKPT" ]; then
	need=$((5 * 1024 * 1024))  # KiB: the checkpoint and some room
	avail=$(df -Pk "$DIR" | awk 'NR==2 {print $4}')
	[ "$avail" -gt "$need" ] || die "not enough space in $DIR for a 4 GiB checkpoint"
	echo "generating $CKPT (4 GiB, llama-like) ..."
	"$BUILD/mkckpt" "$CKPT" --size 4G
fi
size=$(stat -c %s "$CKPT")

# Huge pages for fio's iomem=mmaphuge: each job's buffers (at most 16 MiB
# here) plus slack, on top of what is reserved already; restored on exit.
hp=/proc/sys/vm/nr_hugepages
if [ "$IOMEM" = mmaphuge ]; then
	hp_old=$(cat "$hp")
	if (echo $((hp_old + 12)) >"$hp") 2>/dev/null && [ "$(cat "$hp")" -ge $((hp_old + 12)) ]; then
		trap 'echo "$hp_old" >"$hp"' EXIT
	else
		echo "$hp_old" >"$hp" 2>/dev/null || true
		echo "bench.sh: cannot reserve 12 huge pages ($hp): IOMEM=malloc, whose device requests depend on page layout" >&2
		IOMEM=malloc
	fi
fi

# The file's device: reads, merges, sectors read (/proc/diskstats).
dev=$(basename "$(findmnt -no SOURCE --target "$CKPT" 2>/dev/null || echo ?)")
diskstats() {
	awk -v d="$dev" '$3 == d {print $4, $5, $6; found = 1} END {if (!found) print 0, 0, 0}' /proc/diskstats
}

# Drops the page cache where permitted, else this file's pages (fadvise).
drop_caches() {
	sync
	if ! (echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
		dd if="$CKPT" iflag=nocache count=0 status=none 2>/dev/null || true
	fi
}

machine() {
	local src dev model sched
	src=$(findmnt -no SOURCE --target "$DIR" 2>/dev/null || echo "?")
	dev=$(basename "$src")
	model=$(cat /sys/block/"$dev"/device/model 2>/dev/null | xargs || true)
	sched=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/block/"$dev"/queue/scheduler 2>/dev/null || true)
	echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	echo "- host: $(uname -srm); $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)); $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) memory; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
	echo "- storage: $src ($(findmnt -no FSTYPE --target "$DIR" 2>/dev/null || echo ?)), model ${model:-unknown (virtual disk?)}, scheduler ${sched:-?}"
	echo "- tools: $(fio --version), $("$BUILD"/rlperf --version), ringload $(git -C "$here/.." describe --always --dirty 2>/dev/null || echo ?)"
	echo "- file: $CKPT ($size bytes); rounds $ROUNDS, runtime ${RUNTIME}s + ramp ${RAMP}s per run"
}

# ---------------------------------------------------------------- rlperf vs fio
jobs=("seq-1M-QD16:--rw=read --bs=1M --iodepth=16"
      "rand-4k-QD32:--rw=randread --bs=4k --iodepth=32")
if [ "$REGISTERED" = 1 ]; then
	jobs+=("seq-1M-QD16-reg:--rw=read --bs=1M --iodepth=16 --fixedbufs --registerfiles"
	       "rand-4k-QD32-reg:--rw=randread --bs=4k --iodepth=32 --fixedbufs --registerfiles")
fi
common="--iomem=$IOMEM --direct=1 --runtime=$RUNTIME --time_based --ramp_time=$RAMP --filename=$CKPT --output-format=json"

machine >"$raw/machine.md"
: >"$raw/compare.tsv"
for round in $(seq 1 "$ROUNDS"); do
	for j in "${jobs[@]}"; do
		name=${j%%:*} args=${j#*:}
		for tool in rlperf fio; do
			out=$raw/$name-$tool-$round.json
			drop_caches
			d0=$(diskstats)
			# shellcheck disable=SC2086
			if [ $tool = rlperf ]; then
				"$BUILD/rlperf" --name="$name" --ioengine=io_uring $args $common >"$out"
			else
				fio --name="$name" --ioengine=io_uring $args $common >"$out"
			fi
			d1=$(diskstats)
			m=$(python3 "$here/benchlib.py" metrics "$out")
			# shellcheck disable=SC2086
			m="$m	$(python3 "$here/benchlib.py" device $d0 $d1)"
			printf '%s\t%s\t%s\t%s\n' "$name" $tool "$round" "$m" >>"$raw/compare.tsv"
			echo "round $round $name $tool: $(echo "$m" | awk '{printf "%.1f MB/s, %.0f IOPS, %.3f CPU s/GB, %d device reads of %.0f KiB", $1/1e6, $2, $5, $6, $8 / 2 / ($6 ? $6 : 1)}')"
		done
	done
done

# ---------------------------------------------------------------- loading
load_section() {
	local have_load=1 t0 t1 r rc=0
	"$BUILD/ringload" load "$CKPT" >/dev/null 2>"$raw/load.err" || have_load=0
	if [ $have_load = 1 ] && [ -x "$here/load_vs_fio.sh" ]; then
		echo "From perf/load_vs_fio.sh:"
		echo
		echo '```'
		BUILD=$BUILD "$here/load_vs_fio.sh" "$CKPT" "$ROUNDS" 2>&1 || rc=$?
		echo '```'
		[ $rc = 0 ] && return
		echo "(load_vs_fio.sh failed with status $rc; the same readers follow)"
		echo
	fi
	: >"$raw/load.tsv"
	for r in $(seq 1 "$ROUNDS"); do
		drop_caches
		t0=$(date +%s.%N)
		fio --name=whole --filename="$CKPT" --rw=read --bs=1M --iodepth=16 --direct=1 \
			--ioengine=io_uring --output-format=json >/dev/null
		t1=$(date +%s.%N)
		echo "fio-seq $r $(awk "BEGIN {print $t1 - $t0}") $size" >>"$raw/load.tsv"
		if [ $have_load = 1 ]; then
			drop_caches
			t0=$(date +%s.%N)
			"$BUILD/ringload" load "$CKPT" >/dev/null
			t1=$(date +%s.%N)
			echo "ringload-load $r $(awk "BEGIN {print $t1 - $t0}") $size" >>"$raw/load.tsv"
		fi
		drop_caches
		t0=$(date +%s.%N)
		cat "$CKPT" >/dev/null
		t1=$(date +%s.%N)
		echo "cold-cat $r $(awk "BEGIN {print $t1 - $t0}") $size" >>"$raw/load.tsv"
	done
	echo "Wall time to read the whole checkpoint, caches dropped before each reader,"
	echo "interleaved rounds; fio-seq: 1 MiB reads at QD16, io_uring, O_DIRECT."
	[ $have_load = 1 ] || echo "ringload load skipped: $(head -c 200 "$raw/load.err")"
	echo
	python3 "$here/benchlib.py" load "$raw/load.tsv"
}

{
	echo "# ringload benchmark $stamp"
	echo
	cat "$raw/machine.md"
	echo "- load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
	echo
	echo "## rlperf vs fio (same job, interleaved, medians)"
	echo
	echo "Every job: io_uring, O_DIRECT, iomem=$IOMEM, ${RUNTIME}s time based after a ${RAMP}s ramp;"
	echo "device reads and merges from /proc/diskstats of $dev (the ramp's included)."
	echo
	python3 "$here/benchlib.py" compare "$raw/compare.tsv"
	echo
	echo "## ringload load vs fio vs a cold buffered read"
	echo
	load_section
} >"$report.tmp"
mv "$report.tmp" "$report"

if command -v gnuplot >/dev/null 2>&1; then
	python3 - "$raw/compare.tsv" >"$raw/compare-med.dat" <<'EOF'
import statistics, sys
by = {}
for l in open(sys.argv[1]):
    job, tool, _r, bw, *_ = l.split()
    by.setdefault(job, {}).setdefault(tool, []).append(float(bw) / 1e6)
for job, t in by.items():
    print(job, statistics.median(t["rlperf"]), statistics.median(t["fio"]))
EOF
	gnuplot -e "in='$raw/compare-med.dat'; out='$OUT/compare-$stamp.svg'" "$here/compare.gp" &&
		echo "chart: $OUT/compare-$stamp.svg"
fi
cat "$report"
echo "report: $report"
