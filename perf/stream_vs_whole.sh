#!/usr/bin/env bash
# stream_vs_whole.sh - what streaming staging costs (docs/streaming.md,
# docs/benchmarks.md): `ringload load CKPT` with whole staging against
# `ringload load CKPT --staging-budget BUDGET`, interleaved over ROUNDS
# rounds, page cache dropped before every run; prints the medians of wall
# time, CPU time (user + sys) and peak RSS of the whole process, and the
# streaming/whole ratios. With OUT=DIR both also write their dump (--out,
# replaced every run) under DIR, as `ringload load --out` does for a runtime.
#
#   [OUT=DIR] perf/stream_vs_whole.sh CHECKPOINT [ROUNDS] [BUDGET]   (root: drops caches)
set -euo pipefail

BUILD=${BUILD:-build}
ckpt=${1:?usage: stream_vs_whole.sh CHECKPOINT [ROUNDS] [BUDGET]}
rounds=${2:-5}
budget=${3:-256M}

die() { echo "stream_vs_whole.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root to drop the page cache"
[ -x "$BUILD/ringload" ] || die "build first (make)"
[ -x /usr/bin/time ] || die "/usr/bin/time not installed (Debian package time)"
[ -r "$ckpt" ] || die "$ckpt: not readable"

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One timed load: appends "wall cpu maxrss_kib" to $tmp/$1.
run() {
	local name=$1; shift
	drop
	[ -z "${OUT:-}" ] || set -- "$@" --out "$OUT/$name" --force
	/usr/bin/time -f '%e %U %S %M' -o "$tmp/t" "$BUILD/ringload" load "$ckpt" --quiet "$@" \
		>/dev/null || die "$name: ringload load failed"
	awk '{ printf "%s %.3f %s\n", $1, $2 + $3, $4 }' "$tmp/t" >>"$tmp/$name"
}

for ((i = 0; i < rounds; i++)); do
	if ((i % 2)); then run stream --staging-budget "$budget"; run whole
	else run whole; run stream --staging-budget "$budget"; fi
done

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
col() { cut -d' ' -f"$2" "$tmp/$1" | median; }
size=$(stat -c %s "$ckpt")
echo "$ckpt: $size bytes, $rounds rounds, budget $budget, out ${OUT:-none}, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| staging | wall s | GB/s | CPU s | peak RSS MiB |"
echo "|---|---|---|---|---|"
for n in whole stream; do
	w=$(col $n 1); c=$(col $n 2); m=$(col $n 3)
	awk -v n="$n" -v w="$w" -v c="$c" -v m="$m" -v s="$size" \
		'BEGIN { printf "| %s | %.3f | %.2f | %.3f | %.0f |\n", n, w, s / w / 1e9, c, m / 1024 }'
done
awk -v ws="$(col stream 1)" -v ww="$(col whole 1)" -v cs="$(col stream 2)" -v cw="$(col whole 2)" \
	'BEGIN { printf "stream/whole: wall %.2fx, CPU %.2fx\n", ws / ww, cs / cw }'
