"""Ctrl-C during a load: SIGINT reaches the caller as KeyboardInterrupt,
unchanged (an `except Exception` does not catch it), on every entry point,
backend and worker count; the load is canceled in C and everything it made
is freed. The loads run in a child (sigint_child.py) that sends itself the
signal while the load runs in C."""
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

import stfile

import ringload
from ringload import _handles, _lib

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
        assert row["handler_restored"], where
    assert "Exception ignored" not in stderr, stderr


# In this process: SIGINT raised by a progress callable, on the main thread
# (pytest's), where Python runs the handler inside the callable.

from conftest import BACKENDS  # noqa: E402


@pytest.fixture
def load_codes(monkeypatch):
    """The codes rl_loader_load returned during the test, in order."""
    from ringload import _lib
    codes = []
    load = _lib.rl_loader_load

    def recorded(*args):
        rc = load(*args)
        codes.append(rc)
        return rc

    monkeypatch.setattr(_lib, "rl_loader_load", recorded)
    return codes


def _interrupt(done, total):
    signal.raise_signal(signal.SIGINT)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_in_the_progress_callable_cancels_at_once(small_ckpt, load_codes,
                                                         backend, workers):
    # small_ckpt is read in one step: the callable runs once, at the end
    with pytest.raises(KeyboardInterrupt):
        ringload.load(small_ckpt, backend=backend, options={"workers": workers},
                      progress=_interrupt)
    assert load_codes == [_lib.RL_E_CANCELED]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("backend", BACKENDS)
def test_ctrl_c_cancels_a_load_nested_in_a_progress_callable(small_ckpt, load_codes,
                                                             backend):
    got = []

    def outer(done, total):
        try:
            ringload.load(small_ckpt, backend=backend, progress=_interrupt)
            got.append("returned")
        except KeyboardInterrupt:
            got.append("KeyboardInterrupt")
            raise

    with pytest.raises(KeyboardInterrupt):
        ringload.load(small_ckpt, backend=backend, progress=outer)
    assert got == ["KeyboardInterrupt"]
    assert load_codes == [_lib.RL_E_CANCELED] * 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert _handles.live_handles() == {}


def test_a_handler_installed_during_the_load_is_kept(small_ckpt):
    def mine(signum, frame):
        pass

    try:
        ringload.load(small_ckpt, progress=lambda done, total:
                      signal.signal(signal.SIGINT, mine))
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def test_a_handler_left_installed_passes_ctrl_c_on(small_ckpt):
    # as if the restore had not run: an exception raised at the entry of
    # the load's cleanup by another signal's handler
    seen = []
    ringload.load(small_ckpt, progress=lambda done, total:
                  seen.append(signal.getsignal(signal.SIGINT)))
    [left] = seen
    assert left is not signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        left(signal.SIGINT, None)


_SUBINTERPRETER = """
import ringload
got = ringload.load({path!r})
assert got[0]["vec"].tolist() == list(range(13)), got
"""


def test_loads_in_a_sub_interpreter(small_ckpt):
    # mod_wsgi's: its main thread is the process's, but signal.signal
    # refuses to run there; each load failed with ValueError
    pytest.importorskip("_xxsubinterpreters")
    inner = _SUBINTERPRETER.format(path=small_ckpt)
    code = ("import _xxsubinterpreters as s\n"
            f"i = s.create()\ns.run_string(i, {inner!r})\n"
            "s.destroy(i)\nprint('ok')\n")
    # -W ignore: numpy warns that it does not support sub-interpreters
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_handler_raising_nothing_lets_the_load_go_on(small_ckpt, load_codes, backend):
    seen = []

    def mine(signum, frame):
        seen.append(signum)

    for handler in (mine, signal.SIG_IGN):
        signal.signal(signal.SIGINT, handler)
        try:
            got = ringload.load(small_ckpt, backend=backend, progress=_interrupt)
            assert got[0]["vec"].tolist() == list(range(13))
            assert signal.getsignal(signal.SIGINT) is handler
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    assert seen == [signal.SIGINT]
    assert load_codes == [0, 0]


def test_a_load_on_another_thread_leaves_the_handler(small_ckpt):
    seen, got = [], []

    def load():
        got.append(ringload.load(small_ckpt, progress=lambda done, total:
                                 seen.append(signal.getsignal(signal.SIGINT))))

    t = threading.Thread(target=load)
    t.start()
    t.join()
    assert got[0][0]["vec"].tolist() == list(range(13))
    assert seen and all(h is signal.default_int_handler for h in seen)
