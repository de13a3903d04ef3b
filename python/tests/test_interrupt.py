"""Ctrl-C during a load: SIGINT reaches the caller as KeyboardInterrupt,
unchanged (an `except Exception` does not catch it), on every entry point,
backend and worker count; the load is canceled in C and everything it made
is freed. The loads run in a child (sigint_child.py) that sends itself the
signal while the load runs in C."""
import json
import os
import subprocess
import sys

import pytest

import stfile

HERE = os.path.dirname(os.path.abspath(__file__))
NUMPY_ENTRIES = ("load-np", "numpy.load_file", "safe_open-np.get_tensor",
                 "safe_open-np.get_slice")
TORCH_ENTRIES = ("load-pt", "load-pt-streaming", "torch.load_file",
                 "safe_open-pt.get_tensor", "safe_open-pt.get_slice")
SIZE = 128 << 20  # sparse: no disk; read 4 KiB at a time: 0.5 s or more


def _run_child(path, entries):
    r = subprocess.run([sys.executable, os.path.join(HERE, "sigint_child.py"),
                        str(path), *entries], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        row = json.loads(line)
        rows.setdefault(row["entry"], []).append(row)
    return rows, r.stderr


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """{entry: [row per backend and workers]} and the child's stderr."""
    path = tmp_path_factory.mktemp("sigint") / "big.safetensors"
    stfile.write_sparse(path, "w", "U8", (SIZE,))
    entries = NUMPY_ENTRIES
    try:
        import torch  # noqa: F401
        entries += TORCH_ENTRIES
    except ImportError:
        pass
    return _run_child(path, entries)


@pytest.mark.parametrize("entry", NUMPY_ENTRIES + TORCH_ENTRIES)
def test_ctrl_c_propagates_unchanged_cancels_and_frees(interrupted, entry):
    rows, stderr = interrupted
    if entry not in rows:
        pytest.skip("needs python3-torch (make deps installs it)")
    assert len(rows[entry]) == 6  # 3 backends x 1, 2 workers
    for row in rows[entry]:
        where = f"{entry} {row['backend']} workers={row['workers']}"
        assert row["got"] == "KeyboardInterrupt", where
        assert row["codes"][-1] == "RL_E_CANCELED", (where, row["codes"])
        assert row["handles"] == {}, where
    assert "Exception ignored" not in stderr, stderr
