#!/usr/bin/env python3
"""Bytes the device delivers for torch.distributed read-once loads (issue
33 item 2): 4 gloo ranks on one machine load one checkpoint; the bytes
are the sectors read on the file's block device (/proc/diskstats) while
the ranks run, from a cold file (its pages dropped with
POSIX_FADV_DONTNEED, which needs no root), less what the same ranks read
when they start, join the group and build the mesh without loading
("launch"). Reported as a multiple of the file's size.

    perf/dist_bytes.py [--mb 512] [--rounds 3] [--dir DIR] [CASE ...]

Also the bytes the ranks themselves read during the load call
(/proc/self/io read_bytes, from just before it: not the imports, which a
cache another process drops would read again), less a launch's: the
device counts every process of the machine, so on a busy one only the
ranks' count is exact.

CASE: dtensors (load_dtensors on a 2x2 mesh, the issue's placements),
load (ringload.torch.load, a 2x2 spec of 4 processes), subgroup (two
groups of 2 ranks, each loading a 2x2 spec of 2 processes: the file
twice, reported per group), each with read once; add "-all" for
read_once=False. Prints one line per case: the median of the rounds'
multiples and every round's. Needs torch >= 2.4 (the venv of make
pydeps), PYTHONPATH=python and RINGLOAD_LIB (as python/tests set them),
and the file on a block device; the machine should be quiet.

Uses the public ringload.torch API only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WORLD = 4
CASES = ("dtensors", "load", "subgroup")


def make_ckpt(path, mb):
    """The issue's layout scaled to about mb MiB: 6 F32 [4096k, 3072k]
    tensors (Replicate, Shard(1)), 6 F16 [2048k, 8192k] (Replicate,
    Shard(0)) and 6 F32 norms (replicated)."""
    import numpy as np
    k = max(mb / 503.0, 1e-3) ** 0.5
    r = lambda n: max(16, int(n * k) // 16 * 16)  # noqa: E731
    tensors, rng = {}, np.random.default_rng(0)
    for i in range(6):
        tensors[f"l{i}.w"] = rng.random((r(4096), r(3072)), np.float32)
        tensors[f"l{i}.h"] = rng.random((r(2048), r(8192)),
                                        np.float32).astype(np.float16)
        tensors[f"l{i}.norm"] = rng.random(r(4096), np.float32)
    _write(path, tensors)


def _write(path, tensors):
    """A safetensors file of numpy arrays (no dependency on safetensors)."""
    names = {"float32": "F32", "float16": "F16"}
    header, off = {}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": names[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for a in tensors.values():
            f.write(a.tobytes())
        f.flush()
        os.fsync(f.fileno())


def block_device(path):
    """The /proc/diskstats name of path's block device, or None."""
    st = os.stat(path)
    link = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    if not os.path.exists(link):
        return None
    return os.path.basename(os.path.realpath(link))


def sectors(dev):
    """Sectors read so far on dev (/proc/diskstats, 512 bytes each)."""
    with open("/proc/diskstats") as f:
        for line in f:
            x = line.split()
            if x[2] == dev:
                return int(x[5])
    raise LookupError(dev)


def drop(path):
    """Drops path's pages from the page cache (clean pages: no root)."""
    with open(path, "rb") as f:
        os.fsync(f.fileno())  # dirty pages would stay
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def job(path, case, tmp):
    """Runs case on WORLD ranks; returns the bytes the device delivered."""
    dev = block_device(path)
    init = os.path.join(tmp, f"init-{case}-{time.monotonic_ns()}")
    drop(path)
    before = sectors(dev)
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__),
                               "--worker", case, str(rank), init, path],
                              env=dict(os.environ, OMP_NUM_THREADS="1"),
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for rank in range(WORLD)]
    logs = [p.communicate(timeout=900)[0] for p in procs]
    for p, log in zip(procs, logs):
        if p.returncode:
            raise RuntimeError(f"{case}: a rank failed:\n{log}")
    delivered = (sectors(dev) - before) * 512
    ranks = [json.loads(line[3:]) for log in logs
             for line in log.splitlines() if line.startswith("io ")]
    return delivered, sum(r["read_bytes"] for r in ranks), ranks


