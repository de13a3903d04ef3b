#!/usr/bin/env bash
# python-vllm-tests.sh - the tests marked "vllm" (test_vllm*.py,
# test_transformers.py: the vLLM load format and ringload.transformers),
# with the venv of make pydeps-vllm (RL_VLLM_PYTHON: vllm 0.33, torch 2.14,
# transformers); lines are labelled [vllm]. python-venv-tests.sh skips
# with the reason where that venv is missing or under a sanitizer.
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || set -- "$here"/test_vllm*.py "$here"/test_transformers.py
RL_VENV_PYTHON=${RL_VLLM_PYTHON:-} RL_VENV_LABEL=vllm RL_VENV_TARGET=pydeps-vllm \
	exec "$here/python-venv-tests.sh" -m vllm "$@"
