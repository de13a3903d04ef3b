"""One process of test_jax_procs' multi-process JAX job: jax_worker.py
PROCESS COUNT PORT CKPT OUT_JSON ARGS_JSON. Joins the job (a coordinator
on localhost:PORT, 4 CPU devices a process), then for every mesh of ARGS
and every backend with one and two workers loads CKPT with ringload.jax.load
(ARGS's "read_once": with read_once=True) and NamedShardings over the
global mesh, checks every addressable shard byte for byte against
safetensors' own load (ARGS's "fail": one failing read-once load instead,
then a good one: fail()), and writes to OUT_JSON:
{"ok", "error" (a traceback or null), "init_error" (jax.distributed
could not start: why), "process", "local_devices",
"runs": {"MESH/BACKEND/WORKERS": {"stats", "distinct_bytes"}}, or
fail()'s {"error", "seconds"}}.
"""
import json
import os
import sys
import time
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

import ringload  # noqa: E402
import ringload.jax as rj  # noqa: E402
from ringload import _lib  # noqa: E402

OUT = []  # the result's path, for a process that leaves early
BACKENDS = tuple(b for b in _lib.BACKENDS if b != "auto")
STATS = ("bytes_needed", "bytes_read", "sent_bytes", "received_bytes",
         "unique_bytes")


def _mesh(shape, axes=("data", "model")):
    """shape over every process's devices, process 0's first."""
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    return Mesh(np.array(devices).reshape(shape), axes)


def _shardings(mesh, args):
    """{name: NamedSharding} of ARGS's specs over mesh ({"flat": spec}:
    over every device on one axis, "all", instead)."""
    flat = _mesh((len(jax.devices()),), ("all",))
    return {n: NamedSharding(flat, P(*s["flat"])) if isinstance(s, dict)
            else NamedSharding(mesh, P(*s))
            for n, s in args["specs"].items()}


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
            want = np.asarray(full[name][s.index])  # 0-d stays 0-d
            got = np.asarray(s.data)
            assert got.shape == want.shape, (name, s.index)
            assert got.tobytes() == want.tobytes(), (name, s.index)


def run(ckpt, args):
    """Every mesh x backend x workers of args (read_once: args's)."""
    from safetensors.numpy import load_file
    load_args = {"read_once": True, "timeout": args.get("kv_timeout", 600)} \
        if args.get("read_once") else {}
    full = load_file(ckpt)
    runs = {}
    for shape in args["meshes"]:
        mesh = _mesh(shape)
        shardings = _shardings(mesh, args)
        for backend in BACKENDS:
            for workers in (1, 2):
                stats = {}
                out = rj.load(ckpt, shardings, backend=backend,
                              options={"workers": workers}, stats=stats,
                              **load_args)
                _check(out, shardings, full)
                key = "x".join(map(str, shape)) + f"/{backend}/{workers}"
                runs[key] = {"distinct_bytes": _distinct_bytes(out),
                             "stats": {k: stats[k] for k in STATS
                                       if k in stats}}
    if load_args:  # what the loads left in the coordinator
        from jax._src import distributed
        runs["kv_left"] = [[k, len(v)] for k, v in distributed.global_state
                           .client.key_value_dir_get_bytes("ringload")]
    return runs


def _error_of(fn):
    """[class, code, message] of what fn() raised (None: nothing; code
    None: not a ringload.Error)."""
    try:
        fn()
    except ringload.Error as e:
        return [type(e).__name__, e.code, e.message]
    except Exception as e:  # noqa: BLE001 - the caller's own, reported
        return [type(e).__name__, None, str(e)]
    return None


def fail(ckpt, args):
    """A read-once load that fails on process args["fail"]["process"]
    (how: "missing", its file is not there; "send", its transport's sends
    raise; "dead", it leaves at its first send, having written its
    result; "callable", its shardings callable raises): the error and seconds of each process, then (but after
    "dead") the same load without the failure."""
    from ringload import _kv
    how = args["fail"]["how"] if jax.process_index() == \
        args["fail"]["process"] else None
    mesh = _mesh(args["meshes"][0])
    shardings = _shardings(mesh, args)
    put = _kv.Group.put

    def broken(self, key, data):
        if key.startswith("m/") and how == "dead":
            with open(OUT[0], "w") as f:
                json.dump({"ok": True, "process": jax.process_index(),
                           "runs": {"error": None, "dead": True}}, f)
            os._exit(0)
        if key.startswith("m/"):
            raise ValueError("injected send failure")
        return put(self, key, data)
    def raises(name, shape, dtype):
        raise ValueError(f"injected failure at {name}")
    if how in ("send", "dead"):
        _kv.Group.put = broken
    t0 = time.monotonic()
    err = _error_of(lambda: rj.load(
        ckpt + ".gone" if how == "missing" else ckpt,
        raises if how == "callable" else shardings,
        read_once=True, timeout=args["fail"].get("timeout", 600)))
    seconds = time.monotonic() - t0
    _kv.Group.put = put
    if args["fail"]["how"] == "dead":
        return {"error": err, "seconds": seconds}
    from safetensors.numpy import load_file
    _check(rj.load(ckpt, shardings, read_once=True), shardings,
           load_file(ckpt))
    return {"error": err, "seconds": seconds}


def main():
    process, count, port, ckpt, out_json = sys.argv[1:6]
    args = json.loads(sys.argv[6])
    OUT.append(out_json)
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
        res["runs"] = fail(ckpt, args) if args.get("fail") else \
            run(ckpt, args)
        res["ok"] = True
    except Exception:  # noqa: BLE001 - reported to the test whole
        res["error"] = traceback.format_exc()
    with open(out_json, "w") as f:
        json.dump(res, f)
    dead = args.get("fail", {}).get("how") == "dead"  # none to wait for
    if res["ok"] and not dead:  # a barrier: the coordinator outlives the rest
        jax.distributed.shutdown()
    sys.stdout.flush()
    os._exit(0)  # a failed process skips the barrier and jax's exit hooks


if __name__ == "__main__":
    main()