def measure(path, cases, rounds, tmp):
    """{case: [(device, ranks) per round]}: multiples of the file's size
    (per group for subgroup) of the bytes the device delivered less a
    launch's, and of the bytes the ranks read (/proc/self/io), each
    round's cases interleaved with a launch. The device counts every
    process of the machine; the ranks' count only theirs."""
    size = os.path.getsize(path)
    out = {c: [] for c in cases}
    for _ in range(rounds):
        launch = job(path, "launch", tmp)
        for c in cases:
            per = size * (2 if c.startswith("subgroup") else 1)
            dev, ranks, _ = job(path, c, tmp)
            out[c].append(((dev - launch[0]) / per,
                           (ranks - launch[1]) / per))
    return out


# ---- one rank ----

SPEC_RULES = [{"match": r"l[0-9]+\.w", "spec": [None, "model"]},
              {"match": r"l[0-9]+\.h", "spec": ["model"]}]


def _spec(processes):
    return {"mesh": {"shape": [2, 2], "axes": ["data", "model"],
                     "devices": [0, 1, 2, 3],
                     "process_of_device": processes},
            "rules": SPEC_RULES}


def worker(case, rank, init, path):
    import datetime
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    import ringload.torch as rt
    dist.init_process_group("gloo", init_method=f"file://{init}",
                            rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=600))
    mesh = init_device_mesh("cpu", (2, 2))
    read_once = not case.endswith("-all")
    case, stats = case.split("-")[0], {}
    groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dist.barrier()
    # the load's reads alone: not the imports, which a cache dropped by
    # another process of the machine would read again
    start = _read_bytes()
    if case == "dtensors":
        pl = {}
        for i in range(6):
            pl[f"l{i}.w"] = [Replicate(), Shard(1)]
            pl[f"l{i}.h"] = [Replicate(), Shard(0)]
        rt.load_dtensors(path, mesh, pl, read_once=read_once, stats=stats)
    elif case == "load":
        rt.load(path, _spec([0, 1, 2, 3]), read_once=read_once,
                stats=stats)
    elif case == "subgroup":
        rt.load(path, _spec([0, 0, 1, 1]), process_group=groups[rank // 2],
                read_once=read_once, stats=stats)
    dist.barrier()
    print("io " + json.dumps({"read_bytes": _read_bytes() - start,
                              "stats": stats}), flush=True)
    os._exit(0)


def _read_bytes():
    """Bytes this process had read from storage (/proc/self/io
    read_bytes: every bio it submitted, O_DIRECT and io_uring included)."""
    with open("/proc/self/io") as f:
        return next(int(x.split()[1]) for x in f
                    if x.startswith("read_bytes:"))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        case, rank, init, path = sys.argv[2:6]
        worker(case, int(rank), init, path)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None)
    ap.add_argument("cases", nargs="*", default=list(CASES))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir or os.getcwd()) as tmp:
        path = os.path.join(tmp, "m.safetensors")
        make_ckpt(path, a.mb)
        if block_device(path) is None:
            sys.exit(f"{path}: on no block device: nothing to count")
        print(f"# {os.path.getsize(path)} bytes on {block_device(path)}, "
              f"{WORLD} gloo ranks, {a.rounds} rounds")
        print(f"{'case':12s} {'device':>8s} {'ranks':>8s}  rounds "
              "(device/ranks)")
        for c, xs in measure(path, a.cases, a.rounds, tmp).items():
            print(f"{c:12s} {statistics.median(x[0] for x in xs):7.3f}x "
                  f"{statistics.median(x[1] for x in xs):7.3f}x  " +
                  ", ".join(f"{d:.3f}/{r:.3f}" for d, r in xs))


if __name__ == "__main__":
    main()
