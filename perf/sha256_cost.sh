#!/usr/bin/env bash
# sha256_cost.sh - what SHA-256 on the I/O path costs `ringload load`
# (issue 11, item 7; docs/benchmarks.md, "SHA-256 on the I/O path").
#
# One checkpoint file, ROUNDS interleaved rounds (the order alternates
# every round) of `ringload load FILE` without and with `--sha256
# FILE=HEX`, each run timed as a whole process (GNU time: wall, user, sys).
# Cold by default: the page cache is dropped before every run (needs root;
# COLD=0, or not root: hot runs, and the script says so). Prints each run
# and the medians: GB/s, CPU seconds (user + sys), the ratio with /
# without and the extra CPU seconds per GB, and the single-thread rate of `sha256sum` on the same file for reference (the
# floor of any loader that hashes after reading).
#
#   sudo perf/sha256_cost.sh                  (SIZE=4G ROUNDS=5 by default)
#   SIZE=64M ROUNDS=2 perf/sha256_cost.sh     (a smoke run)
#
# Settings (environment): SIZE (checkpoint bytes, default 4G), ROUNDS (5),
# COLD (1), WORKERS (--workers; default automatic), DIR (/var/tmp/rlsha:
# where the file lives), BUILD (build), RL_LOAD_ARGS (more load options).
set -euo pipefail

SIZE=${SIZE:-4G} ROUNDS=${ROUNDS:-5} COLD=${COLD:-1} DIR=${DIR:-/var/tmp/rlsha}
BUILD=${BUILD:-build} WORKERS=${WORKERS:-}
rl=$BUILD/ringload
[ -x "$rl" ] && [ -x "$BUILD/mkckpt" ] || { echo "sha256_cost.sh: build first (make)" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || { echo "sha256_cost.sh: needs GNU time (apt install time)" >&2; exit 1; }
if [ "$COLD" = 1 ] && [ "$(id -u)" != 0 ]; then
	echo "sha256_cost.sh: not root: hot runs (page cache not dropped)" >&2
	COLD=0
fi

mkdir -p "$DIR"
file=$DIR/sha-$SIZE.safetensors
[ -s "$file" ] || "$BUILD/mkckpt" "$file" --size "$SIZE" >/dev/null
bytes=$(stat -c %s "$file")
t0=$(date +%s.%N)
hex=$(sha256sum "$file" | cut -d' ' -f1)
t1=$(date +%s.%N)
ref=$(awk -v b="$bytes" -v a="$t0" -v c="$t1" 'BEGIN { printf "%.3f", b / (c - a) / 1e9 }')
args=(--quiet ${WORKERS:+--workers "$WORKERS"} ${RL_LOAD_ARGS:-})
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run: prints "wall user sys".
run() {
	local mode=$1 extra=()
	[ "$mode" = with ] && extra=(--sha256 "$file=$hex")
	[ "$COLD" = 1 ] && { sync; echo 3 > /proc/sys/vm/drop_caches; }
	/usr/bin/time -f "%e %U %S" -o "$tmp/time" "$rl" load "$file" "${args[@]}" \
		"${extra[@]}" --json > "$tmp/json" 2> "$tmp/err" ||
		{ echo "sha256_cost.sh: load failed:" >&2; cat "$tmp/err" >&2; exit 1; }
	read -r wall user sys < "$tmp/time"
	echo "$wall $user $sys"
}

echo "file $file: $bytes bytes; $([ "$COLD" = 1 ] && echo cold || echo hot) runs; sha256sum alone: $ref GB/s"
printf '%-8s %-5s %8s %8s %8s\n' round mode GB/s wall cpu
for ((r = 1; r <= ROUNDS; r++)); do
	order=(without with)
	((r % 2 == 0)) && order=(with without)
	for m in "${order[@]}"; do
		read -r wall user sys < <(run "$m")
		cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
		gbps=$(awk -v b="$bytes" -v w="$wall" 'BEGIN { printf "%.3f", b / w / 1e9 }')
		printf '%-8s %-5s %8s %8s %8s\n' "$r" "$m" "$gbps" "$wall" "$cpu"
		echo "$m $gbps $cpu" >> "$tmp/all"
	done
done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for m in without with; do
	g=$(awk -v m="$m" '$1 == m { print $2 }' "$tmp/all" | median)
	c=$(awk -v m="$m" '$1 == m { print $3 }' "$tmp/all" | median)
	echo "median $m: $g GB/s, $c CPU s"
	eval "g_$m=$g c_$m=$c"
done
awk -v a="$g_with" -v b="$g_without" -v c="$c_with" -v d="$c_without" -v n="$bytes" \
	'BEGIN { printf "with / without: %.3f of the rate, %+.3f CPU s (%.2f CPU s per GB)\n",
		 a / b, c - d, (c - d) / (n / 1e9) }'
