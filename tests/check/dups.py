#!/usr/bin/python3
"""dups.py - no block of six or more lines written twice in library, tool,
perf, python or example code (tests are left out: near-copy test bodies are
a smaller sin than an indirection that hides what a test checks).

Lines are compared as tokens: comments and white space dropped, and lines
with nothing but punctuation, includes or a bare keyword passed over (jscpd's
"mild" mode does the same). Prints one line per check and the harness's
summary; exits 1 when a block repeats.

    tests/check/dups.py [MIN_LINES]     (default 6)
"""
import glob
import os
import re
import sys

FOLDERS = ("common", "planner", "engine", "api", "tools", "perf", "mpi", "python/ringload",
           "examples")
EXTS = (".c", ".h", ".sh", ".py")
TRIVIAL = re.compile(r"^([{}()\[\];,]*|#\s*include.*|(else|break|continue|return|default)"
                     r"\s*[;:]?\s*[{}]?|import \w+|from \S+ import .*|fi|done|esac|;;|then|do)$")


def strip_comments(text, ext):
    if ext in (".c", ".h"):
        # Keep line structure: replace a comment by as many newlines.
        text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
    else:
        text = re.sub(r"(^|\s)#[^\n]*", r"\1", text)
    return text


def significant_lines(path):
    ext = os.path.splitext(path)[1]
    with open(path, errors="replace") as f:
        text = strip_comments(f.read(), ext)
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        norm = " ".join(line.split())
        if norm and not TRIVIAL.match(norm):
            out.append((n, norm))
    return out


def main():
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    top = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    files = []
    for fold in FOLDERS:
        for ext in EXTS:
            files += glob.glob(os.path.join(top, fold, "**", "*" + ext), recursive=True)
    seen, pairs = {}, {}
    for path in sorted(set(files)):
        rel = os.path.relpath(path, top)
        lines = significant_lines(path)
        for i in range(len(lines) - k + 1):
            key = tuple(t for _, t in lines[i:i + k])
            here = (rel, lines[i][0], lines[i + k - 1][0])
            first = seen.setdefault(key, here)
            if first is here:
                continue
            if first[0] == rel and here[1] <= first[2]:
                continue  # overlapping windows of one run
            pk = (first[0], here[0])
            a, b = pairs.get(pk, (None, None))
            # Grow the previous pair of this file pair when the run goes on.
            if a and first[1] <= a[2] + 1 and here[1] <= b[2] + 1:
                pairs[pk] = ((a[0], a[1], max(a[2], first[2])), (b[0], b[1], max(b[2], here[2])))
            elif not a:
                pairs[pk] = (first, here)
            else:
                pairs[pk + (here[1],)] = (first, here)
    if pairs:
        print(f"FAIL no_repeated_blocks_of_{k}_lines")
        for a, b in sorted(pairs.values()):
            print(f"    {a[0]}:{a[1]}-{a[2]} ~ {b[0]}:{b[1]}-{b[2]}")
        print("0 passed, 1 failed, 0 skipped")
        return 1
    print(f"ok   no_repeated_blocks_of_{k}_lines ({len(set(files))} files)")
    print("1 passed, 0 failed, 0 skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
