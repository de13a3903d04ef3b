#!/usr/bin/python3
"""layers.py - the library's layers use only the folders under them, and no
two source files use each other (directly or round a longer loop).

Two graphs, both read from what the code itself says:
- calls: link-time symbol use from the object files (nm: what each object
  defines and what it leaves undefined), so an arrow is a real call or data
  reference, not a guess from text;
- includes: every `#include "..."` of the sources, resolved as the compiler
  does (the including file's folder, then -Iapi -Icommon), folder to folder
  (a layer includes only the folders it may use) and file to file.
A file and its header (x.c, x.h) are one unit, as a reader sees them: a
circle is a loop of units, each including or calling the next. Clients
(tools/, perf/, examples/, mpi/) include the public headers only.
Prints one line per check and "N passed, N failed, N skipped".

    tests/check/layers.py [BUILD]      (default: build)
    tests/check/layers.py --self-test  (only the self-test, which every run
                                        does first: a circle and up-floor
                                        includes planted in a scratch tree
                                        are found)
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

# What each folder of the library may use (include or call) besides itself:
# docs/architecture.md's table. sink/ implements engine/sink.h; exec/ turns
# a plan into the engine's batches (above engine and the sinks' interface);
# api/ ties them together; mpi/ links the public API. planner/ and engine/
# never use each other.
MAY_USE = {
    "common": set(),
    "planner": {"common"},
    "engine": {"common"},
    "sink": {"engine", "common"},
    "exec": {"planner", "engine", "common"},
    "api": {"exec", "sink", "planner", "engine", "common"},
    "mpi": {"api", "exec", "sink", "planner", "engine", "common"},
}
# The folders the compiler searches for a quoted include after the
# including file's own (the Makefile's -Iapi -Icommon).
INCLUDE_PATH = ("api", "common")
# Code that must use the public API only. rlperf reads through the
# engine's narrow raw-read interface, engine/raw.h, and no other part of
# the engine (docs/architecture.md); bench_engine measures the engine itself.
CLIENTS = ("tools", "perf", "examples", "python", "mpi")
RAW_IO = re.compile(r"^perf/bench_engine\.[ch]$")
RAW_READ = re.compile(r"^perf/rlperf[^/]*\.[ch]$")
RAW_READ_HEADERS = {"raw.h"}
RAW_READ_SOURCE = "engine/raw.c"
# The public headers: the core library's and the MPI executor's.
PUBLIC_HEADERS = {"ringload.h", "ringload_types.h", "ringload_mpi.h"}
LIBRARY_HEADERS = {"engine.h", "engine_types.h", "eng_int.h", "sink.h", "host.h", "planner.h",
                   "pl_private.h", "common.h", "plan_io.h", "plan_internal.h", "ckpt_internal.h",
                   "spec_internal.h"}

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


def may_use(a, b):
    """Whether folder a may use folder b (None: not a library folder)."""
    if a not in MAY_USE or b not in MAY_USE or a == b:
        return True
    return b in MAY_USE[a]


def allowed(a):
    return ", ".join(sorted(MAY_USE[a])) or "nothing"


def layer_problems(edges):
    bad = []
    for src, dsts in sorted(edges.items()):
        for dst in sorted(dsts):
            a, b = folder(src), folder(dst)
            if not may_use(a, b):
                bad.append(f"{src} calls {dst} ({a}/ may use {allowed(a)})")
    return bad


INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def source_files(top):
    """The sources of the library and its clients, relative to top (tests,
    build outputs and the Python package are not layers)."""
    out = []
    for fold in list(MAY_USE) + [c for c in CLIENTS if c not in MAY_USE]:
        for path in glob.glob(os.path.join(top, fold, "**", "*.[ch]"), recursive=True):
            out.append(os.path.relpath(path, top))
    return sorted(out)


def resolve(top, src, name):
    """The file a quoted include names, as the compiler finds it, relative
    to top; None when it is not one of the tree's files."""
    for base in [os.path.dirname(src)] + list(INCLUDE_PATH):
        path = os.path.normpath(os.path.join(top, base, name))
        if os.path.isfile(path) and path.startswith(os.path.join(top, "")):
            return os.path.relpath(path, top)
    return None


