#!/usr/bin/env bash
# python-tests.sh - the Python package's tests as one program of tests/run.sh: runs
# pytest (runner.py) against the library of RL_BUILD with RL_PYTHON
# (default /usr/bin/python3; the Makefile's PYTHON), and ends with the
# harness's "N passed, N failed, N skipped" line.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${RL_PYTHON:-/usr/bin/python3}
build=${RL_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac

if ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
	echo "skip python [${RL_PY_LABEL:-system}]: needs $py with numpy and pytest (make deps installs python3-numpy and python3-pytest)"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
# A sanitizer build's library needs its runtime loaded first in Python, which
# is not built with it; leaks of the interpreter itself are not ours.
case ${RL_SAN:-} in
asan)
	export LD_PRELOAD="$(${CC:-gcc} -print-file-name=libasan.so) $(${CC:-gcc} -print-file-name=libubsan.so)"
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
	;;
tsan)
	export LD_PRELOAD="$(${CC:-gcc} -print-file-name=libtsan.so)"
	export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$here/tsan-torch.supp}
	;;
esac
export RINGLOAD_LIB=$build/libringload.so.0 RL_BUILD=$build
export PYTHONPATH=$root/python PYTHONDONTWRITEBYTECODE=1
# Lines are labelled with the interpreter ([system]: $py; [venv]: the venv
# of make pydeps, which alone runs the tests marked "venv").
export RL_PY_LABEL=${RL_PY_LABEL:-system}
[ $# -gt 0 ] || set -- "$here"
[ "$RL_PY_LABEL" = venv ] || set -- -m "not venv" "$@"
exec "$py" "$here/runner.py" "$@"
