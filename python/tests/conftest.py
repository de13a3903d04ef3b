"""Shared fixtures of the Python tests: the package from this tree, the
fixture sets (generated and shared test data; a test taking testdata runs
on each), a seeded random generator that prints its seed, and the "gpu"
marker (GPU tests are skipped when torch.cuda.is_available() is false;
RL_NO_SKIP=1 makes every skip a failure)."""
import ctypes
import gc
import json
import os
import random
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
if "ringload" not in sys.modules:
    sys.path.insert(0, os.path.join(ROOT, "python"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA device (skipped when "
        "torch.cuda.is_available() is false; failed under RL_NO_SKIP=1)")
    config.addinivalue_line(
        "markers", "venv: needs the PyPI packages of make pydeps (run only "
        "by python-venv-tests.sh)")
    config.addinivalue_line(
        "markers", "vllm: needs vllm and transformers, the venv of make "
        "pydeps-vllm (run only by python-vllm-tests.sh)")


# Modules of tests marked "venv" as a whole, which import what only the venv
# has: the system run (-m "not venv") does not even collect them.
VENV_MODULES = {"test_compat.py", "test_dist.py", "test_jax.py", "test_jax_procs.py",
                "test_packaging.py", "test_parity.py"}


# Modules of tests marked "vllm": only python-vllm-tests.sh (-m vllm), whose
# venv has vllm and transformers, collects them.
VLLM_MODULES = {"test_vllm.py", "test_vllm_tp.py", "test_transformers.py"}


def pytest_ignore_collect(collection_path, config):
    """Leaves VENV_MODULES out of a run that deselects "venv", and
    VLLM_MODULES out of every run but the "vllm" one."""
    markexpr = config.getoption("markexpr")
    if markexpr != "vllm" and collection_path.name in VLLM_MODULES:
        return True
    if markexpr == "not venv":
        return collection_path.name in VENV_MODULES or None
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """RL_NO_SKIP=1 (perf/gpu_check.sh on a lent GPU machine): a skip is a
    failure, naming why it would have skipped; pytest passes a run whose
    every test skipped, which there would hide a machine without CUDA."""
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get("RL_NO_SKIP") == "1" and rep.skipped and not hasattr(rep, "wasxfail"):
        why = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"RL_NO_SKIP=1: this run allows no skip: {why}"


def build_dir():
    """The build directory of the library under test (RL_BUILD)."""
    b = os.environ.get("RL_BUILD", "build")
    return b if os.path.isabs(b) else os.path.join(ROOT, b)


def fixture_sets():
    """[(id, directory)] of the fixture sets present, as in the C tests
    (tests/harness.h): "generated" (RL_FIXTURES, else RL_BUILD/testdata:
    written by tests/fixtures/gen_fixtures.py with safetensors' own writer)
    and "shared" (RL_TESTDATA, else ../shared/testdata: the Rust reference's)."""
    sets = (("generated", os.environ.get("RL_FIXTURES")
             or os.path.join(build_dir(), "testdata")),
            ("shared", os.environ.get("RL_TESTDATA")
             or os.path.join(ROOT, "..", "shared", "testdata")))
    return [(name, d) for name, d in sets
            if os.path.isfile(os.path.join(d, "reference", "MANIFEST.json"))
            and os.path.isfile(os.path.join(d, "headers", "EXPECTED.json"))]


def pytest_generate_tests(metafunc):
    """A test that takes testdata runs on every fixture set present."""
    sets = fixture_sets()
    if "testdata" in metafunc.fixturenames and sets:
        metafunc.parametrize("testdata", [d for _, d in sets],
                             ids=[name for name, _ in sets], scope="session")


@pytest.fixture(scope="session")
def testdata():
    """Used only when no fixture set is present: skips, saying why."""
    gen = os.environ.get("RL_FIXTURES") or os.path.join(build_dir(), "testdata")
    try:
        with open(os.path.join(gen, "UNAVAILABLE")) as f:
            why = f.read().strip()
    except OSError:
        why = f"{gen} not found (make test writes it with tests/fixtures/gen_fixtures.py)"
    shared = os.environ.get("RL_TESTDATA") or os.path.join(ROOT, "..", "shared", "testdata")
    pytest.skip(f"needs fixtures: {why}; and no {shared}")


@pytest.fixture(scope="session")
def small_ckpt(tmp_path_factory):
    """A small checkpoint written here, for tests that need some file and
    not the reference fixtures: "vec" F32 [13], "mat" I16 [3, 5], and one
    tensor of each dtype numpy cannot hold natively (sub-byte shapes as in
    the shared dtypes.safetensors)."""
    import stfile
    path = tmp_path_factory.mktemp("small") / "small.safetensors"
    stfile.write(path, {
        "vec": ("F32", (13,), np.arange(13, dtype="<f4").tobytes()),
        "mat": ("I16", (3, 5), np.arange(15, dtype="<i2").tobytes()),
        "bf16": ("BF16", (3,), bytes(range(6))),
        "f8e4m3": ("F8_E4M3", (4,), bytes(4)),
        "f8e5m2": ("F8_E5M2", (4,), bytes(4)),
        "f8e8m0": ("F8_E8M0", (4,), bytes(4)),
        "f4": ("F4", (4, 8), bytes(16)),
        "f6e2m3": ("F6_E2M3", (2, 8), bytes(12)),
        "f6e3m2": ("F6_E3M2", (4, 4), bytes(12)),
    }, metadata={"format": "pt"})
    return str(path)


@pytest.fixture(scope="session")
def manifest(testdata):
    """reference/MANIFEST.json: {file: {tensor: {dtype, shape, sha256}}}."""
    with open(os.path.join(testdata, "reference", "MANIFEST.json")) as f:
        return json.load(f)


@pytest.fixture
def rng(request):
    """A numpy Generator seeded by RL_SEED or at random; the seed is
    printed (shown with a failure) and set RL_SEED to repeat."""
    seed = int(os.environ.get("RL_SEED") or random.SystemRandom().getrandbits(32))
    print(f"seed {seed} (set RL_SEED to repeat)")
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def torch():
    """torch, or a skip naming what is missing."""
    return pytest.importorskip("torch", reason="needs python3-torch "
                               "(make deps installs it)")


from ringload import _lib  # noqa: E402

# every backend the library has (its table, without "auto")
BACKENDS = tuple(b for b in _lib.BACKENDS if b != "auto")


@pytest.fixture(autouse=True)
def no_handle_outlives_its_test():
    """Like the C harness's leak check: every library handle a test makes
    (loaders behind results included) is gone when the test's locals are.
    A collection first: pytest.raises' exception info makes a cycle with
    the test's frame (test_lifetimes checks that ringload itself frees by
    reference counting alone)."""
    from ringload import _handles
    before = _handles.live_handles()
    yield
    gc.collect()
    after = _handles.live_handles()
    assert after == before, f"library handles left: {after} (before: {before})"


def fake_device_areas(fake, shards, ptrs):
    """Device memory of the tests' fake CUDA driver for each shard (at
    least a byte), appended to ptrs as they are made (the caller frees
    them, those made before a failure too)."""
    for s in shards:
        p = ctypes.c_ulonglong()
        assert fake.cuMemAlloc_v2(ctypes.byref(p), max(s.nbytes, 1)) == 0
        ptrs.append(p.value)
