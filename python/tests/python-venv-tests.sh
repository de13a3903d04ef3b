#!/usr/bin/env bash
# python-venv-tests.sh - the JAX and torch.distributed tests (test_jax.py,
# test_dist.py) with RL_VENV_PYTHON (the Makefile's VENV_PYTHON: jax,
# ml_dtypes, torch >= 2.4, safetensors), as one program of tests/run.sh;
# under Debian's python3 (python-tests.sh) they skip.
here=$(cd "$(dirname "$0")" && pwd)
export RL_PYTHON=${RL_VENV_PYTHON:-/root/.cache/ringload/venv-probe/bin/python}
exec "$here/python-tests.sh" "$here/test_jax.py" "$here/test_dist.py"
