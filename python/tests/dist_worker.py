"""One rank of test_dist's 4-process gloo jobs: dist_worker.py CASE RANK
WORLD INIT_FILE CKPT OUT_JSON [JSON args]. Runs CASE, checks the values
against safetensors' own load (DTensors: through torch's distribute_tensor
too), and writes what the test checks to
OUT_JSON: {"ok": bool, "error": [class, code, message] or null, "stats"}.
"""
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import (Replicate, Shard,  # noqa: E402
                                      distribute_tensor)

import ringload  # noqa: E402
import ringload.torch as rt  # noqa: E402


def _full(path):
    """{name: torch tensor} of the file, by safetensors' own load."""
    from safetensors.torch import load_file
    return load_file(path)


COMBOS = [(b, w, r) for b in ("io_uring", "libaio", "pread")
          for w in (1, 2) for r in (True, False)]


def _placements(spec):
    return {name: [Shard(p) if isinstance(p, int) else Replicate()
                   for p in pl] for name, pl in spec.items()}


def case_dtensors(ckpt, args):
    """Every backend, 1 and 2 workers, with and without read once: the
    statistics of each, by "backend/workers/read_once"."""
    mesh = init_device_mesh("cpu", tuple(args["mesh"]))
    pl = _placements(args["placements"])
    full = _full(ckpt)
    out = {}
    for backend, workers, read_once in COMBOS:
        stats = {}
        got = rt.load_dtensors(ckpt, mesh, pl, read_once=read_once,
                               backend=backend, stats=stats,
                               options={"workers": workers},
                               batch_bytes=args["batch_bytes"])
        _check_dtensors(got, full, mesh)
        out[f"{backend}/{workers}/{read_once}"] = stats
    return out


def _check_dtensors(out, full, mesh):
    assert sorted(out) == sorted(full), (sorted(out), sorted(full))
    for name, t in full.items():
        want = distribute_tensor(t, mesh, out[name].placements)
        assert out[name].placements == want.placements, name
        assert torch.equal(out[name].to_local(), want.to_local()), name
        assert torch.equal(out[name].full_tensor(), t), name


def case_load(ckpt, args):
    """ringload.torch.load on every backend, with and without read once;
    then read once with targets and files_of_process (by "targets")."""
    full, out = _full(ckpt), {}
    for backend, workers, read_once in COMBOS:
        stats = {}
        got = rt.load(ckpt, args["spec"], read_once=read_once,
                      backend=backend, options={"workers": workers},
                      stats=stats)
        _check_load(got, full, args["spec"])
        out[f"{backend}/{workers}/{read_once}"] = stats
    fop = dict(args["spec"], files_of_process=[["m.safetensors"], [],
                                               ["m.*"], []])
    spec = dict(args["spec"], targets=[
        {"name": "w2", "source": "w"},
        {"name": "wtop", "source": "w", "slice": [[4, 12], None]}])
    spec["rules"] = spec["rules"] + [{"match": "w2", "spec": ["data"]},
                                     {"match": "wtop", "spec": [None,
                                                                "model"]}]
    want = dict(full, w2=full["w"], wtop=full["w"][4:12])
    del want["w"]  # a source is not loaded under its own name
    for backend in ("io_uring", "pread"):
        stats = {}
        _check_load(rt.load(ckpt, fop, read_once=True, backend=backend,
                            stats=stats), full, fop)
        out[f"files_of_process/{backend}"] = stats
        stats = {}
        got = rt.load(ckpt, spec, read_once=True, backend=backend,
                      stats=stats)
        _check_load(got, want, spec)
        out[f"targets/{backend}"] = stats
    return out


def _bits(t):
    """t's raw bits, as an integer tensor of its width."""
    return t.contiguous().view({1: torch.uint8, 2: torch.int16, 4: torch.int32,
                                8: torch.int64}[t.element_size()])


def _check_converted(got, full, spec, to, what):
    """This rank's devices in got, each floating box bit for bit torch's
    .to(to) of safetensors' load (full), the others as stored."""
    import oracle
    mesh = spec["mesh"]
    mine = [d for d, p in zip(mesh["devices"], mesh["process_of_device"])
            if p == dist.get_rank()]
    assert sorted(got) == mine, (sorted(got), mine)
    for dev in mine:
        for name, t in full.items():
            box = oracle.boxes(spec, name, tuple(t.shape))[dev]
            want = t[tuple(slice(a, b) for a, b in box)]
            want = want.to(to) if want.is_floating_point() else want
            g = got[dev][name]
            assert g.dtype == want.dtype and g.shape == want.shape, \
                (what, dev, name, g.dtype, g.shape)
            assert torch.equal(_bits(g), _bits(want)), (what, dev, name)


