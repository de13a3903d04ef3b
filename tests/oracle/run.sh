#!/usr/bin/env bash
# run.sh [DIR...] - differential check of ringload's header verdicts against a
# serde stand-in for the safetensors reference (src/main.rs: the reference's
# types and validation order, built with Debian's vendored serde crates).
#
# Needs cargo and the Debian packages librust-serde-json-dev and
# librust-serde-derive-dev (offline build from /usr/share/cargo/registry).
# Every file of each DIR (default: the header fuzz corpus and the fixtures:
# make's generated ones in $RL_BUILD/testdata, the shared ones where present)
# is judged by both; a difference is printed and makes the exit status 1.
# Not part of `make test`: it needs a Rust toolchain the project does not.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${RL_BUILD:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

(cd "$here" && cargo build --release -q --target-dir "$out/target")
cc -O2 -I"$root/api" -o "$out/verdict" "$here/verdict.c" -L"$build" -lringload \
	-Wl,-rpath,"$build"
if [ $# -eq 0 ]; then
	set -- "$root/tests/fuzz/corpus/header"
	for d in "$build/testdata/headers" "$root/../shared/testdata/headers"; do
		[ -d "$d" ] && set -- "$@" "$d"
	done
fi
status=0 n=0 d=0
for dir in "$@"; do
	find "$dir" -maxdepth 1 -type f ! -name '*.json' -print0 | sort -z > "$out/list"
	xargs -0 -r "$out/target/release/oracle" < "$out/list" | cut -f1,2 | cut -d' ' -f1,2 > "$out/ref"
	xargs -0 -r "$out/verdict" < "$out/list" | cut -f1,2 > "$out/ours"
	n=$((n + $(wc -l < "$out/ref")))
	# "limit": refused by ringload's documented limits (U+0000 in a name,
	# rank > 255) where the reference accepts; not counted as a difference.
	paste "$out/ref" "$out/ours" | awk -F'\t' '
		$2 == $4 || ($4 == "limit" && $2 ~ /^ok/) { next }
		{ print $1 ": reference " $2 ", ringload " $4; bad++ }
		END { exit bad > 0 }' > "$out/diff" || status=1
	cat "$out/diff"
	d=$((d + $(wc -l < "$out/diff")))
done
echo "$n files, $d differ"
exit $status
