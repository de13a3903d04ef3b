"""Against the safetensors package itself, where it is installed (not a
Debian package: skipped here, run where it is): same names, dtypes, shapes
and bytes for every tensor safetensors loads, and the same get_slice
results with PyTorch."""
import os

import pytest

import oracle
from test_safe_open import INDEXES

import ringload

st = pytest.importorskip("safetensors", reason="needs the safetensors package")

FILES = ["dtypes.safetensors", "shapes.safetensors",
         "tiny-moe/model-00002-of-00003.safetensors"]


def _both(f_ours, f_theirs, name):
    try:
        theirs = f_theirs.get_tensor(name)
    except Exception:  # a dtype this safetensors or framework lacks
        return None, None
    return f_ours.get_tensor(name), theirs


@pytest.mark.parametrize("framework", ["pt", "np"])
@pytest.mark.parametrize("rel", FILES)
def test_same_tensors_as_safetensors(testdata, rel, framework):
    if framework == "pt":
        pytest.importorskip("torch")
    path = os.path.join(testdata, "reference", rel)
    with ringload.safe_open(path, framework) as ours, \
            st.safe_open(path, framework) as theirs:
        assert ours.keys() == sorted(theirs.keys())
        assert ours.metadata() == theirs.metadata()
        compared = 0
        for name in theirs.keys():
            a, b = _both(ours, theirs, name)
            if b is None:
                continue
            assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape), name
            assert oracle.as_bytes(a) == oracle.as_bytes(b), name
            compared += 1
        assert compared


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_same_get_slice_as_safetensors_with_torch(testdata, index):
    pytest.importorskip("torch")
    path = os.path.join(testdata, "reference", "shapes.safetensors")
    with ringload.safe_open(path, "pt") as ours, st.safe_open(path, "pt") as theirs:
        key = index if len(index) > 1 else index[0]
        try:
            b = theirs.get_slice("cube")[key]
        except IndexError:  # out of bounds there: refused here too, as IndexError
            with pytest.raises(IndexError):
                ours.get_slice("cube")[key]
            return
        except Exception:
            pytest.skip(f"safetensors {st.__version__} refuses {key!r}")
        a = ours.get_slice("cube")[key]
        assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        assert oracle.as_bytes(a) == oracle.as_bytes(b)
