#!/usr/bin/env bash
# before_after.sh - does a change slow loads down (issue 30's "Done when")?
# Two builds of ringload, OLD and NEW, load one generated checkpoint as
# whole processes (`ringload load CKPT --quiet`), interleaved run by run,
# in four cases: whole staging and streaming (--staging-budget 256M), each
# hot (the file in the page cache) and cold (page cache dropped before the
# run). Within a round each case runs once per build, the build that goes
# first alternating from round to round (round 0 OLD NEW, round 1 NEW OLD),
# so that neither build always follows the other. Prints the medians of
# wall time, CPU time (user + sys) and peak RSS per case and build, and the
# new/old ratios (below 1: NEW is faster).
#
#   perf/before_after.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]   (root: drops caches)
#
# The checkpoint is made once by NEW's mkckpt (CKPT, default
# /var/tmp/before_after_1g.safetensors, SIZE 1G) and kept for later runs.
# A build directory is what `make` leaves in build/ of a tree, for example
# /work/wt-base/build of `git worktree add /work/wt-base 14c0ec7 && make -C
# /work/wt-base -j2`. The figures mean something only on a quiet machine:
# the header prints the load average before the runs.
set -euo pipefail

old=${1:?usage: before_after.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]}
new=${2:?usage: before_after.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]}
rounds=${3:-5}
ckpt=${CKPT:-/var/tmp/before_after_1g.safetensors}
size=${SIZE:-1G}
budget=256M

die() { echo "before_after.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root to drop the page cache"
[ -x /usr/bin/time ] || die "/usr/bin/time not installed (Debian package time)"
for b in "$old" "$new"; do
	[ -x "$b/ringload" ] || die "$b/ringload: not built (make)"
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS: a positive integer, not '$rounds'"
if [ ! -r "$ckpt" ]; then
	[ -x "$new/mkckpt" ] || die "$new/mkckpt: not built (make)"
	"$new/mkckpt" "$ckpt" --size "$size" >/dev/null || die "mkckpt $ckpt failed"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# Every page of the file in the page cache (cheap when it already is).
warm() { cat "$ckpt" >/dev/null; }

# One timed load of case $2 by build $1 (old|new): appends
# "wall cpu maxrss_kib" to $tmp/$2.$1.
run() {
	local who=$1 case=$2 dir t0 t1
	local -a args=(load "$ckpt" --quiet)

	dir=$([ "$who" = old ] && echo "$old" || echo "$new")
	case $case in
	stream-*) args+=(--staging-budget "$budget") ;;
	esac
	case $case in
	*-cold) drop ;;
	*) warm ;;
	esac
	t0=$(date +%s%N)
	/usr/bin/time -f '%U %S %M' -o "$tmp/t" "$dir/ringload" "${args[@]}" >/dev/null ||
		die "$who $case: ringload load failed"
	t1=$(date +%s%N)
	# wall to the nanosecond (time's %e has 10 ms steps); CPU and RSS from time
	awk -v ns=$((t1 - t0)) '{ printf "%.4f %.3f %s\n", ns / 1e9, $1 + $2, $3 }' "$tmp/t" \
		>>"$tmp/$case.$who"
}

cases=(whole-hot stream-hot whole-cold stream-cold)
load=$(cut -d' ' -f1-3 /proc/loadavg)
for ((i = 0; i < rounds; i++)); do
	for c in "${cases[@]}"; do
		if ((i % 2)); then run new "$c"; run old "$c"
		else run old "$c"; run new "$c"; fi
	done
done

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
col() { cut -d' ' -f"$2" "$tmp/$1" | median; }
bytes=$(stat -c %s "$ckpt")
echo "$ckpt: $bytes bytes, $rounds rounds, budget $budget (streaming), load average $load before, $(cut -d' ' -f1-3 /proc/loadavg) after"
echo "old $old ($(git -C "$old/.." rev-parse --short HEAD 2>/dev/null || echo '?')), new $new ($(git -C "$new/.." rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "| case | old wall s | new wall s | new/old wall | old CPU s | new CPU s | new/old CPU | old RSS MiB | new RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in "${cases[@]}"; do
	awk -v c="$c" -v ow="$(col "$c.old" 1)" -v nw="$(col "$c.new" 1)" \
		-v oc="$(col "$c.old" 2)" -v nc="$(col "$c.new" 2)" \
		-v om="$(col "$c.old" 3)" -v nm="$(col "$c.new" 3)" 'BEGIN {
		printf "| %s | %.3f | %.3f | %.3fx | %.3f | %.3f | %.2fx | %.0f | %.0f |\n",
			c, ow, nw, (ow > 0 ? nw / ow : 0), oc, nc, (oc > 0 ? nc / oc : 0), om / 1024, nm / 1024 }'
done