def case_dtype(ckpt, args):
    """ringload.torch.load(read_once=True, dtype=...) to F16, BF16 and F32
    on every backend, 1 and 2 workers: each floating box bit for bit
    torch's .to() of safetensors' load, the others as stored. The
    statistics by "dest/backend/workers"."""
    full, out, spec = _full(ckpt), {}, args["spec"]
    for dest in ("F16", "BF16", "F32"):
        to = {"F16": torch.float16, "BF16": torch.bfloat16,
              "F32": torch.float32}[dest]
        for backend, workers in [(b, w) for b, w, r in COMBOS if r]:
            stats = {}
            got = rt.load(ckpt, spec, read_once=True, backend=backend,
                          options={"workers": workers}, stats=stats,
                          dtype=dest if workers == 1 else to)
            _check_converted(got, full, spec, to, (dest, backend))
            out[f"{dest}/{backend}/{workers}"] = stats
    return out


def case_subgroup(ckpt, args):
    """Two groups of two ranks, [0, 1] and [2, 3], each loading the spec of
    two processes on its own: the spec's process is the rank in the group
    (global rank 2 gets process 0's boxes), and read once exchanges within
    the group. The statistics by "read_once", and each group's first rank."""
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    group = groups[dist.get_rank() // 2]
    full, out = _full(ckpt), {"group_rank": dist.get_rank(group)}
    for read_once in (True, False):
        stats = {}
        got = rt.load(ckpt, args["spec"], process_group=group,
                      read_once=read_once, stats=stats)
        _check_load(got, full, args["spec"], dist.get_rank(group))
        out[str(read_once)] = stats
    return out


def _check_load(out, full, spec, process=None):
    mesh = spec["mesh"]
    process = dist.get_rank() if process is None else process
    mine = [d for d, p in zip(mesh["devices"], mesh["process_of_device"])
            if p == process]
    assert sorted(out) == mine, (sorted(out), mine)
    import oracle
    for dev in mine:
        for name, t in full.items():
            box = oracle.boxes(spec, name, tuple(t.shape))[dev]
            want = t[tuple(slice(a, b) for a, b in box)]
            assert torch.equal(out[dev][name], want), (dev, name)


def _fail_once(ckpt, bad, how, read_once):
    """One load where rank bad fails by how ("missing": its file does not
    exist; "sha256": its expected SHA-256 is wrong): [class, code,
    message] of the error this rank raised, None if none."""
    mesh = init_device_mesh("cpu", (4,))
    me_bad = dist.get_rank() == bad
    path = ckpt + ".missing" if how == "missing" and me_bad else ckpt
    sha = "0" * 64 if how == "sha256" and me_bad else None
    pl = {} if how == "sha256" else {"w": [Shard(0)]}  # whole files
    try:
        rt.load_dtensors(path, mesh, pl, read_once=read_once, sha256=sha)
    except ringload.Error as e:
        return [type(e).__name__, e.code, e.message]
    return None


def case_fail(ckpt, args):
    """Each failure in turn on one group, which stays usable after each;
    then a load that works."""
    out = {f"{how}/{ro}": _fail_once(ckpt, args["rank"], how, ro)
           for how in ("missing", "sha256") for ro in (True, False)}
    rt.load_dtensors(ckpt, init_device_mesh("cpu", (4,)), {})
    return out


def _error_of(fn):
    """[class, code, message] of the ringload.Error fn raises, or None."""
    try:
        fn()
    except ringload.Error as e:
        return [type(e).__name__, e.code, e.message]
    return None


def case_mismatch(ckpt, args):
    """Rank args["rank"] differs by args["how"]: "stale" or "copy" (it
    loads args["path"], a copy of the file with other bytes or the same),
    "sharding", "placements" or "batch_bytes". Each read-once load's error
    by "dtensors"/"load" (None: it loaded, and the values are checked);
    then a load that works on the same group."""
    odd = dist.get_rank() == args["rank"]
    how = args["how"]
    path = args["path"] if odd and how in ("stale", "copy") else ckpt
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    pl = {"w": [Shard(1 if odd and how == "placements" else 0)]}
    spec = json.loads(json.dumps(SPEC2))
    if odd and how == "sharding":
        spec["rules"][0]["spec"] = ["model", None]
    batch = 4096 if odd and how == "batch_bytes" else 1 << 20
    full = _full(ckpt)
    out = {"dtensors": _error_of(lambda: _check_dtensors(rt.load_dtensors(
        path, mesh, pl, batch_bytes=batch), full, mesh)),
        "load": _error_of(lambda: _check_load(rt.load(
            path, spec, read_once=True, batch_bytes=batch), full, spec))}
    _check_dtensors(rt.load_dtensors(ckpt, mesh, {"w": [Shard(0)]}), full,
                    mesh)
    return out


SPEC2 = {"mesh": {"shape": [2], "axes": ["model"], "devices": [0, 1],
                  "process_of_device": [0, 1]},
         "rules": [{"match": "w", "spec": [None, "model"]}]}


class _Dist:
    """torch.distributed as ringload._transport sees it: counts the calls
    its ops make (calls, by op), and makes the first of op fail raise
    RuntimeError "injected <op> failure": send and recv before posting,
    wait after the work completed (the buffer is then no longer used)."""

    def __init__(self, calls, fail):
        self.calls, self.fail = calls, fail

    def __getattr__(self, name):
        return getattr(dist, name)

    def _hit(self, op):
        self.calls[op] = self.calls.get(op, 0) + 1
        if op == self.fail and self.calls[op] == 1:
            raise RuntimeError(f"injected {op} failure")
        if self.fail == f"exit-{op}":
            os._exit(0)  # a rank that dies in the middle of the transfers

    def isend(self, *a, **k):
        self._hit("send")
        return _Work(self, dist.isend(*a, **k))

    def irecv(self, *a, **k):
        self._hit("recv")
        return _Work(self, dist.irecv(*a, **k))

    def all_reduce(self, *a, **k):
        self._hit("agree")
        return dist.all_reduce(*a, **k)


class _Work:
    def __init__(self, d, work):
        self.d, self.work = d, work

    def wait(self):
        self.work.wait()
        self.d._hit("wait")


def case_transport(ckpt, args):
    """Read once with the library's transport counting its ops: the calls
    of each op, the statistics, and the values checked; with args["fail"]
    (an op) on rank args["rank"]: the error each rank raised, how long it
    took, then the same load without the failure on the same group."""
    mesh = init_device_mesh("cpu", (2, 2))
    pl = _placements({"w": [0, 1], "emb": [0, None], "b": [None, 0]})
    full, calls, stats = _full(ckpt), {}, {}
    fail = args.get("fail") if dist.get_rank() == args.get("rank") else None
    from ringload import _transport
    _transport.dist = _Dist(calls, fail)
    out = {}
    if args.get("fail"):
        t0 = time.monotonic()
        out["error"] = _error_of(lambda: rt.load_dtensors(
            ckpt, mesh, pl, batch_bytes=64))
        out["seconds"] = time.monotonic() - t0
    _check_dtensors(rt.load_dtensors(ckpt, mesh, pl, batch_bytes=64,
                                     stats=stats), full, mesh)
    out.update(calls=calls, stats=stats)
    return out


def case_dead(ckpt, args):
    """Rank 3 leaves without loading (args["at"]: in the load, at its
    first transport op of that name): the others must fail, not hang."""
    if dist.get_rank() == 3 and not args.get("at"):
        os._exit(0)
    if args.get("at"):
        from ringload import _transport
        _transport.dist = _Dist({}, f"exit-{args['at']}"
                                if dist.get_rank() == 3 else None)
        mesh = init_device_mesh("cpu", (2, 2))
        rt.load_dtensors(ckpt, mesh, _placements(
            {"w": [0, 1], "emb": [0, None], "b": [None, 0]}), batch_bytes=64)
        return {}
    mesh = init_device_mesh("cpu", (4,))
    rt.load_dtensors(ckpt, mesh, {"w": [Shard(0)]})
    return {}


def _on_fake_gpus(args):
    """This rank's GPUs: the fake driver's two devices (fakegpu), the
    mesh's device cuda:(rank % 2); args["fail_rank"]'s copy number
    args["fail_at"] fails (FAKECUDA_FAIL_COPY_AT)."""
    import fakegpu
    fail = dist.get_rank() == args.get("fail_rank")
    gpus = fakegpu.FakeGpus(args["fake"], env={
        "FAKECUDA_FAIL_COPY_AT": str(args["fail_at"] if fail else 0)})
    gpus.install(rt, setattr)
    rt._mesh_device = lambda mesh: torch.device("cuda", dist.get_rank() % 2)
    return gpus


def _gpu_load(gpus, fn):
    """fn(stats)'s result checked to lie in the fake's memory, filled by
    the library's copies ({"copies": n, "received_bytes": of the
    transfers}); then freed, and nothing of the load left in the
    driver."""
    before, stats = gpus.stats().copies, {}
    got = fn(stats)
    for name, t in got.items():
        assert not t.nbytes or gpus.holds(t), f"{name} not in GPU memory"
    out = {"copies": gpus.stats().copies - before,
           "received_bytes": stats.get("received_bytes", 0)}
    assert out["copies"] > 0, "no device copy"
    del got, t
    gpus.free()
    assert not gpus.left(), gpus.left()
    return out


def case_cuda(ckpt, args):
    """ringload.torch onto each rank's GPUs (the fake driver's, _on_fake_
    gpus): load_dtensors on a 2x2 mesh and load(sharding, device_map: spec
    device d on cuda:(d % 2)), every backend, 1 and 2 workers, with and
    without read once: every local tensor lies in the memory ringload
    allocated (_cuda_empty) and the library's device copies filled, and
    equals safetensors'; nothing is left in the driver; then load read
    once converting to F16 (bit for bit torch's .to()). The copies and
    received bytes of each by "dtensors|load/backend/workers/read_once"
    and "load/F16/True"."""
    gpus = _on_fake_gpus(args)
    mesh = init_device_mesh("cpu", (2, 2))
    pl = _placements({"w": [0, 1], "emb": [0, None], "b": [None, 0]})
    spec = args["spec"]
    dmap = {d: f"cuda:{d % 2}" for d in spec["mesh"]["devices"]}
    full, out = _full(ckpt), {}
    for backend, workers, read_once in COMBOS:
        kw = dict(read_once=read_once, backend=backend,
                  options={"workers": workers}, batch_bytes=64)

        def dtensors(stats):
            got = rt.load_dtensors(ckpt, mesh, pl, stats=stats, **kw)
            _check_dtensors(got, full, mesh)
            return {n: t.to_local() for n, t in got.items()}

        def load(stats):
            got = rt.load(ckpt, spec, device_map=dmap, stats=stats, **kw)
            _check_load(got, full, spec)
            return _flat(got)
        key = f"{backend}/{workers}/{read_once}"
        out[f"dtensors/{key}"] = _gpu_load(gpus, dtensors)
        out[f"load/{key}"] = _gpu_load(gpus, load)

    def converted(stats):  # in the pinned windows, then copied
        got = rt.load(ckpt, spec, read_once=True, device_map=dmap,
                      dtype=torch.float16, batch_bytes=64, stats=stats)
        _check_converted(got, full, spec, torch.float16, "F16 on GPUs")
        return _flat(got)
    out["load/F16/True"] = _gpu_load(gpus, converted)
    return out


def _flat(got):
    """{"device/name": tensor} of load's {device: {name: tensor}}."""
    return {f"{d}/{n}": t for d, ts in got.items() for n, t in ts.items()}


def case_cuda_fail(ckpt, args):
    """A device copy fails on one rank (_on_fake_gpus) in a read-once
    args["how"] ("dtensors" or "load"): the error this rank raised, and
    what the load left in the driver."""
    gpus = _on_fake_gpus(args)
    if args["how"] == "dtensors":
        err = _error_of(lambda: rt.load_dtensors(
            ckpt, init_device_mesh("cpu", (2, 2)), _placements(
                {"w": [0, 1], "emb": [0, None], "b": [None, 0]}),
            read_once=True, batch_bytes=64))
    else:
        dmap = {d: f"cuda:{d % 2}" for d in args["spec"]["mesh"]["devices"]}
        err = _error_of(lambda: rt.load(ckpt, args["spec"], read_once=True,
                                        device_map=dmap, batch_bytes=64))
    gpus.free()
    return {"error": err, "left": gpus.left()}


def main():
    case, rank, world, init, ckpt, out = sys.argv[1:7]
    args = json.loads(sys.argv[7]) if len(sys.argv) > 7 else {}
    dist.init_process_group(
        "gloo", init_method=f"file://{init}", rank=int(rank),
        world_size=int(world),
        timeout=datetime.timedelta(seconds=args.get("timeout", 60)))
    result = {"ok": False, "error": None, "stats": None}
    t0 = time.monotonic()
    try:
        result["stats"] = globals()[f"case_{case}"](ckpt, args)
        result["ok"] = True
    except ringload.Error as e:
        result["error"] = [type(e).__name__, e.code, e.message]
    result["seconds"] = time.monotonic() - t0
    with open(out, "w") as f:
        json.dump(result, f)
    os._exit(0)  # no teardown collectives with a failed peer


if __name__ == "__main__":
    main()
