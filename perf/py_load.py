#!/usr/bin/env python3
"""py_load.py - Python readers against each other and against fio on one
checkpoint file (issue 13's benchmark):

  ringload.torch.load_file   (device cpu, and cuda:0 when CUDA is present:
                              streaming through a pinned window pool)
  safetensors.torch.load_file (when the safetensors package is installed)
  ringload.load(options={"staging_budget": B}) (CPU: the streaming loop
                              into tensors torch owns, host memory ~ B)
  ringload load (the CLI)    (CPU only: the same file loaded by the command)
  fio                         its best of a small grid (io_uring, O_DIRECT,
                              fixedbufs, bs 1M/4M/8M x iodepth 16/64 x
                              numjobs 1/2/4/cores)

Every round runs every reader once, interleaved (the order turning every
round), each cold (the file's page cache dropped: posix_fadvise
DONTNEED, and /proc/sys/vm/drop_caches when root), each Python reader in a
fresh interpreter that imports torch (and initialises CUDA for cuda:0)
before its clock starts, and each right after touching the file's size of
fresh memory (build/perf/bench_fill, for VMs that hand freed memory back
to their host; see prime()). Reported: median GB/s per reader and device,
median CPU seconds of the load (the Python reader's process from its clock's
start; the CLI's whole process), the ratios the issue targets, and the peak
RSS above the interpreter's RSS after those imports (VmHWM after clearing
it through /proc/self/clear_refs), next to the budget.

  perf/py_load.py FILE [--rounds 5] [--budget SIZE] [--devices cpu,cuda:0]
                       [--no-fio] [--json OUT]

Timings mean something only on a quiet machine (docs/benchmarks.md); smoke
it on a small file with --rounds 1. Standard library only in this process;
the children need torch (and numpy).
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = os.environ.get("PYTHON", "/usr/bin/python3")

# The child: imports, (CUDA init), clears VmHWM, loads, reports one JSON line.
CHILD = r'''
import json, os, sys, time
reader, path, device, budget, fill = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
import resource, subprocess
import torch
if device.startswith("cuda"):
    torch.cuda.init(); torch.empty(1, device=device); torch.cuda.synchronize()
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
if reader == "ringload-stream":
    import ringload
    def load():
        return ringload.load(path, framework="pt", options={"staging_budget": budget})[0]
elif reader == "ringload":
    import ringload, ringload.torch
    def load():
        if budget and device.startswith("cuda"):
            return ringload.load(path, framework="pt", device_map={0: device},
                                 options={"staging_budget": budget})[0]
        return ringload.torch.load_file(path, device=device)
else:
    import safetensors.torch
    def load():
        return safetensors.torch.load_file(path, device=device)
if fill:  # primed after the imports, as the CLI is primed just before it runs
    subprocess.run([fill, str(os.path.getsize(path))], capture_output=True, check=False)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # VmHWM := VmRSS
base = status("VmRSS:")
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
out = load()
if device.startswith("cuda"):
    torch.cuda.synchronize()
secs = time.perf_counter() - t0
ru1 = resource.getrusage(resource.RUSAGE_SELF)
nbytes = sum(t.numel() * t.element_size() for t in out.values())
print(json.dumps({"seconds": secs, "bytes": nbytes,
                  "extra_rss": status("VmHWM:") - base,
                  "cpu": ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime}))
'''


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if os.geteuid() == 0:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1")
        except OSError:
            pass


def size_arg(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().removesuffix("IB").removesuffix("B")
    return int(float(s[:-1]) * units[s[-1]]) if s and s[-1] in units else int(s)


def run_python(reader, path, device, budget):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    fill = FILL if os.access(FILL, os.X_OK) else ""
    p = subprocess.run([PY, "-c", CHILD, reader, path, device, str(budget), fill],
                       capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"{reader} on {device}: {p.stderr.strip()[-400:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_cli(path):
    """The CLI's own total (from its start to the end of the read, as the
    Python readers' clock), and the CPU of its whole process."""
    exe = os.path.join(ROOT, "build", "ringload")
    prime(os.path.getsize(path))
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([exe, "load", path, "--json", "--quiet"], capture_output=True,
                       text=True, check=True)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    d = json.loads(p.stdout)
    return {"seconds": d["seconds"]["total"], "bytes": d["bytes"], "extra_rss": 0,
            "cpu": ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime}


FIO_GRID = [(bs, qd, jobs) for bs in ("1M", "4M", "8M") for qd in (16, 64)
            for jobs in sorted({1, 2, 4, os.cpu_count() or 1})]


FILL = os.path.join(ROOT, "build", "perf", "bench_fill")


def prime(size):
    """Touches size bytes of fresh memory in a child (build/perf/bench_fill)
    just before a timed run: a VM that hands freed memory back to its host
    faults it back slowly (docs/benchmarks.md), which would otherwise land
    on whichever reader allocates first in a round. The host takes freed
    memory back about two seconds after it was freed (bench_fill right
    after a fill: 2-4 GB/s; two seconds later: 0.7-1.2 GB/s), so every
    reader is primed right before its clock starts: the CLI here, a Python
    reader in its child after importing torch (which takes longer than
    that; primed before the imports, it paid the slow fault-back, most of
    the 0.83x of docs/benchmarks.md's first figures)."""
    if os.access(FILL, os.X_OK):
        subprocess.run([FILL, str(size)], capture_output=True, check=False)


