#!/usr/bin/env python3
"""callgraph.py [-v] OBJ... - which object file calls which, read with nm.

An edge A -> B when A uses a global symbol that B defines. Prints every
circle (objects that reach each other, directly or around a loop) as
"circle: a.o -> b.o -> a.o" and exits 1 when there is one; -v also prints
the edges. Exits 0 on a graph that runs one way.
"""
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "U":
            used.add(f[1])
        elif len(f) == 3 and f[1] in "TDBRGSVW":
            defined.add(f[2])
    return defined, used


def circles(nodes, edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main(argv):
    verbose = "-v" in argv
    objs = [a for a in argv if a != "-v"]
    if not objs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    table = {o: symbols(o) for o in objs}
    owner = {}
    for o, (defined, _) in table.items():
        for s in defined:
            owner.setdefault(s, o)
    edges = {o: set() for o in objs}
    for o, (_, used) in table.items():
        for s in used:
            if s in owner and owner[s] != o:
                edges[o].add(owner[s])
    if verbose:
        for o in objs:
            for t in sorted(edges[o]):
                print("%s -> %s" % (os.path.basename(o), os.path.basename(t)))
    found = circles(objs, edges)
    for comp in found:
        names = [os.path.basename(c) for c in comp]
        print("circle: " + " <-> ".join(names))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
