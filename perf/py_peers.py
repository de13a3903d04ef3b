#!/usr/bin/env python3
"""py_peers.py - ringload.torch.load_file side by side with the other
safetensors loaders (issue 23): one 2 GiB file to CPU torch tensors, cold
and hot, interleaved, each load in a fresh process timed around the call.

  ringload         ringload.torch.load_file(path)
  safetensors      safetensors.torch.load_file(path) (mmap, its default)
  safetensors-pread  the same with backend="pread"
  fastsafetensors  SafeTensorsFileLoader(device="cpu", nogds=True) with
                   --fst-threads and --fst-bbuf (copy_files_to_device,
                   then get_tensor of every key)
  runai            runai_model_streamer.SafetensorsStreamer.stream_file,
                   every tensor of get_tensors(), with
                   RUNAI_STREAMER_CONCURRENCY and RUNAI_STREAMER_CHUNK_BYTESIZE
                   (--runai-concurrency, --runai-chunk; default: unset)

Every child imports torch and its reader, then touches the file's size of
fresh memory (build/perf/bench_fill: this VM's host takes freed memory back
and faults it in slowly, docs/benchmarks.md), then starts its clock, which
covers the load call and then reading one byte of
every page of every tensor it returned, so that a loader whose tensors map
the file lazily (safetensors' mmap) pays for its reads as the others do.
Cold: `sync; echo 3 > /proc/sys/vm/drop_caches` (root; else fadvise
DONTNEED) before each load. Hot: the file read once into the page cache
first; a hot run during which another process dropped the cache
(drop_pagecache in /proc/vmstat moved) is run again. The readers' order
turns every round; medians over rounds, and ringload's ratio to each.
Once, in the first round, each reader's tensors are hashed (after its
clock) and must equal safetensors' byte for byte.

  perf/py_peers.py [FILE] [--rounds 5] [--size 2G] [--modes cold,hot]
                   [--readers ringload,safetensors,...] [--json OUT] [--report OUT]

Without FILE, /var/tmp/ringload-peers-2g.safetensors is written first (by
safetensors' writer: llama-like BF16 tensors). Prints one markdown table,
with the machine, the date and its load average. The children run
--python (default: $PYTHON, else the probe venv, which has every peer).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _venv_python():
    """The python of make pydeps' venv (make -s print-venv-python)."""
    try:
        return subprocess.run(["make", "-s", "-C", ROOT, "print-venv-python"],
                              capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return sys.executable


DEFAULT_FILE = "/var/tmp/ringload-peers-2g.safetensors"
FILL = os.path.join(ROOT, "build", "perf", "bench_fill")
READERS = ["ringload", "safetensors", "safetensors-pread", "fastsafetensors", "runai"]

# The child: imports, then the clock around load + touch; one JSON line.
CHILD = r'''
import hashlib, json, os, resource, sys, time
reader, path, verify = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
fst_threads, fst_bbuf_kb, fill = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
import torch
keep = []
if reader == "ringload":
    import ringload.torch
    def load():
        return ringload.torch.load_file(path)
elif reader.startswith("safetensors"):
    import safetensors.torch
    backend = "pread" if reader.endswith("pread") else "mmap"
    def load():
        return safetensors.torch.load_file(path, backend=backend)
elif reader == "fastsafetensors":
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    def load():
        loader = SafeTensorsFileLoader(SingleGroup(), "cpu", nogds=True,
                                       max_threads=fst_threads, bbuf_size_kb=fst_bbuf_kb)
        loader.add_filenames({0: [path]})
        buf = loader.copy_files_to_device()
        keep.append((loader, buf))  # the tensors are views of buf
        return {k: buf.get_tensor(k) for k in loader.get_keys()}
elif reader == "runai":
    from runai_model_streamer import SafetensorsStreamer
    def load():
        with SafetensorsStreamer() as s:
            s.stream_file(path)
            return dict(s.get_tensors())  # owned: valid after the streamer
def pages(out):
    """One byte of every page of every tensor (and each one's last)."""
    s = 0
    for t in out.values():
        if t.numel():
            b = t.reshape(-1).view(torch.uint8)
            s += int(b[::4096].sum()) + int(b[-1])
    return s
if fill:  # after the imports, as perf/py_load.py primes (docs/benchmarks.md)
    import subprocess
    subprocess.run([fill, str(os.path.getsize(path))], capture_output=True, check=False)
ru0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
out = load()
pages(out)
secs = time.perf_counter() - t0
ru1 = resource.getrusage(resource.RUSAGE_SELF)
res = {"seconds": secs, "bytes": sum(t.numel() * t.element_size() for t in out.values()),
       "cpu": ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime}
if verify:
    h = hashlib.sha256()
    for name in sorted(out):
        t = out[name]
        h.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        if t.numel():
            h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().data)
    res["sha256"] = h.hexdigest()
print(json.dumps(res))
'''

# The file: a llama-like stack of BF16 layers, written by safetensors.
WRITER = r'''
import sys, torch, safetensors.torch
path, size = sys.argv[1], int(sys.argv[2])
h, f, g = 2048, 5632, torch.Generator().manual_seed(23)
def t(*shape):
    return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
out, total, i = {"model.embed_tokens.weight": t(16000, h)}, 16000 * h * 2, 0
while total < size:
    p = f"model.layers.{i}."
    layer = {p + "self_attn.q_proj.weight": t(h, h), p + "self_attn.k_proj.weight": t(h // 4, h),
             p + "self_attn.v_proj.weight": t(h // 4, h), p + "self_attn.o_proj.weight": t(h, h),
             p + "mlp.gate_proj.weight": t(f, h), p + "mlp.up_proj.weight": t(f, h),
             p + "mlp.down_proj.weight": t(h, f), p + "input_layernorm.weight": t(h),
             p + "post_attention_layernorm.weight": t(h)}
    out.update(layer)
    total += sum(x.numel() * 2 for x in layer.values())
    i += 1
safetensors.torch.save_file(out, path, metadata={"format": "pt"})
'''


def size_arg(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().removesuffix("IB").removesuffix("B")
    return int(float(s[:-1]) * units[s[-1]]) if s and s[-1] in units else int(s)


def cache_drops():
    with open("/proc/vmstat") as f:
        for line in f:
            if line.startswith("drop_pagecache "):
                return int(line.split()[1])
    return -1


def drop_cache(path):
    """Cold: the whole page cache dropped (root), else this file's pages."""
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return
    except OSError:
        pass
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path):
    """Hot: the file read once, so that it is in the page cache."""
    with open(path, "rb", buffering=0) as f:
        while f.read(16 << 20):
            pass


def run_child(a, reader, verify):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep +
               os.environ.get("PYTHONPATH", ""))
    if a.runai_concurrency:
        env["RUNAI_STREAMER_CONCURRENCY"] = str(a.runai_concurrency)
    if a.runai_chunk:
        env["RUNAI_STREAMER_CHUNK_BYTESIZE"] = str(a.runai_chunk)
    p = subprocess.run([a.python, "-c", CHILD, reader, a.file, "1" if verify else "0",
                        str(a.fst_threads), str(a.fst_bbuf >> 10),
                        FILL if os.access(FILL, os.X_OK) else ""],
                       capture_output=True, text=True, env=env, check=False)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_one(a, reader, mode, verify):
    """One load; a hot one again (3 tries) when the cache was dropped."""
    for _ in range(3):
        if mode == "cold":
            drop_cache(a.file)
        else:
            warm(a.file)
        drops = cache_drops()
        r = run_child(a, reader, verify)
        if mode == "cold" or cache_drops() == drops:
            return r
    r["disturbed"] = True
    return r


