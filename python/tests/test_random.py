"""Random checkpoints (seeded; the seed is printed, RL_SEED repeats it):
every dtype, shapes from scalars and empty tensors to a few 100 KiB
(direct reads, unaligned data offsets), numpy and torch, whole and sharded
on random meshes over two processes, on every backend, against the
independent reader."""
import math
import os
import re

import numpy as np
import pytest

import oracle
import stfile
from conftest import BACKENDS
from test_reference import check_sharded

import ringload
import ringload.numpy as rnp

WHOLE_BYTES = [d for d, (bits, _) in stfile.DTYPES.items() if bits % 8 == 0]
SUBBYTE = [d for d, (bits, _) in stfile.DTYPES.items() if bits % 8]


def _shape(rng, big=False):
    if big:  # over 64 KiB: placed for direct reads
        return (int(rng.integers(64, 200)), int(rng.integers(256, 1100)))
    rank = int(rng.integers(0, 5))
    return tuple(int(rng.integers(0, 8)) for _ in range(rank))


def _tensor(rng, dtype, shape):
    bits, _ = stfile.DTYPES[dtype]
    n = math.prod(shape) * bits // 8
    if dtype == "BOOL":
        return rng.integers(0, 2, n, dtype=np.uint8).tobytes()
    return rng.bytes(n)


def random_checkpoint(rng, path, ntensors=12, subbyte=True, pad=None):
    """Writes a random checkpoint; returns {name: (dtype, shape, bytes)}."""
    tensors = {}
    for i in range(ntensors):
        big = i == 0 or rng.random() < 0.1
        dtype = str(rng.choice(WHOLE_BYTES))
        shape = _shape(rng, big)
        if subbyte and rng.random() < 0.15:
            dtype = str(rng.choice(SUBBYTE))
            shape = shape[:-1] + (4 * int(rng.integers(1, 5)),) if shape else (8,)
        name = f"t{i}." + "".join(rng.choice(list("abcxyz_.0123"), 5))
        tensors[name] = (dtype, shape, _tensor(rng, dtype, shape))
    if rng.random() < 0.5:  # a 3-byte tensor first: others start unaligned
        tensors = {"odd": ("U8", (3,), rng.bytes(3)), **tensors}
    order = list(tensors)
    rng.shuffle(order)
    meta = {"format": "pt", "seed": "x"} if rng.random() < 0.5 else None
    stfile.write(path, {k: tensors[k] for k in order}, meta,
                 pad=bool(rng.random() < 0.5) if pad is None else pad)
    return tensors


def test_random_whole_numpy_and_torch(tmp_path, rng, torch):
    for round_ in range(4):
        path = tmp_path / f"r{round_}.safetensors"
        tensors = random_checkpoint(rng, path)
        got = oracle.numpy_load_file(path)
        assert list(got) == sorted(tensors)
        for name, (dtype, shape, data) in tensors.items():
            assert (got[name].dtype, got[name].shape) == \
                oracle.numpy_expect(dtype, shape), name
            assert oracle.as_bytes(got[name]) == data, name
        with ringload.safe_open(path, "pt") as f:
            for name, (dtype, shape, data) in tensors.items():
                if oracle.torch_expect(torch, dtype, shape) is None:
                    with pytest.raises(ringload.DtypeError):
                        f.get_tensor(name)
                    continue
                t = f.get_tensor(name)
                assert t.dtype == oracle.torch_expect(torch, dtype, shape), name
                assert tuple(t.shape) == oracle.torch_shape(dtype, shape), name
                assert oracle.as_bytes(t) == data, name


def test_random_unaligned_tensors_are_copied_aligned(tmp_path, rng, torch):
    # A 1-byte tensor first puts every other tensor's data off alignment;
    # the results must still be aligned arrays with the right bytes.
    data = rng.bytes(8 * 20000)
    tensors = {"a": ("U8", (1,), b"\x07"), "w": ("F64", (20000,), data)}
    stfile.write(tmp_path / "u.safetensors", tensors, pad=False)
    w = rnp.load_file(tmp_path / "u.safetensors")["w"]
    assert w.flags.aligned and w.tobytes() == data
    t = ringload.torch.load_file(tmp_path / "u.safetensors")["w"]
    assert t.data_ptr() % 8 == 0 and oracle.as_bytes(t) == data


