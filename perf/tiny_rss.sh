#!/usr/bin/env bash
# tiny_rss.sh - peak memory and wall time of `ringload plan` and `ringload load` for a file of
# N one-byte U8 tensors (default 1,000,000: 1 MB of data, a 70 MB header): staging grows with
# the bytes, not with the count of tensors (docs/benchmarks.md, "Many tiny tensors").
#
#   perf/tiny_rss.sh [N]        BUILD=build; the file is written once under $RL_BENCH_DIR
#                               (default /tmp/ringload-bench-tiny)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$here/../build}
DIR=${RL_BENCH_DIR:-/tmp/ringload-bench-tiny}
N=${1:-1000000}
file=$DIR/tiny-$N.safetensors

die() { echo "tiny_rss.sh: $*" >&2; exit 1; }
[ -x "$BUILD/ringload" ] || die "build first (make)"
[ -x /usr/bin/time ] || die "needs /usr/bin/time (make deps installs the package time)"
mkdir -p "$DIR"
if [ ! -f "$file" ]; then
	python3 - "$N" "$file" <<'PY'
import struct, sys
n, out = int(sys.argv[1]), sys.argv[2]
h = ('{' + ','.join('"t%07d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}' % (i, i, i + 1)
                    for i in range(n)) + '}').encode()
h += b' ' * (-len(h) % 8)
with open(out, 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h + bytes((i * 7 + 3) & 255 for i in range(n)))
PY
fi
echo "| $N one-byte tensors | wall s | peak RSS MiB |"
echo "|---|---:|---:|"
for cmd in plan load; do
	/usr/bin/time -f '%e %M' -o "$DIR/time.txt" "$BUILD/ringload" "$cmd" "$file" \
		>/dev/null 2>"$DIR/err.txt" || die "ringload $cmd failed: $(tail -n 3 "$DIR/err.txt")"
	read -r s kib <"$DIR/time.txt"
	printf '| `ringload %s` | %s | %d |\n' "$cmd" "$s" $((kib / 1024))
done
echo
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
	"$(git -C "$here/.." describe --always --dirty 2>/dev/null || echo '?')"