def machine(path):
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    dev = subprocess.run(["df", "--output=source", path], capture_output=True,
                         text=True).stdout.split()[-1:]
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB, Linux {platform.release()}, "
            f"file on {dev[0] if dev else '?'}")


def report(a, rows, errors, load0, load1):
    size = os.path.getsize(a.file)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {machine(a.file)}")
    print(f"load average {load0:.1f} at start, {load1:.1f} at end; file {a.file} "
          f"{size / 2**30:.2f} GiB; {a.rounds} rounds, medians; fastsafetensors "
          f"max_threads {a.fst_threads}, bbuf {a.fst_bbuf >> 20} MiB; runai concurrency "
          f"{a.runai_concurrency or 'its default'}, chunk "
          f"{a.runai_chunk or 'its default'}\n")
    modes = a.modes.split(",")
    head = "| reader | " + " | ".join(f"{m} s | {m} GB/s | {m} CPU s | ringload / it, {m}"
                                      for m in modes)
    print(head + " |")
    print("|---" * (1 + 4 * len(modes)) + "|")
    med = {k: statistics.median(r["seconds"] for r in v) for k, v in rows.items() if v}
    cpu = {k: statistics.median(r["cpu"] for r in v) for k, v in rows.items() if v}
    for reader in a.readers.split(","):
        cells = []
        for m in modes:
            k = (reader, m)
            if k not in med:
                why = errors.get(k, "no run")
                cells += [f"n/a: {why}", "", "", ""]
                continue
            rl = med.get(("ringload", m))
            cells += [f"{med[k]:.2f}", f"{size / med[k] / 1e9:.2f}", f"{cpu[k]:.2f}",
                      f"{med[k] / rl:.2f}x" if rl else ""]
        print(f"| {reader} | " + " | ".join(cells) + " |")
    targets = [("cold", "safetensors", 1.5)] + \
        [("cold", p, 1.0) for p in ("fastsafetensors", "runai")] + [("hot", "safetensors", 1.0)]
    out = []
    for m, peer, want in targets:
        if ("ringload", m) in med and (peer, m) in med:
            x = med[(peer, m)] / med[("ringload", m)]
            out.append(f"{m} vs {peer} {x:.2f}x (target >= {want}: "
                       f"{'met' if x >= want else 'MISSED'})")
    print("\n" + "; ".join(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=DEFAULT_FILE)
    ap.add_argument("--size", type=size_arg, default=2 << 30,
                    help="of the file written when FILE does not exist (default 2G)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--modes", default="cold,hot")
    ap.add_argument("--readers", default=",".join(READERS))
    ap.add_argument("--python", default=os.environ.get("PYTHON") or _venv_python())
    ap.add_argument("--fst-threads", type=int, default=16, help="default: its own")
    ap.add_argument("--fst-bbuf", type=size_arg, default=16 << 20, help="default: its own")
    ap.add_argument("--runai-concurrency", type=int, help="default: its own (16 threads)")
    ap.add_argument("--runai-chunk", type=size_arg, help="default: its own")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--json", help="write every run's numbers here")
    ap.add_argument("--report", metavar="JSON",
                    help="print the table of an earlier --json run of FILE, run nothing")
    a = ap.parse_args()
    if a.report:
        with open(a.report) as f:
            runs = json.load(f)
        rows = {tuple(k.split("@")): v for k, v in runs.items()}
        a.rounds = max(len(v) for v in rows.values())
        report(a, rows, {}, float("nan"), float("nan"))
        return
    if not os.path.exists(a.file):
        print(f"writing {a.file} ({a.size >> 20} MiB) with safetensors", file=sys.stderr)
        subprocess.run([a.python, "-c", WRITER, a.file, str(a.size)], check=True)
    readers = a.readers.split(",")
    rows, errors, sums = {}, {}, {}
    load0 = os.getloadavg()[0]
    for rnd in range(a.rounds):
        order = readers[rnd % len(readers):] + readers[:rnd % len(readers)]
        for mode in a.modes.split(","):
            for reader in order:
                verify = rnd == 0 and mode == a.modes.split(",")[0] and not a.no_verify
                r = run_one(a, reader, mode, verify)
                print(f"round {rnd} {mode} {reader}: {r}", file=sys.stderr)
                if "error" in r:
                    errors[(reader, mode)] = r["error"]
                    continue
                if "sha256" in r:
                    sums[reader] = r["sha256"]
                rows.setdefault((reader, mode), []).append(r)
    ref = sums.get("safetensors")
    for reader, digest in sums.items():
        if ref and digest != ref:
            sys.exit(f"py_peers.py: {reader}'s tensors differ from safetensors' ({digest})")
    report(a, rows, errors, load0, os.getloadavg()[0])
    if a.json:
        with open(a.json, "w") as f:
            json.dump({f"{k[0]}@{k[1]}": v for k, v in rows.items()}, f, indent=1)


if __name__ == "__main__":
    main()
