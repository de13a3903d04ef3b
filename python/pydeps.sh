#!/usr/bin/env bash
# pydeps.sh REQUIREMENTS VENV - builds the venv of the Python tests and
# benchmarks (make pydeps): /usr/bin/python3 -m venv, then pip install -r
# REQUIREMENTS, in a temporary directory renamed to VENV once complete, so a
# venv at VENV is always whole and CI runs on one machine share it. VENV
# ends in the requirements' hash (the Makefile), so a changed file builds a
# new one. The wheels of numpy go to VENV/wheels for the offline install
# test (test_packaging.py). Without PyPI it says why in one line, leaves
# the log in VENV.log and exits 0: make test then skips the venv run.
set -u
reqs=$1 venv=$2
[ -x "$venv/bin/python" ] && exit 0
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
[ -x "$venv/bin/python" ] && exit 0
echo "  PYDEPS  $venv (PyPI packages of $reqs, a few minutes once)"
tmp=$(mktemp -d "$venv.tmp.XXXXXX")
log=$venv.log
numpy=$(grep -E '^numpy==' "$reqs")
if /usr/bin/python3 -m venv "$tmp" >"$log" 2>&1 &&
	"$tmp/bin/python" -m pip install -q --disable-pip-version-check \
		-r "$reqs" >>"$log" 2>&1 &&
	"$tmp/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
		-d "$tmp/wheels" "$numpy" >>"$log" 2>&1; then
	mv -T "$tmp" "$venv" 2>/dev/null || rm -rf "$tmp"
	rm -f "$log"
else
	echo "  PYDEPS  failed: $(grep -v '^\s*$' "$log" | tail -n 1) (log: $log);" \
		"the venv's Python tests will be skipped"
	rm -rf "$tmp"
fi
exit 0
