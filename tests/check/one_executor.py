#!/usr/bin/python3
"""one_executor.py - one executor runs every load (issue 30): libringload_mpi
(mpi/) and the torch.distributed path (python/ringload/_dist.py) hand their
transfers to the library's read-once executor through a transport
(rl_loader_set_transport) and call none of the public primitives a
hand-written executor is made of: a batch's read plan
(rl_plan_build_batch), a transfer's copies (rl_plan_transfer_copy) and the
copy rule (rl_copy_runs). Names in comments and strings do not count;
Python's ctypes calls are attribute or getattr uses. Prints one line per
check and "N passed, N failed, 0 skipped".

    tests/check/one_executor.py [ROOT]   (default: the tree above tests/)
"""
import ast
import glob
import os
import re
import sys

PRIMITIVES = ("rl_plan_build_batch", "rl_plan_transfer_copy", "rl_copy_runs")
C_SOURCES = ("mpi/*.c", "mpi/*.h")
PY_SOURCES = ("python/ringload/_dist.py",)
# Comments and string or character literals, removed before C is searched.
C_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
WORD = re.compile(r"\b(" + "|".join(PRIMITIVES) + r")\b")


def c_uses(path):
    """(line, name) for every primitive the C file names in code."""
    text = open(path, encoding="utf-8").read()
    code = C_NOISE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return [(code.count("\n", 0, m.start()) + 1, m.group(1)) for m in WORD.finditer(code)]


def py_uses(path):
    """(line, name) for every primitive the Python file reaches: a name, an
    attribute (lib.rl_copy_runs) or a getattr/string key equal to it."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        if name in PRIMITIVES:
            found.append((node.lineno, name))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    checks = [("mpi_runs_the_library_executor", C_SOURCES, c_uses),
              ("dist_py_runs_the_library_executor", PY_SOURCES, py_uses)]
    failed = 0
    for name, patterns, uses in checks:
        files = sorted(f for p in patterns for f in glob.glob(os.path.join(root, p)))
        problems = [f"{os.path.relpath(f, root)}:{line}: calls {prim}, a primitive of a "
                    f"hand-written executor (run transfers through rl_loader_set_transport)"
                    for f in files for line, prim in uses(f)]
        if not files:
            problems = [f"no file matches {', '.join(patterns)} under {root}"]
        print(f"{'FAIL' if problems else 'ok  '} {name}")
        for p in problems:
            print(f"    {p}")
        failed += bool(problems)
    print(f"{len(checks) - failed} passed, {failed} failed, 0 skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
