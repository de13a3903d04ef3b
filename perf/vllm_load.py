#!/usr/bin/env python3
"""vllm_load.py - vLLM's weight loading of one model directory, timed per
load format (issue 29, item 5):

  ringload          this package's load format (ringload.vllm)
  safetensors       vLLM's own (safe_open, tensor by tensor)
  fastsafetensors   vLLM's fastsafetensors path
  runai_streamer    vLLM's Run:ai Model Streamer loader

Each run is a whole process (the venv of make pydeps-vllm) that builds
vLLM's model on the CPU (VLLM_TARGET_DEVICE=cpu when no GPU) and then
times the loader's load_weights(model, model_config) alone: reading, and
vLLM's weight loaders copying into the parameters. The whole process's
wall time is reported too. Rounds are interleaved (every format once per
round, the order turning), each run cold: the files' page cache dropped
(posix_fadvise DONTNEED, and /proc/sys/vm/drop_caches when root). A
format that fails is reported with its error (why it does not run here)
and not retried. Medians, never means.

  perf/vllm_load.py DIR [--rounds 5] [--formats ringload,safetensors,...]
                        [--budget SIZE] [--make SIZE] [--json OUT]

--make SIZE first writes a random Llama of about SIZE bytes (bf16, four
shards and an index, transformers' save_pretrained) into DIR when DIR
has no config.json. Timings mean something only on a quiet machine
(docs/benchmarks.md); smoke it with --make 256M --rounds 1.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FORMATS = ("ringload", "safetensors", "fastsafetensors", "runai_streamer")

# The child: vLLM's model built, then load_weights timed; one JSON line.
CHILD = r'''
import json, os, sys, time
fmt, model, budget = sys.argv[1], sys.argv[2], sys.argv[3]
import torch
if not torch.cuda.is_available():
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
from vllm.config import (DeviceConfig, LoadConfig, ModelConfig, VllmConfig,
                         set_current_vllm_config)
from vllm.distributed import init_distributed_environment, initialize_model_parallel
from vllm.model_executor.model_loader import get_model_loader
from vllm.utils.torch_utils import set_default_torch_dtype
import ringload.vllm
ringload.vllm.register()
extra = {"staging_budget": budget} if fmt == "ringload" and budget != "-" else {}
device = "cuda" if torch.cuda.is_available() else "cpu"
mc = ModelConfig(model=model, dtype="auto", skip_tokenizer_init=True)
vc = VllmConfig(model_config=mc, device_config=DeviceConfig(device=device),
                load_config=LoadConfig(load_format=fmt, model_loader_extra_config=extra))
def rss_peak():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
with set_current_vllm_config(vc):
    init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                 distributed_init_method="tcp://127.0.0.1:%s" % sys.argv[4])
    initialize_model_parallel(1)
    loader = get_model_loader(vc.load_config)
    with set_default_torch_dtype(mc.dtype), torch.device(device):
        m = loader.create_model(vllm_config=vc, model_config=mc)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    t0 = time.perf_counter()
    loader.load_weights(m, mc)
    t1 = time.perf_counter()
print("RESULT " + json.dumps({"load_s": t1 - t0, "peak_rss": rss_peak()}))
'''


def size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.upper().rstrip("IB")
    return int(float(t[:-1]) * units[t[-1]]) if t[-1] in units and \
        not t[-1].isdigit() else int(t)


def venv_python():
    py = os.environ.get("RL_VLLM_PYTHON")
    if py:
        return py
    out = subprocess.run(["make", "-s", "-C", ROOT, "print-vllm-python"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def make_model(py, folder, nbytes):
    """A random bf16 Llama of about nbytes in folder (four shards)."""
    script = r'''
import sys, torch
from transformers import LlamaConfig, LlamaForCausalLM
folder, nbytes = sys.argv[1], int(sys.argv[2])
h, inter, vocab = 1024, 2816, 32000
per_layer = 2 * (h * h * 2 + 2 * h * (h // 2) + 3 * h * inter + 2 * h)
layers = max(1, (nbytes - 2 * 2 * vocab * h) // per_layer)
cfg = LlamaConfig(hidden_size=h, intermediate_size=inter, vocab_size=vocab,
                  num_hidden_layers=int(layers), num_attention_heads=16,
                  num_key_value_heads=8, max_position_embeddings=2048,
                  tie_word_embeddings=False, dtype="bfloat16")
torch.manual_seed(0)
with torch.device("cpu"):
    m = LlamaForCausalLM(cfg).to(torch.bfloat16)
m.save_pretrained(folder, max_shard_size=max(nbytes // 4, 1 << 20))
'''
    subprocess.run([py, "-c", script, folder, str(nbytes)], check=True)


def files_of(folder):
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.endswith(".safetensors"))


def drop_cache(paths):
    """Drops the files' page cache (py_load.py's way: fsync, DONTNEED, and
    drop_caches when root); True when drop_caches could run."""
    sys.path.insert(0, HERE)
    from py_load import drop_cache as drop_one
    for p in paths:
        drop_one(p)
    return os.geteuid() == 0


def run_one(py, fmt, folder, budget, port):
    """{"load_s", "peak_rss", "whole_s"} of one cold child, or {"error"}."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    env.setdefault("RINGLOAD_LIB", os.path.join(ROOT, "build",
                                                "libringload.so.0"))
    t0 = time.perf_counter()
    r = subprocess.run([py, "-c", CHILD, fmt, folder, budget, str(port)],
                       env=env, capture_output=True, text=True)
    whole = time.perf_counter() - t0
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]), whole_s=whole)
    err = [ln for ln in (r.stderr + r.stdout).splitlines()
           if "Error" in ln or "error" in ln]
    return {"error": (err[-1] if err else f"exit {r.returncode}").strip()}


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--budget", default="-",
                    help="ringload's staging_budget (default: the loader's)")
    ap.add_argument("--make", metavar="SIZE")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    py = venv_python()
    if a.make and not os.path.isfile(os.path.join(a.dir, "config.json")):
        make_model(py, a.dir, size(a.make))
    paths = files_of(a.dir)
    nbytes = sum(os.path.getsize(p) for p in paths)
    formats = a.formats.split(",")
    runs = {f: [] for f in formats}
    why = {}
    root_drop = False
    for rnd in range(a.rounds):
        k = rnd % len(formats)
        for fmt in formats[k:] + formats[:k]:
            if fmt in why:
                continue
            root_drop = drop_cache(paths) or root_drop
            res = run_one(py, fmt, a.dir, a.budget, 29600 + rnd)
            if "error" in res:
                why[fmt] = res["error"]
                print(f"# {fmt}: does not run here: {res['error']}",
                      flush=True)
                continue
            runs[fmt].append(res)
            print(f"{fmt}\t{rnd}\t{res['load_s']:.3f}\t{res['whole_s']:.1f}"
                  f"\t{res['peak_rss']}", flush=True)
    print(f"\n{nbytes / 2**20:.0f} MiB in {len(paths)} files, {a.rounds} "
          f"rounds, cold ({'drop_caches and ' if root_drop else ''}"
          "posix_fadvise DONTNEED), ringload's budget "
          + ("the loader's default" if a.budget == "-" else a.budget))
    print("| format | load_weights s | GB/s | whole process s | peak RSS MiB "
          "(during load_weights) |")
    print("|---|---|---|---|---|")
    table = {}
    for fmt in formats:
        if fmt in why:
            print(f"| {fmt} | does not run here: {why[fmt][:160]} | | | |")
            continue
        xs = runs[fmt]
        s = med([x["load_s"] for x in xs])
        table[fmt] = {"load_s": s, "gb_s": nbytes / s / 1e9,
                      "whole_s": med([x["whole_s"] for x in xs]),
                      "peak_rss": med([x["peak_rss"] for x in xs])}
        t = table[fmt]
        print(f"| {fmt} | {s:.3f} | {t['gb_s']:.2f} | {t['whole_s']:.1f} | "
              f"{t['peak_rss'] / 2**20:.0f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bytes": nbytes, "files": len(paths), "table": table,
                       "why": why, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
