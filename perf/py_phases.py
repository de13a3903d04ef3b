#!/usr/bin/env python3
"""py_phases.py - where the time of ringload.{torch,numpy}.load_file goes,
next to `ringload load` of the same file (issue 13: CPU load_file >= 0.9x
the CLI).

Every round runs, cold (page cache dropped) and interleaved, the CLI and a
fresh Python interpreter that imports the framework, then primes memory
(build/perf/bench_fill of the file's size, as perf/py_load.py does) and
calls the real load_file, timing its phases through wrappers around the
package's internal steps (nothing of load_file is re-implemented here):

  open         _handles.Checkpoint (rl_ckpt_open, the tensor list)
  c: plan      rl_loader_load's planning (its rl_load_stats.plan_seconds)
  c: run       rl_loader_load's run (total_seconds - plan_seconds); the
               workers' pre-faulting of staging, summed over workers, is
               shown apart (prefault, CPU-like: it overlaps the reads)
  views        _core.load_library after rl_loader_load (plan.shards(),
               staging views)
  build        _core.materialize (numpy views / torch tensors per tensor)
  rest         load_file's total minus the above (dtype checks, spec,
               dict, closes)

plus the load's CPU seconds (the process's, from the clock's start) and the
CLI's phases (its --json seconds) and CPU seconds (its whole process).

  perf/py_phases.py FILE [--rounds 5] [--framework pt|np]
                         [--prime after-imports|before-imports|none]

--prime before-imports reproduces the first benchmark's order (memory primed
before the interpreter started; torch's import takes longer than the ~2 s
after which this VM's host has taken freed memory back). Timings mean
something only on a quiet machine; CPU seconds are steadier under load.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = os.environ.get("PYTHON", "/usr/bin/python3")
FILL = os.path.join(ROOT, "build", "perf", "bench_fill")

CHILD = r'''
import functools, json, os, resource, subprocess, sys, time
path, fw, fill = sys.argv[1], sys.argv[2], sys.argv[3]
if fw == "pt":
    import torch
    import ringload.torch as mod
else:
    import ringload.numpy as mod
from ringload import _core, _handles
T = {}


def timed(owner, name, key):
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            T[key] = T.get(key, 0.0) + time.perf_counter() - t0
    setattr(owner, name, wrapper)


def loader_load(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        plan = fn(self, *args, **kwargs)
        st = self.stats()
        T["c: plan"] = st["plan_seconds"]
        T["c: run"] = st["total_seconds"] - st["plan_seconds"]
        T["prefault (sum of workers)"] = st["prepare_seconds"]
        return plan
    return wrapper


_handles.Loader.load = loader_load(_handles.Loader.load)
timed(_handles, "Checkpoint", "open")
timed(_handles.Loader, "load", "rl_loader_load")
timed(_core, "load_library", "load_library")
timed(_core, "materialize", "build")
if fill:
    subprocess.run([fill, str(os.path.getsize(path))], capture_output=True, check=False)
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
out = mod.load_file(path)
total = time.perf_counter() - t0
ru1 = resource.getrusage(resource.RUSAGE_SELF)
T["views"] = T.pop("load_library") - T.pop("rl_loader_load")
T["rest"] = total - T["open"] - T["c: plan"] - T["c: run"] - T["views"] - T["build"]
T["total"] = total
T["cpu"] = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
print(json.dumps(T))
'''


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if os.geteuid() == 0:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")


def prime(path):
    if os.access(FILL, os.X_OK):
        subprocess.run([FILL, str(os.path.getsize(path))], capture_output=True, check=False)


def run_python(path, fw, how):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    if how == "before-imports":
        prime(path)
    fill = FILL if how == "after-imports" and os.access(FILL, os.X_OK) else ""
    p = subprocess.run([PY, "-c", CHILD, path, fw, fill], capture_output=True, text=True,
                       env=env, check=False)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-600:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_cli(path, how):
    if how != "none":
        prime(path)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([os.path.join(ROOT, "build", "ringload"), "load", path, "--json",
                        "--quiet"], capture_output=True, text=True, check=True)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    d = json.loads(p.stdout)["seconds"]
    return {"open": d["open"], "plan": d["plan"], "read": d["read"], "total": d["total"],
            "cpu": ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime}


def table(title, runs, size):
    print(f"{title}: medians of {len(runs)} (ms; cpu in s)")
    for key in runs[0]:
        v = statistics.median(r[key] for r in runs)
        print(f"  {key:28s} {v:8.3f}" if key == "cpu" else f"  {key:28s} {v * 1e3:8.1f}")
    print(f"  {'GB/s':28s} {size / statistics.median(r['total'] for r in runs) / 1e9:8.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--framework", choices=("pt", "np"), default="pt")
    ap.add_argument("--prime", choices=("after-imports", "before-imports", "none"),
                    default="after-imports")
    a = ap.parse_args()
    py, cli = [], []
    for rnd in range(a.rounds):
        for which in (("py", "cli") if rnd % 2 == 0 else ("cli", "py")):
            drop_cache(a.file)
            if which == "py":
                py.append(run_python(a.file, a.framework, a.prime))
            else:
                cli.append(run_cli(a.file, a.prime))
    size = os.path.getsize(a.file)
    table(f"load_file ({a.framework}, prime {a.prime})", py, size)
    table("ringload load", cli, size)
    ratio = statistics.median(r["total"] for r in cli) / statistics.median(
        r["total"] for r in py)
    print(f"load_file / ringload load: {ratio:.2f}x (target >= 0.9)")


if __name__ == "__main__":
    sys.exit(main())
