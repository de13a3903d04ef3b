#!/usr/bin/env python3
"""mutant.py - reads the mutant list for run.sh and applies one mutant.

  mutant.py parse LIST          records: idx, file, search, replace, tests, reason
  mutant.py show LIST IDX       a one-line description of mutant IDX
  mutant.py apply LIST IDX FILE writes FILE with mutant IDX applied; fails
                                unless the search text occurs exactly once
  mutant.py check LIST ROOT     checks every search text against the tree at
                                ROOT (in its file exactly once)

The list format is described at the top of tests/mutants/mutants.txt.
"""
import sys

DEFAULT_TESTS = {
    "planner/": "test_plan test_spec test_reader test_assign test_api "
                "replay_plan replay_spec replay_ckpt replay_header",
    "api/": "test_api test_spec test_reader test_plan",
    "common/": "test_common test_plan",
    "engine/": "test_engine test_load",
}


def unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s) and s[i + 1] in "nt|\\":
            out.append({"n": "\n", "t": "\t", "|": "|", "\\": "\\"}[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def mutants(path):
    """(line text, file, search, replace, tests, reason) per mutant."""
    out = []
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in line.replace("\\|", "\0").split(" | ")]
        fields = [f.replace("\0", "\\|") for f in fields]
        if len(fields) < 3:
            sys.exit("%s:%d: want 'file | search | replacement [| tests] [| "
                     "equivalent: reason]'" % (path, n))
        file, search, repl = fields[0], unescape(fields[1]), unescape(fields[2])
        tests, reason = "", ""
        for f in fields[3:]:
            if f.startswith("equivalent:"):
                reason = f[len("equivalent:"):].strip()
            else:
                tests = f
        if not tests:
            tests = next((t for d, t in DEFAULT_TESTS.items() if file.startswith(d)), "")
        if not tests and not reason:
            sys.exit("%s:%d: no tests named and no default for %s" % (path, n, file))
        out.append(("%s:%d %s" % (file, n, line.split(" | ")[1].strip()[:60]),
                    file, search, repl, tests, reason))
    return out


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    ms = mutants(path)
    if cmd == "parse":
        for i, m in enumerate(ms):
            print("\x1f".join([str(i), m[1], "-", "-", m[4], m[5]]))
    elif cmd == "show":
        print(ms[int(sys.argv[3])][0])
    elif cmd == "apply":
        desc, _, search, repl, _, _ = ms[int(sys.argv[3])]
        target = sys.argv[4]
        text = open(target, encoding="utf-8").read()
        count = text.count(search)
        if count != 1:
            print("ERROR    %s: search text found %d times (want exactly 1)" % (desc, count))
            sys.exit(1)
        open(target, "w", encoding="utf-8").write(text.replace(search, repl))
    elif cmd == "check":
        bad = 0
        for desc, file, search, _, _, _ in ms:
            count = open("%s/%s" % (sys.argv[3], file), encoding="utf-8").read().count(search)
            if count != 1:
                print("%s: search text found %d times (want exactly 1)" % (desc, count))
                bad += 1
        print("%d mutants, %d bad" % (len(ms), bad))
        sys.exit(1 if bad else 0)


main()