def _axes_spec(rng, mesh, rank):
    free = list(mesh["axes"])
    spec = []
    for _ in range(int(rng.integers(0, rank + 1))):
        pick = rng.random()
        if pick < 0.3 or not free:
            spec.append(None)
        elif pick < 0.7:
            spec.append(free.pop(int(rng.integers(0, len(free)))))
        else:
            k = int(rng.integers(1, len(free) + 1))
            spec.append([free.pop(int(rng.integers(0, len(free)))) for _ in range(k)])
    return spec


def random_spec(rng, tensors):
    """A random mesh of 1-2 axes over two processes, permuted device ids,
    and a rule for most tensors (by escaped exact name)."""
    naxes = int(rng.integers(1, 3))
    mesh = {"shape": [int(rng.integers(1, 4)) for _ in range(naxes)],
            "axes": ["a", "b"][:naxes]}
    ndev = math.prod(mesh["shape"])
    if ndev < 2:
        mesh["shape"][0] = 2
        ndev = math.prod(mesh["shape"])
    mesh["devices"] = [int(d) + 10 for d in rng.permutation(ndev)]
    procs = [0, 1] + [int(p) for p in rng.integers(0, 2, ndev - 2)]
    mesh["process_of_device"] = [int(p) for p in rng.permutation(procs)]
    rules = [{"match": re.escape(name), "spec": _axes_spec(rng, mesh, len(shape))}
             for name, (_, shape, _) in tensors.items()
             if shape and rng.random() < 0.8]
    return {"mesh": mesh, "rules": rules}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("framework", ["np", "pt"])
def test_random_sharded_on_every_backend(tmp_path, rng, torch, backend, framework):
    for round_ in range(3):
        path = tmp_path / f"s{round_}.safetensors"
        tensors = random_checkpoint(rng, path, subbyte=False)
        if framework == "pt":  # dtypes this torch holds (others: DtypeError)
            tensors = {n: t for n, t in tensors.items()
                       if oracle.torch_expect(torch, t[0]) is not None}
        spec = random_spec(rng, tensors)
        spec["tensors"] = sorted(tensors)
        for process in (0, 1):
            got = ringload.load(path, sharding=spec, process=process,
                                framework=framework, backend=backend)
            check_sharded(torch, got, spec, process, tensors, framework)


def test_random_checkpoint_of_several_files(tmp_path, rng):
    d = tmp_path / "ckpt"
    os.mkdir(d)
    tensors = {}
    for i in range(3):
        part = random_checkpoint(rng, d / f"m-{i}.safetensors", ntensors=5)
        part = {f"f{i}.{k}": v for k, v in part.items()}
        stfile.write(d / f"m-{i}.safetensors", part)
        tensors.update(part)
    got = oracle.numpy_load_file(d)
    assert list(got) == sorted(tensors)
    for name, (dtype, shape, data) in tensors.items():
        assert oracle.as_bytes(got[name]) == data, name


def test_concurrent_loads_from_threads(tmp_path, rng, torch):
    # ctypes releases the GIL in every library call: loads in several
    # threads run at once, each with its own loader, and agree.
    import threading
    path = tmp_path / "c.safetensors"
    tensors = random_checkpoint(rng, path, subbyte=False)
    expect = {n: tensors[n][2] for n in tensors
              if oracle.torch_expect(torch, tensors[n][0]) is not None}
    results, errors = {}, []

    def work(i):
        try:
            fw = "np" if i % 2 else "pt"
            got = ringload.load(path, sharding={"tensors": sorted(expect)},
                                framework=fw, backend=BACKENDS[i % 3],
                                progress=lambda d, t: None)
            results[i] = {n: oracle.as_bytes(t) for n, t in got[0].items()}
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 6, errors
    for i, got in results.items():
        for name, data in expect.items():
            assert got[name] == data, (i, name)
