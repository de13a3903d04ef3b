#!/usr/bin/python3
"""funclen.py - functions of the library, tools and perf fit on a screen:
at most MAX lines (default 80) from the opening brace to the closing one,
unless the comment above the function gives the reason, in a line that
starts with "Long:" (e.g. "Long: one switch over every option").

Functions are found the kernel-style way this tree is written: a definition
line at column 0 ending in ')' and a '{' alone at column 0 on the next line,
closed by a '}' alone at column 0. Prints one line per check and the
harness's summary.

    tests/check/funclen.py [MAX]
"""
import glob
import os
import re
import sys

FOLDERS = ("common", "planner", "engine", "api", "tools", "perf", "mpi", "examples")
DEF = re.compile(r"^[A-Za-z_][^;=(]*\b([A-Za-z_]\w*)\s*\([^;]*$")


def long_functions(path, limit):
    with open(path, errors="replace") as f:
        lines = f.read().split("\n")
    found = []
    i = 0
    while i < len(lines) - 1:
        m = DEF.match(lines[i])
        # A definition may wrap: its '{' is the first column-0 brace after it.
        j = i + 1
        while m and j < len(lines) and j - i < 6 and lines[j] != "{" and \
                not lines[j].rstrip().endswith(";"):
            j += 1
        if not m or j >= len(lines) or lines[j] != "{" or not lines[j - 1].rstrip().endswith(")"):
            i += 1
            continue
        k = j + 1
        while k < len(lines) and lines[k] != "}":
            k += 1
        body = k - j - 1
        above = " ".join(lines[max(0, i - 12):i])
        if body > limit and "Long:" not in above:
            found.append(f"{path}:{i + 1}: {m.group(1)} has {body} lines")
        i = k + 1
    return found


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 80
    top = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    problems = []
    for fold in FOLDERS:
        for path in sorted(glob.glob(os.path.join(top, fold, "**", "*.c"), recursive=True)):
            problems += long_functions(os.path.relpath(path, top), limit)
    if problems:
        print(f"FAIL functions_fit_in_{limit}_lines")
        for p in problems:
            print("    " + p)
        print("0 passed, 1 failed, 0 skipped")
        return 1
    print(f"ok   functions_fit_in_{limit}_lines")
    print("1 passed, 0 failed, 0 skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
