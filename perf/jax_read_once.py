#!/usr/bin/env python3
"""What read once costs in a multi-process JAX job (issue 30 item 1):
2 processes of 4 CPU devices on one machine (jax.distributed on a
localhost coordinator) load one F32 tensor of --mb MiB replicated over a
2x4 mesh with ringload.jax.load, read_once=False (each process reads all
of it) and True (each reads half and sends it to the other through the
coordination service's key-value store); and the store's own rate: --mb
MiB set by one process and taken (get, delete) by the other, in parts of
4 MiB, as python/ringload/_kv.py moves them.

    perf/jax_read_once.py [--mb 64] [--rounds 3] [--dir DIR]

Prints per round the seconds of each load (the slower process's) and
the store's MB/s, then the medians. The file is written once and read
from the page cache (hot): the figure is the transport's cost, not the
drive's. Needs jax (the venv of make pydeps), PYTHONPATH=python and
RINGLOAD_LIB (as python/tests set them).

Uses the public ringload.jax API (and JAX's key-value store client).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PART = 4 << 20


def worker(process, port, path, mb, out):
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import numpy as np
    import jax
    jax.config.update("jax_cpu_collectives_implementation", None)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    jax.distributed.initialize(f"localhost:{port}", 2, process,
                               initialization_timeout=60)
    import ringload.jax as rj
    from jax._src import distributed
    client = distributed.global_state.client
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    mesh = Mesh(np.array(devices).reshape(2, 4), ("data", "model"))
    shardings = {"w": NamedSharding(mesh, P())}
    res = {}
    for read_once in (False, True):
        client.wait_at_barrier(f"load{read_once}", 120000)
        t0 = time.perf_counter()
        rj.load(path, shardings, read_once=read_once)["w"].block_until_ready()
        res["read_once" if read_once else "plain"] = time.perf_counter() - t0
    data = os.urandom(PART)
    client.wait_at_barrier("store", 120000)
    t0 = time.perf_counter()
    for i in range(mb * (1 << 20) // PART):
        if process == 0:
            client.key_value_set_bytes(f"perf/{i}", data)
        else:
            client.blocking_key_value_get_bytes(f"perf/{i}", 120000)
            client.key_value_delete(f"perf/{i}")
    res["store_mb_s"] = mb * (1 << 20) / 1e6 / (time.perf_counter() - t0)
    client.wait_at_barrier("end", 120000)
    with open(out, "w") as f:
        json.dump(res, f)
    jax.distributed.shutdown()


def one_round(path, mb, tmp):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    outs = [os.path.join(tmp, f"p{i}.json") for i in range(2)]
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(i),
                               str(port), path, str(mb), outs[i]],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for i in range(2)]
    for p in procs:
        p.wait(timeout=900)
    res = []
    for out in outs:
        with open(out, encoding="utf-8") as f:
            res.append(json.load(f))
    return {"plain": max(r["plain"] for r in res),
            "read_once": max(r["read_once"] for r in res),
            "store_mb_s": res[1]["store_mb_s"]}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        a = sys.argv[2:]
        return worker(int(a[0]), a[1], a[2], int(a[3]), a[4])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    import numpy as np
    from safetensors.numpy import save_file
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = os.path.join(tmp, "w.safetensors")
        n = args.mb * (1 << 20) // 4
        save_file({"w": np.arange(n, dtype="<f4").reshape(-1, 1024)}, path)
        rounds = []
        for r in range(args.rounds):
            rounds.append(one_round(path, args.mb, tmp))
            x = rounds[-1]
            print(f"round {r}: plain {x['plain']:.2f} s, read_once "
                  f"{x['read_once']:.2f} s, store {x['store_mb_s']:.0f} MB/s",
                  flush=True)
    print(f"median of {args.rounds}: " + ", ".join(
        f"{k} {statistics.median(x[k] for x in rounds):.2f}"
        for k in ("plain", "read_once", "store_mb_s")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
