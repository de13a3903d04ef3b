#!/usr/bin/env bash
# demo.sh BUILD_DIR - generates a sample checkpoint (once) and runs ringload on it.
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
