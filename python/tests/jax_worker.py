"""One process of test_jax_procs' multi-process JAX job: jax_worker.py
PROCESS COUNT PORT CKPT OUT_JSON ARGS_JSON. Joins the job (a coordinator
on localhost:PORT, 4 CPU devices a process), then for every mesh of ARGS
and every backend with one and two workers loads CKPT with ringload.jax.load
and NamedShardings over the global mesh, checks every addressable shard
byte for byte against safetensors' own load, and writes to OUT_JSON:
{"ok", "error" (a traceback or null), "init_error" (jax.distributed
could not start: why), "process", "local_devices",
"runs": {"MESH/BACKEND/WORKERS": {"stats", "distinct_bytes"}}}.
"""
import json
import os
import sys
import traceback

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
# CPU devices only: the job needs no GPU plugin the venv's jax may bring
os.environ["JAX_PLATFORMS"] = "cpu"

import numpy as np  # noqa: E402
import jax  # noqa: E402

# No cross-process collectives: loading places each process's own shards
# and computes nothing across processes. Gloo's (the default) resolves
# the machine's host name, which a fresh container's /etc/hosts may not
# know (gloo tcp/device.cc: "rv == 0. -2 vs 0", EAI_NONAME).
jax.config.update("jax_cpu_collectives_implementation", None)
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import ringload.jax as rj  # noqa: E402
from ringload import _lib  # noqa: E402

BACKENDS = tuple(b for b in _lib.BACKENDS if b != "auto")


def _mesh(shape):
    """shape over every process's devices, process 0's first."""
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    return Mesh(np.array(devices).reshape(shape), ("data", "model"))


def _distinct_bytes(arrays):
    """Bytes of the distinct index boxes of this process's shards."""
    seen = {}
    for name, a in arrays.items():
        for s in a.addressable_shards:
            key = (name, tuple(x.indices(n)[:2]
                               for x, n in zip(s.index, a.shape)))
            seen[key] = s.data.nbytes
    return sum(seen.values())


def _check(out, shardings, full):
    assert sorted(out) == sorted(shardings), sorted(out)
    for name, a in out.items():
        assert a.sharding == shardings[name], name
        assert a.dtype == full[name].dtype, (name, a.dtype)
        assert not a.is_fully_addressable, name
        for s in a.addressable_shards:
            want = np.ascontiguousarray(full[name][s.index])
            got = np.asarray(s.data)
            assert got.shape == want.shape, (name, s.index)
            assert got.tobytes() == want.tobytes(), (name, s.index)


def run(ckpt, args):
    from safetensors.numpy import load_file
    full = load_file(ckpt)
    runs = {}
    for shape in args["meshes"]:
        mesh = _mesh(shape)
        shardings = {n: NamedSharding(mesh, P(*spec))
                     for n, spec in args["specs"].items()}
        for backend in BACKENDS:
            for workers in (1, 2):
                stats = {}
                out = rj.load(ckpt, shardings, backend=backend,
                              options={"workers": workers}, stats=stats)
                _check(out, shardings, full)
                key = "x".join(map(str, shape)) + f"/{backend}/{workers}"
                runs[key] = {"distinct_bytes": _distinct_bytes(out),
                             "stats": {k: stats[k] for k in
                                       ("bytes_needed", "bytes_read")}}
    return runs


def main():
    process, count, port, ckpt, out_json = sys.argv[1:6]
    args = json.loads(sys.argv[6])
    res = {"ok": False, "error": None, "process": int(process)}
    try:
        jax.distributed.initialize(f"localhost:{port}", int(count),
                                   int(process), initialization_timeout=60)
    except Exception as e:  # noqa: BLE001 - the test skips with it
        res["init_error"] = f"jax {jax.__version__}: {type(e).__name__}: {e}"
        with open(out_json, "w") as f:
            json.dump(res, f)
        os._exit(0)
    try:
        res["process"] = jax.process_index()
        res["local_devices"] = len(jax.local_devices())
        res["runs"] = run(ckpt, args)
        res["ok"] = True
    except Exception:  # noqa: BLE001 - reported to the test whole
        res["error"] = traceback.format_exc()
    with open(out_json, "w") as f:
        json.dump(res, f)
    if res["ok"]:  # a barrier: the coordinator (process 0) outlives the rest
        jax.distributed.shutdown()
    sys.stdout.flush()
    os._exit(0)  # a failed process skips the barrier and jax's exit hooks


if __name__ == "__main__":
    main()
