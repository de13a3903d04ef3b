#!/usr/bin/env bash
# demo.sh BUILD_DIR - generates a sample checkpoint (once) and runs ringload on it:
# inspect, then load with a sample tensor-parallel sharding (tools/sample-sharding.json:
# 2 devices, q/k/v/gate/up and the embeddings split by rows, o/down by columns, norms
# replicated), checking every shard against the file.
#
# The sample is a llama-like BF16 model of about 300 MB in 4 shards with an
# index, written by mkckpt into $RL_DEMO_DIR (default /var/tmp/ringload-demo)
# unless it is already there.
set -euo pipefail
build=${1:-build}
dir=${RL_DEMO_DIR:-/var/tmp/ringload-demo}
index=$dir/model.safetensors.index.json

if [ ! -f "$index" ]; then
	echo "  DEMO    generating a sample checkpoint in $dir"
	"$build/mkckpt" "$dir" --size 300M --files 4 --seed 1
fi
echo "  DEMO    $build/ringload inspect $index"
"$build/ringload" inspect "$index" | tail -n 6
echo "  DEMO    $build/ringload load $index --sharding tools/sample-sharding.json --verify"
"$build/ringload" load "$index" --sharding "$(dirname "$0")/sample-sharding.json" --verify