def run_fio(path):
    """The best GB/s of the grid, each point cold."""
    best = 0.0
    size = os.path.getsize(path)
    for bs, qd, jobs in FIO_GRID:
        drop_cache(path)
        p = subprocess.run(["fio", "--name=r", f"--filename={path}", "--rw=read",
                            "--ioengine=io_uring", "--direct=1", "--fixedbufs", f"--bs={bs}",
                            f"--iodepth={qd}", f"--numjobs={jobs}", "--group_reporting",
                            f"--size={size // jobs // 4096 * 4096}",
                            "--offset_increment=" + str(size // jobs // 4096 * 4096),
                            "--output-format=json"], capture_output=True, text=True,
                           check=False)
        if p.returncode != 0:
            continue
        rd = json.loads(p.stdout)["jobs"][0]["read"]
        best = max(best, rd["bw_bytes"] / 1e9)
    return best


def readers(devices, have_st):
    out = []
    for dev in devices:
        out.append(("ringload", dev))
        if have_st:
            out.append(("safetensors", dev))
    if "cpu" in devices:
        out.append(("ringload-stream", "cpu"))
        out.append(("cli", "cpu"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--budget", type=size_arg, default=256 << 20,
                    help="streaming budget (cuda targets, ringload-stream; default 256M)")
    ap.add_argument("--devices", default=None,
                    help="comma-separated (default: cpu, and cuda:0 when present)")
    ap.add_argument("--no-fio", action="store_true")
    ap.add_argument("--json", help="write every round's numbers here")
    a = ap.parse_args()
    have_torch = subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0
    if not have_torch:
        sys.exit("py_load.py: needs torch in " + PY)
    cuda = subprocess.run([PY, "-c", "import torch,sys; sys.exit(not torch.cuda.is_available())"],
                          capture_output=True).returncode == 0
    devices = a.devices.split(",") if a.devices else ["cpu"] + (["cuda:0"] if cuda else [])
    have_st = subprocess.run([PY, "-c", "import safetensors.torch"],
                             capture_output=True).returncode == 0
    use_fio = not a.no_fio and shutil.which("fio")
    rows = {}
    order = readers(devices, have_st)
    for rnd in range(a.rounds):
        # the order turns every round, so that no reader always goes first
        for reader, dev in order[rnd % len(order):] + order[:rnd % len(order)]:
            drop_cache(a.file)
            r = run_cli(a.file) if reader == "cli" else \
                run_python(reader, a.file, dev, a.budget)
            rows.setdefault((reader, dev), []).append(r)
        if use_fio:
            rows.setdefault(("fio best", "-"), []).append(
                {"seconds": 1.0, "bytes": run_fio(a.file) * 1e9, "extra_rss": 0})
    report(rows, a, os.path.getsize(a.file))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{k[0]}@{k[1]}": v for k, v in rows.items()}, f, indent=1)


def report(rows, a, size):
    med = {k: statistics.median(r["bytes"] / r["seconds"] / 1e9 for r in v)
           for k, v in rows.items()}
    rss = {k: statistics.median(r["extra_rss"] for r in v) for k, v in rows.items()}
    cpu = {k: statistics.median(r.get("cpu", 0.0) for r in v) for k, v in rows.items()}
    print(f"file {a.file}: {size / 1e9:.2f} GB, {a.rounds} rounds, cold, medians; "
          f"streaming budget {a.budget >> 20} MiB")
    print("| reader | device | GB/s | CPU s | peak RSS above imports (MiB) |")
    print("|---|---|---|---|---|")
    for k in rows:
        print(f"| {k[0]} | {k[1]} | {med[k]:.2f} | {cpu[k]:.2f} | {rss[k] / 2**20:.0f} |")
    fio = med.get(("fio best", "-"))
    for dev in sorted({k[1] for k in rows if k[0] == "ringload"}):
        rl = med[("ringload", dev)]
        parts = []
        if fio:
            parts.append(f"{rl / fio:.2f}x fio best (target >= 0.9 on cuda)")
        if ("safetensors", dev) in med:
            parts.append(f"{rl / med[('safetensors', dev)]:.2f}x safetensors (target >= 1.5)")
        if dev == "cpu" and ("cli", "cpu") in med:
            parts.append(f"{rl / med[('cli', 'cpu')]:.2f}x ringload load (target >= 0.9)")
        if dev.startswith("cuda"):
            parts.append(f"extra RSS {rss[('ringload', dev)] / 2**20:.0f} MiB vs budget "
                         f"{a.budget >> 20} MiB (target <= budget + 10%)")
        line = f"ringload to {dev}: " + ", ".join(parts)
        print(line)


if __name__ == "__main__":
    main()