def include_graph(top):
    """{file: [(line, included file)]} of the sources' quoted includes."""
    graph = {}
    for src in source_files(top):
        with open(os.path.join(top, src), errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                dst = m and resolve(top, src, m.group(1))
                if dst:
                    graph.setdefault(src, []).append((n, dst))
    return graph


def include_layer_problems(incs):
    bad = []
    for src, lst in sorted(incs.items()):
        for n, dst in lst:
            a, b = folder(src), folder(dst)
            if not may_use(a, b):
                bad.append(f"{src}:{n} includes {dst} ({a}/ may use {allowed(a)})")
    return bad


def unit(path):
    """A file and its header are one unit: planner/transfer_assign.c, planner/transfer_assign.h
    -> planner/transfer_assign."""
    if not path.endswith((".c", ".h")):
        return path
    return os.path.splitext(path)[0]


def unit_graph(incs, calls):
    """Units, each with the units it includes or calls."""
    edges = {}
    for src, lst in incs.items():
        edges.setdefault(unit(src), set()).update(unit(d) for _, d in lst)
    for src, dsts in calls.items():
        edges.setdefault(unit(src), set()).update(unit(d) for d in dsts)
    for u, dsts in list(edges.items()):
        dsts.discard(u)
        for d in dsts:
            edges.setdefault(d, set())
    return edges


def circle_problems(incs, calls):
    """Circles of units: every one fails."""
    return [" <-> ".join(comp) for comp in strongly_connected(unit_graph(incs, calls))]


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


def raw_read_problems(edges):
    """rlperf calls nothing below api/ but the raw-read interface."""
    bad = []
    for src, dsts in sorted(edges.items()):
        if not RAW_READ.match(src):
            continue
        for dst in sorted(dsts):
            if folder(dst) in ("engine", "common", "planner") and dst != RAW_READ_SOURCE:
                bad.append(f"{src} calls into {dst} (rlperf: engine/raw.h only)")
    return bad


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
                    if RAW_READ.match(rel) and name in RAW_READ_HEADERS:
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


def exec_include_problems(top):
    """The execution layer sits above the planner and the engine: no file
    of planner/ or engine/ includes one of exec/."""
    bad = []
    for fold in ("planner", "engine"):
        for path in sorted(glob.glob(os.path.join(top, fold, "*.[ch]"))):
            rel = os.path.relpath(path, top)
            with open(path, errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if m and re.match(r"(\.\./)?exec/", m.group(1)):
                        bad.append(f"{rel}:{n} includes {m.group(1)}")
    return bad


def report():
    failed = 0
    for name, problems in results:
        if problems is None:
            print(f"skip {name}: no object files (run make first)")
        elif problems:
            failed += 1
            print(f"FAIL {name}")
            for p in problems:
                print(f"    {p}")
        else:
            print(f"ok   {name}")
    skipped = sum(1 for _, p in results if p is None)
    print(f"{len(results) - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


# The scratch tree of the self-test: a clean house, then one planted
# circle (planner/a.c and planner/b.c include each other's header) and two
# up-floor includes (common/ into api/, engine/ into a sink).
CLEAN_TREE = {
    "api/ringload.h": '#include "../common/ringload_types.h"\n',
    "common/ringload_types.h": "",
    "common/common.h": '#include "ringload_types.h"\n',
    "planner/a.h": '#include "common.h"\n',
    "planner/a.c": '#include "a.h"\n',
    "planner/b.h": "",
    "planner/b.c": '#include "b.h"\n#include "a.h"\n',
    "engine/sink.h": '#include "common.h"\n',
    "sink/host.h": '#include "../engine/sink.h"\n',
    "sink/host.c": '#include "host.h"\n',
    "exec/pass.c": '#include "../planner/a.h"\n#include "../engine/sink.h"\n',
    "api/load.c": '#include "ringload.h"\n#include "../sink/host.h"\n',
}
PLANTED = {
    "planner/a.c": '#include "a.h"\n#include "b.h"\n',
    "common/common.h": '#include "ringload_types.h"\n#include "../api/ringload.h"\n',
    "engine/worker.c": '#include "sink.h"\n#include "../sink/host.h"\n',
}


def scratch_problems(files):
    with tempfile.TemporaryDirectory() as top:
        for rel, text in files.items():
            os.makedirs(os.path.join(top, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(top, rel), "w") as f:
                f.write(text)
        incs = include_graph(top)
        return include_layer_problems(incs), strongly_connected(unit_graph(incs, {}))


def self_test():
    """The source checks find what is planted in a scratch tree (and
    nothing in a clean one), so that a check which cannot fail fails here."""
    ups, circles = scratch_problems(CLEAN_TREE)
    check("self_test_a_clean_tree_passes", ups + [" <-> ".join(c) for c in circles])
    ups, circles = scratch_problems({**CLEAN_TREE, **PLANTED})
    want = ["planner/a <-> planner/b"]
    got = [" <-> ".join(c) for c in circles]
    check("self_test_finds_a_planted_circle",
          [] if got == want else [f"found {got or 'no circle'}, planted {want}"])
    want = ["common/common.h:2 includes api/ringload.h (common/ may use nothing)",
            "engine/worker.c:2 includes sink/host.h (engine/ may use common)"]
    check("self_test_finds_planted_up_floor_includes",
          [] if ups == want else [f"found {ups or 'nothing'}, planted {want}"])


def main():
    self_test()
    if sys.argv[1:] == ["--self-test"]:
        return report()
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("RL_BUILD", "build")
    top = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    incs = include_graph(top)
    check("includes_only_go_down", include_layer_problems(incs))
    check("clients_use_the_public_header", include_problems(top))
    check("engine_includes_no_sink", engine_include_problems(top))
    check("planner_engine_include_no_exec", exec_include_problems(top))
    if not glob.glob(os.path.join(build, "obj", "*")):
        check("layers_call_only_down", None)
        check("no_circles_between_files", None)
        return report()
    compile_problems = []
    with tempfile.TemporaryDirectory() as tmp:
        calls = symbol_graph(build, client_objects(top, tmp, compile_problems))
    check("layers_call_only_down", compile_problems + layer_problems(calls))
    check("no_circles_between_files", circle_problems(incs, calls))
    check("rlperf_reads_through_engine_raw", raw_read_problems(calls))
    return report()


if __name__ == "__main__":
    sys.exit(main())
