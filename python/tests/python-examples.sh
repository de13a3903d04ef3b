#!/usr/bin/env bash
# python-examples.sh - runs every examples/*.py as one program of
# tests/run.sh: one line per example ("ok", "FAIL" with its output, or
# "skip: why" when RL_VENV_PYTHON lacks a module its "# needs:" line names),
# then "N passed, N failed, N skipped". The examples need torch >= 2.4, jax
# and safetensors: RL_VENV_PYTHON (the Makefile's VENV_PYTHON, make pydeps).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${RL_VENV_PYTHON:-}
build=${RL_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
export RINGLOAD_LIB=$build/libringload.so.0
export PYTHONPATH=$root/python PYTHONDONTWRITEBYTECODE=1 OMP_NUM_THREADS=1
case ${RL_SAN:-} in
asan | tsan)
	echo "skip python examples: not under a sanitizer build (python-tests.sh covers the package there)"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
	;;
esac

pass=0 fail=0 skip=0
for ex in "$root"/examples/*.py; do
	name=examples/$(basename "$ex")
	needs=$(sed -n 's/^# needs: //p' "$ex" | head -n 1)
	missing=
	for req in $needs; do
		mod=${req%%>=*}
		if ! "$py" -c "import $mod" 2>/dev/null; then
			missing="$missing $mod"
		elif [ "$req" != "$mod" ] && ! "$py" -c "
import sys, $mod
have = tuple(int(x) for x in $mod.__version__.split('+')[0].split('.')[:2])
sys.exit(have < tuple(int(x) for x in '${req#*>=}'.split('.')))"; then
			missing="$missing $req"
		fi
	done
	if [ -n "$missing" ]; then
		echo "skip $name: $py lacks$missing (make pydeps)"
		skip=$((skip + 1))
		continue
	fi
	start=$(date +%s%N)
	if out=$(cd "$root" && timeout 300 "$py" "$ex" 2>&1); then
		echo "ok   $name ($((($(date +%s%N) - start) / 1000000)) ms)"
		pass=$((pass + 1))
	else
		echo "FAIL $name"
		echo "$out"
		fail=$((fail + 1))
	fi
done
echo "$pass passed, $fail failed, $skip skipped"
