#!/usr/bin/python3
"""layers.py - the library's layers call only downward, and no two source
files call each other (directly or round a longer loop).

Reads link-time symbol use from the library's object files (nm: what each
object defines and what it leaves undefined), so an arrow is a real call or
data reference, not a guess from text. Includes are checked as text for the
code that links the public API only (tools/, perf/, examples/, python's C
helpers). Prints one line per check and "N passed, N failed, 0 skipped".

    tests/check/layers.py [BUILD]      (default: build)
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

# Layer rank by top folder; a file may use only lower ranks, or its own
# folder (same rank, other folder: a sideways call, e.g. planner->engine).
# Sinks (sink/) sit above the engine, whose ops table they fill, and below
# the API, which builds them for its jobs.
RANK = {"common": 0, "planner": 1, "engine": 1, "sink": 2, "api": 3, "mpi": 4}
# Code that must use the public API only. perf/ may use engine internals
# where a raw-I/O mode needs them (DESIGN.md): rlperf and bench_engine.
CLIENTS = ("tools", "perf", "examples", "python", "mpi")
RAW_IO = re.compile(r"^perf/(rlperf[^/]*|bench_engine)\.[ch]$")
# The public headers: the core library's and the MPI executor's.
PUBLIC_HEADERS = {"ringload.h", "ringload_mpi.h"}
LIBRARY_HEADERS = {"engine.h", "eng_int.h", "sink.h", "host.h", "planner.h", "pl_private.h", "rl_common.h",
                   "rl_io.h", "plan_internal.h", "ckpt_internal.h", "spec_internal.h"}

results = []


def check(name, problems):
    results.append((name, problems))


def nm(obj, *flags):
    out = subprocess.run(["nm", *flags, obj], capture_output=True, text=True, check=True)
    syms = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            syms.append((parts[-2], parts[-1]))
    return syms


def source_of(obj, build):
    rel = os.path.relpath(obj, os.path.join(build, "obj"))
    return rel[:-2] + ".c"


def client_objects(top, tmp, problems):
    """Compiles the public-API clients (linked from sources by the Makefile)
    to objects in tmp, so their files' calls are seen too."""
    objs = []
    cc = os.environ.get("CC", "cc")
    for fold in CLIENTS:
        for path in sorted(glob.glob(os.path.join(top, fold, "**", "*.c"), recursive=True)):
            rel = os.path.relpath(path, top)
            with open(path, errors="replace") as f:
                uses_mpi = fold == "mpi" or '#include "ringload_mpi.h"' in f.read()
            comp = "mpicc" if uses_mpi else cc
            obj = os.path.join(tmp, rel[:-2] + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            r = subprocess.run([comp, "-std=gnu11", "-D_GNU_SOURCE", "-I" + top + "/api",
                                "-I" + top + "/common", "-I" + top + "/mpi",
                                "-I" + os.path.dirname(path),
                                "-c", "-o", obj, path], capture_output=True, text=True)
            if r.returncode != 0:
                first = (r.stderr.strip().splitlines() or ["?"])[0]
                problems.append(f"{rel}: cannot compile it for the check: {first}")
                continue
            objs.append((obj, rel))
    return objs


def symbol_graph(build, extra):
    objs = [(o, source_of(o, build)) for o in
            sorted(glob.glob(os.path.join(build, "obj", "**", "*.o"), recursive=True))]
    objs += extra
    defs, undef = {}, {}
    for o, src in objs:
        for kind, sym in nm(o, "--defined-only"):
            if kind.isupper() and kind not in "UVW":
                defs[sym] = src
        undef[src] = {s for k, s in nm(o, "-u")}
    edges = {src: set() for src in undef}
    for src, syms in undef.items():
        for s in syms:
            dst = defs.get(s)
            if dst and dst != src:
                edges[src].add(dst)
    return edges


def folder(path):
    return path.split("/", 1)[0]


def layer_problems(edges):
    bad = []
    for src, dsts in sorted(edges.items()):
        for dst in sorted(dsts):
            a, b = folder(src), folder(dst)
            ra, rb = RANK.get(a), RANK.get(b)
            if ra is None or rb is None or a == b:
                continue
            if rb > ra:
                bad.append(f"{src} calls up into {dst}")
            elif rb == ra:
                bad.append(f"{src} calls sideways into {dst}")
    return bad


def strongly_connected(edges):
    """Tarjan's algorithm, iterative; returns components of 2+ files."""
    index, low, on, stack, comps, n = {}, {}, set(), [], [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def include_problems(top):
    bad = []
    for fold in CLIENTS:
        for path in sorted(glob.glob(os.path.join(top, fold, "**", "*.[ch]"), recursive=True)):
            rel = os.path.relpath(path, top)
            with open(path, errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    name = os.path.basename(m.group(1))
                    own = os.path.exists(os.path.join(os.path.dirname(path), m.group(1)))
                    if name in PUBLIC_HEADERS or (own and name not in LIBRARY_HEADERS):
                        continue
                    if RAW_IO.match(rel):
                        continue
                    bad.append(f"{rel}:{n} includes {m.group(1)} (public API only)")
    return bad


def engine_include_problems(top):
    """The engine defines the sink table and calls it, never a sink: no
    file of engine/ includes one of sink/ (nor of planner/)."""
    bad = []
    for path in sorted(glob.glob(os.path.join(top, "engine", "*.[ch]"))):
        rel = os.path.relpath(path, top)
        with open(path, errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and re.match(r"(\.\./)?(sink|planner)/", m.group(1)):
                    bad.append(f"{rel}:{n} includes {m.group(1)}")
    return bad


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("RL_BUILD", "build")
    top = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    if not glob.glob(os.path.join(build, "obj", "*")):
        print(f"skip layers: no object files under {build}/obj (run make first)")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    compile_problems = []
    with tempfile.TemporaryDirectory() as tmp:
        edges = symbol_graph(build, client_objects(top, tmp, compile_problems))
    check("layers_call_only_down", compile_problems + layer_problems(edges))
    check("no_circles_between_files",
          [" <-> ".join(c) for c in strongly_connected(edges)])
    check("clients_use_the_public_header", include_problems(top))
    check("engine_includes_no_sink", engine_include_problems(top))
    failed = 0
    for name, problems in results:
        if problems:
            failed += 1
            print(f"FAIL {name}")
            for p in problems:
                print(f"    {p}")
        else:
            print(f"ok   {name}")
    print(f"{len(results) - failed} passed, {failed} failed, 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
