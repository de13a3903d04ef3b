"""copy=True: results that own their memory. A kept small tensor holds no
staging: the library's loader (which owns the staging) is gone and its
mapping unmapped when the load returns, while the result stays valid; the
default stays zero-copy (the control). Every backend, one and two workers;
reference counting alone (the garbage collector off)."""
import gc

import numpy as np
import pytest

import stfile
from test_lifetimes import BIG, SIZES, _mapped

import ringload
import ringload.numpy as rnp
from ringload import _handles

from conftest import BACKENDS  # noqa: E402
SMALL = np.arange(512, dtype="<f4")  # 2 KiB


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A 2 KiB tensor "small" and a 64 MiB one of zeros, "big"."""
    path = tmp_path_factory.mktemp("copy") / "m.safetensors"
    stfile.write(path, {"small": ("F32", SMALL.shape, SMALL.tobytes()),
                        "big": ("U8", (BIG,), bytes(BIG))})
    return str(path)


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _loaders():
    return _handles.live_handles().get("rl_loader", 0)


def _keep_small(load, path, copy):
    """Loads path, keeps only "small"; returns it, the loaders and the
    mapped bytes (staging) still alive."""
    base_loaders, base_mapped = _loaders(), _mapped()
    small = load(path, copy)["small"]
    return small, _loaders() - base_loaders, _mapped() - base_mapped


def _load(backend, workers, framework="np"):
    def load(path, copy):
        return ringload.load(path, framework=framework, backend=backend, copy=copy,
                             options={"workers": workers})[0]
    return load


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workers", [1, 2])
def test_copy_frees_the_staging_a_kept_tensor_held(ckpt, no_gc, backend, workers):
    small, loaders, mapped = _keep_small(_load(backend, workers), ckpt, False)
    assert loaders == 1 and (not SIZES or mapped >= BIG)  # the control
    del small
    small, loaders, mapped = _keep_small(_load(backend, workers), ckpt, True)
    assert loaders == 0 and (not SIZES or mapped < BIG // 2)
    assert small.base is None and small.flags.owndata
    assert small.tobytes() == SMALL.tobytes()


def test_copy_in_load_file_and_torch(ckpt, no_gc, torch):
    import ringload.torch as rt
    for load in (lambda p, c: rnp.load_file(p, copy=c),
                 lambda p, c: rt.load_file(p, copy=c),
                 _load("auto", 1, "pt")):
        small, loaders, mapped = _keep_small(load, ckpt, True)
        assert loaders == 0 and (not SIZES or mapped < BIG // 2)
        assert np.asarray(small).tobytes() == SMALL.tobytes()
        if isinstance(small, torch.Tensor):
            storage = getattr(small, "untyped_storage", small.storage)()
            assert storage.nbytes() == SMALL.nbytes  # its own, not the staging
        del small
