"""Short strided rows (issue 33 item 5), loaded byte-exact: BF16 tensors
on an 8x32 mesh over two processes, split over both axes (8 rows of 16
bytes per device), over the second (64 rows of 16 bytes), and a wide one
whose columns go over both axes (36 bytes per device of each 9 KiB row;
each process needs half of every row, the other half a gap wider than the
coalescing gap, so its more than 1,024 rows are read as one span and a
request's rows become one strided copy per device). Every backend, 1 and
3 workers, whole and streamed through 256 KiB windows, as stored and
converted to F32, against numpy slicing of the file's bytes."""
import numpy as np
import pytest

import oracle
import stfile
from conftest import BACKENDS

import ringload

MESH = {"shape": [8, 32], "axes": ["data", "model"],
        "process_of_device": [d // 128 for d in range(256)]}
SPEC = {"mesh": MESH,
        "rules": [{"match": r".*\.both", "spec": ["data", "model"]},
                  {"match": r".*\.col", "spec": [None, "model"]},
                  {"match": "wide", "spec": [None, ["data", "model"]]}]}
SHAPES = {**{f"l{i}.both": (64, 256) for i in range(3)},
          **{f"l{i}.col": (64, 256) for i in range(3)},
          "wide": (1040, 4608)}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    rng = np.random.default_rng(33)
    tensors = {name: ("BF16", shape, rng.bytes(2 * shape[0] * shape[1]))
               for name, shape in SHAPES.items()}
    path = tmp_path_factory.mktemp("rows") / "rows.safetensors"
    stfile.write(str(path), tensors)
    return path, tensors


def _want(data, shape, box, dest):
    """The box of a BF16 tensor as numpy slices it, as stored or as F32
    (a BF16 value is the upper half of its F32: exact)."""
    a = np.frombuffer(data, dtype="<u2").reshape(shape)
    a = a[tuple(slice(lo, hi) for lo, hi in box)]
    if dest == "F32":
        a = (a.astype("<u4") << 16)
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dest", [None, "F32"])
def test_short_rows_byte_exact(ckpt, backend, dest):
    path, tensors = ckpt
    for workers in (1, 3):
        for opts in ({}, {"staging_budget": 256 << 10}):
            for process in (0, 1):
                got = ringload.load(path, SPEC, process=process, backend=backend,
                                    options=dict(opts, workers=workers), dtype=dest)
                what = f"{backend}/{workers}w/{opts}/process {process}/{dest}"
                assert sorted(got) == sorted(oracle.devices_of(SPEC, process)), what
                checked = 0
                for name, (_, shape, data) in tensors.items():
                    for dev, box in oracle.boxes(SPEC, name, shape).items():
                        if dev in got:
                            assert oracle.as_bytes(got[dev][name]) == \
                                _want(data, shape, box, dest), (what, name, dev, box)
                            checked += 1
                assert checked == 128 * len(SHAPES), what
                del got
