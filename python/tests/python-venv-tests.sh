#!/usr/bin/env bash
# python-venv-tests.sh - the Python tests again, with the venv of make pydeps
# (RL_VENV_PYTHON: torch 2.x, safetensors, ml_dtypes, jax ...), tests
# marked "venv" (parity with safetensors, packaging) included; lines are
# labelled [venv]. Without the venv (no PyPI when make pydeps ran) one
# skip line says so. RL_VENV_LABEL and RL_VENV_TARGET name another venv
# (python-vllm-tests.sh: vllm, pydeps-vllm).
here=$(cd "$(dirname "$0")" && pwd)
py=${RL_VENV_PYTHON:-}
label=${RL_VENV_LABEL:-venv} target=${RL_VENV_TARGET:-pydeps}
if [ -n "${RL_SAN:-}" ]; then
	# torch 2.x and jax under a preloaded sanitizer runtime report their own
	# code; the system run covers the bindings under $RL_SAN.
	echo "skip python [$label]: not in the $RL_SAN build (the plain make test runs it)"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
if [ -z "$py" ] || [ ! -x "$py" ]; then
	log=${py%/bin/python}.log
	why=$( [ -f "$log" ] && grep -v '^\s*$' "$log" | tail -n 1)
	echo "skip python [$label]: no venv ${py:-(its python unset)}: make $target could not" \
		"build it (${why:-no PyPI?}; log: $log)"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
RL_PYTHON=$py RL_PY_LABEL=$label exec "$here/python-tests.sh" "$@"
