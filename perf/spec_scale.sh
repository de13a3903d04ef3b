#!/usr/bin/env bash
# spec_scale.sh - `ringload plan` on hostile or huge specs and indexes: wall time and peak
# memory of the whole command, for the cases of issue 24 (item 8). Each is refused at once by
# a documented bound, or planned quickly (docs/sharding-spec.md, docs/benchmarks.md).
#
#   perf/spec_scale.sh              BUILD=build; files under $RL_BENCH_DIR
#                                   (default /tmp/ringload-bench-spec), written once
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-$here/../build}
DIR=${RL_BENCH_DIR:-/tmp/ringload-bench-spec}

die() { echo "spec_scale.sh: $*" >&2; exit 1; }
[ -x "$BUILD/ringload" ] || die "build first (make)"
[ -x /usr/bin/time ] || die "needs /usr/bin/time (make deps installs the package time)"
mkdir -p "$DIR"
[ -f "$DIR/done" ] || python3 - "$DIR" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
def ckpt(path, n):      # n F32 [16] tensors, header only (the data is a hole)
    h = {"layers.%d.w%d" % (i // 8, i % 8): {"dtype": "F32", "shape": [16],
         "data_offsets": [64 * i, 64 * i + 64]} for i in range(n)}
    b = json.dumps(h, separators=(",", ":")).encode()
    b += b" " * (-len(b) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(b)) + b)
        f.truncate(8 + len(b) + 64 * n)
ckpt(d + "/t25k.safetensors", 25000)
os.makedirs(d + "/idx", exist_ok=True)
ckpt(d + "/idx/a.safetensors", 8)
def rules(path, pats):
    with open(path, "w") as f:
        json.dump({"mesh": {"shape": [8], "axes": ["m"]},
                   "rules": [{"match": p, "spec": ["m"]} for p in pats]}, f)
rules(d + "/trivial-174k.json", ["r%d" % i for i in range(174000)])        # ~4 MiB
rules(d + "/nomatch-42k.json", ["nomatch\\.%d" % i for i in range(42000)])
rules(d + "/prefix-4096.json", ["nomatch\\.%d\\..*" % i for i in range(4096)])
rules(d + "/noprefix-4096.json", [".*nomatch%d" % i for i in range(4096)])
rules(d + "/noliteral-4096.json", ["[a-c]{%d}[d-f]{%d}" % (i // 64 + 1, i % 64 + 1)
                                   for i in range(4096)])
rules(d + "/noliteral-64.json", ["[a-c]{%d}[d-f]{%d}" % (i // 8 + 1, i % 8 + 1)
                                 for i in range(64)])
with open(d + "/values-62m.json", "w") as f:   # 62 MiB of tiny values
    f.write('{"x":[' + ",".join(["0"] * (31 << 20)) + "]}")
with open(d + "/idx/model.safetensors.index.json", "w") as f:   # 126 MiB of metadata
    f.write('{"metadata":[' + ",".join(["0"] * (63 << 20)) + '],"weight_map":{' +
            ",".join('"layers.0.w%d":"a.safetensors"' % i for i in range(8)) + "}}")
open(d + "/done", "w").close()
PY
echo "| case | exit | wall s | peak RSS MiB | message |"
echo "|---|---:|---:|---:|---|"
one() {
	local label=$1
	shift
	set +e
	/usr/bin/time -f '%e %M' -o "$DIR/time.txt" "$BUILD/ringload" plan "$@" >/dev/null \
		2>"$DIR/err.txt"
	local rc=$?
	set -e
	read -r s kib < <(tail -n 1 "$DIR/time.txt")   # after "Command exited with ..."
	printf '| %s | %d | %s | %d | %s |\n' "$label" "$rc" "$s" $((kib / 1024)) \
		"$(head -c 110 "$DIR/err.txt" | head -n 1 | sed "s|$DIR/||g")"
}
one "174k trivial rules (4 MiB)" "$DIR/t25k.safetensors" --sharding "$DIR/trivial-174k.json"
one "42k rules that match nothing, 25k tensors" "$DIR/t25k.safetensors" \
	--sharding "$DIR/nomatch-42k.json"
one "4096 rules with a literal prefix, 25k tensors" "$DIR/t25k.safetensors" \
	--sharding "$DIR/prefix-4096.json"
one "4096 rules without a prefix (.*nomatchN), 25k tensors" "$DIR/t25k.safetensors" \
	--sharding "$DIR/noprefix-4096.json"
one "4096 rules without literal text ([a-c]{i}[d-f]{j}), 25k tensors" \
	"$DIR/t25k.safetensors" --sharding "$DIR/noliteral-4096.json"
one "64 rules without literal text (the most), 25k tensors" "$DIR/t25k.safetensors" \
	--sharding "$DIR/noliteral-64.json"
one "62 MiB spec of tiny values" "$DIR/t25k.safetensors" --sharding "$DIR/values-62m.json"
one "126 MiB index, metadata a list" "$DIR/idx/model.safetensors.index.json"
echo
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
	"$(git -C "$here/.." describe --always --dirty 2>/dev/null || echo '?')"
