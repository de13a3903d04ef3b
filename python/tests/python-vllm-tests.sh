#!/usr/bin/env bash
# python-vllm-tests.sh - the tests marked "vllm" (test_vllm*.py,
# test_transformers.py: the vLLM load format and ringload.transformers),
# with the venv of make pydeps-vllm (RL_VLLM_PYTHON: vllm 0.33, torch 2.14,
# transformers); lines are labelled [vllm]. Without that venv (no PyPI
# when make pydeps-vllm ran) one skip line says so.
here=$(cd "$(dirname "$0")" && pwd)
py=${RL_VLLM_PYTHON:-}
if [ -n "${RL_SAN:-}" ]; then
	echo "skip python [vllm]: not in the $RL_SAN build (the plain make test runs it)"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
if [ -z "$py" ] || [ ! -x "$py" ]; then
	log=${py%/bin/python}.log
	why=$( [ -f "$log" ] && grep -v '^\s*$' "$log" | tail -n 1)
	echo "skip python [vllm]: no venv ${py:-(RL_VLLM_PYTHON unset)}: make pydeps-vllm" \
		"could not build it (${why:-no PyPI?}; log: $log)"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
[ $# -gt 0 ] || set -- "$here"/test_vllm*.py "$here"/test_transformers.py
RL_PYTHON=$py RL_PY_LABEL=vllm exec "$here/python-tests.sh" -m vllm "$@"
