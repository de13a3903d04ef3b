#!/usr/bin/env bash
# stream_pool.sh - issue 33 item 4: a streaming load's window pool sized to
# the medium against one sized to the budget, whole processes.
#
# Two ringload binaries load the same file under the same --staging-budget:
# NEW ($BUILD/ringload: the pool is the smallest of the budget, the load's
# staging and the medium's) and BASE (BASE_BIN, else built from BASE_REV
# with `git archive` into $OUT/base: the pool is the budget or the
# staging). ROUNDS interleaved rounds (the order alternates), each a whole
# process timed from exec to exit, on each of MEDIA: tmpfs (a copy in
# /dev/shm) and disk (the file under DIR; cold when COLD=1, which drops the
# page cache before every load and needs root; else the page cache decides
# and the result says how many bytes were buffered). Per medium and binary:
# medians of wall seconds, GB/s (bytes needed / wall), the load's own read
# GB/s, pool bytes, bytes read / needed and peak RSS; then NEW/BASE.
#
#   perf/stream_pool.sh                          (2G, 5 rounds, tmpfs disk)
#   SIZE=256M ROUNDS=3 perf/stream_pool.sh      (a quick check)
#   sudo COLD=1 perf/stream_pool.sh             (the quiet measurement)
#
# Settings (environment): SIZE (2G), ROUNDS (5), MEDIA ("tmpfs disk"),
# BUDGET (256M), BASE_REV (the commit before "stream: size the window pool
# to the medium": 736a269), BASE_BIN, BUILD (build), OUT (bench-out),
# DIR (/var/tmp/rlpool), COLD (0), LOAD_ARGS (more ringload load options).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
SIZE=${SIZE:-2G} ROUNDS=${ROUNDS:-5} MEDIA=${MEDIA:-"tmpfs disk"} BUDGET=${BUDGET:-256M}
BASE_REV=${BASE_REV:-736a269} BUILD=${BUILD:-build} OUT=${OUT:-bench-out}
DIR=${DIR:-/var/tmp/rlpool} COLD=${COLD:-0} LOAD_ARGS=${LOAD_ARGS:-}
new=$root/$BUILD/ringload
mkdir -p "$OUT" "$DIR"

if [ -z "${BASE_BIN:-}" ]; then
	base=$OUT/base-$BASE_REV
	if [ ! -x "$base/build/ringload" ]; then
		echo "building the base ($BASE_REV) in $base" >&2
		rm -rf "$base" && mkdir -p "$base"
		git -C "$root" archive "$BASE_REV" | tar -x -C "$base"
		make -C "$base" -j"$(nproc)" build/ringload >/dev/null
	fi
	BASE_BIN=$base/build/ringload
fi
[ -x "$new" ] || make -C "$root" -j"$(nproc)" "$BUILD/ringload" >/dev/null

file=$DIR/ckpt-$SIZE.safetensors
[ -f "$file" ] || "$root/$BUILD/mkckpt" "$file" --size "$SIZE" >/dev/null
shm=$(mktemp -d /dev/shm/rlpool.XXXXXX)
trap 'rm -rf "$shm"' EXIT
raw=$OUT/stream-pool-$(date -u +%Y%m%d-%H%M%S).tsv
printf 'medium\tbinary\twall_s\tneeded\tread\tread_gbps\tpool\tbuffered\trss_kib\n' >"$raw"

# One load: a row of $raw.
one() {
	local medium=$1 name=$2 bin=$3 f=$4 t0 t1 json rss
	if [ "$medium" = disk ] && [ "$COLD" = 1 ]; then
		sync && echo 1 >/proc/sys/vm/drop_caches
	fi
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	json=$(/usr/bin/time -f '%M' -o "$shm/rss" "$bin" load "$f" --staging-budget "$BUDGET" \
		--quiet --json $LOAD_ARGS)
	t1=$(date +%s.%N)
	rss=$(tail -n 1 "$shm/rss")
	python3 -c '
import json, sys
d = json.loads(sys.argv[1])["stats"]
s = d["shape"]["stream"] or {}
pool = s.get("pool_bytes", s.get("windows", 0) * s.get("window_bytes", 0))
print("\t".join(str(x) for x in (sys.argv[2], sys.argv[3],
      "%.4f" % (float(sys.argv[5]) - float(sys.argv[4])), d["bytes_needed"], d["bytes_read"],
      "%.3f" % d["gbps"], pool, d["shape"]["bytes_buffered"], sys.argv[6])))
' "$json" "$medium" "$name" "$t0" "$t1" "$rss" >>"$raw"
}

for medium in $MEDIA; do
	f=$file
	if [ "$medium" = tmpfs ]; then
		cp "$file" "$shm/" && f=$shm/$(basename "$file")
	fi
	for ((r = 0; r < ROUNDS; r++)); do
		if ((r % 2)); then
			one "$medium" base "$BASE_BIN" "$f"; one "$medium" new "$new" "$f"
		else
			one "$medium" new "$new" "$f"; one "$medium" base "$BASE_BIN" "$f"
		fi
	done
	[ "$medium" = tmpfs ] && rm -f "$f"
done

echo "# $(basename "$file") ($SIZE), --staging-budget $BUDGET, $ROUNDS rounds, cold=$COLD;" \
	"$(nproc) CPUs; $(uptime | sed 's/.*load/load/')"
python3 - "$raw" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
med = lambda xs: statistics.median(xs)
for m in dict.fromkeys(r["medium"] for r in rows):
    got = {}
    for b in ("base", "new"):
        rs = [r for r in rows if r["medium"] == m and r["binary"] == b]
        wall = med([float(r["wall_s"]) for r in rs])
        need = int(rs[0]["needed"])
        got[b] = need / wall / 1e9
        print(f"{m:5} {b:4}: wall {wall:.3f} s, {got[b]:.2f} GB/s "
              f"(read {med([float(r['read_gbps']) for r in rs]):.2f}), "
              f"pool {med([int(r['pool']) for r in rs]) / 2**20:.0f} MiB, "
              f"read/needed {med([int(r['read']) for r in rs]) / need:.3f}, "
              f"buffered {med([int(r['buffered']) for r in rs]) / 2**20:.0f} MiB, "
              f"RSS {med([int(r['rss_kib']) for r in rs]) / 1024:.0f} MiB")
    print(f"{m:5} new/base: {got['new'] / got['base']:.3f}")
EOF
echo "rows: $raw"
