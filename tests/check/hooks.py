#!/usr/bin/python3
"""hooks.py - the engine's test hooks (engine/hooks.c, the fault injector
engine/be_fault.c) live in the test archive only: the release libraries
neither define, export nor call any of them (so no hook check sits on a
release submit path), and the test archive has them all (so that this
check looks for names that exist). Reads the symbols with nm. Prints one
line per check and "N passed, N failed, 0 skipped".

    tests/check/hooks.py [BUILD]      (default: build)
"""
import os
import re
import subprocess
import sys

# Every symbol of the hooks: the setters, the checks the backends call,
# the injector's ops table and its functions.
HOOK = re.compile(r"^(eng_set_\w+|eng_hooks?_\w+|eng_fault_ops|fault_(setup|queue|commit|"
                  r"reap|wake|teardown))$")
# What the test archive must hold: one of each kind above.
EXPECTED = ("eng_set_fault", "eng_set_uring_submit_eagain", "eng_hook_uring_eagain",
            "eng_hook_aio_refuse", "eng_fault_ops")


def symbols(path, *flags):
    """Every symbol nm lists (defined or used), by name."""
    out = subprocess.run(["nm", *flags, path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"nm {' '.join(flags)} {path}: {out.stderr.strip()}")
    names = set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            names.add(parts[-1])
    return names


def hook_symbols(path, *flags):
    return sorted(n for n in symbols(path, *flags) if HOOK.match(n))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("RL_BUILD", "build")
    release = [os.path.join(build, "libringload.a"), os.path.join(build, "libringload.so.0")]
    test = os.path.join(build, "libringload_test.a")
    missing = [p for p in release + [test] if not os.path.exists(p)]
    if missing:
        print(f"skip hooks: {', '.join(missing)} not built (make all {test})")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    problems = []
    for path in release:
        found = hook_symbols(path)
        if path.endswith(".so.0"):
            found += hook_symbols(path, "-D")
        problems += [f"{path}: {name}" for name in sorted(set(found))]
    have = symbols(test)
    failed = report("release_libraries_have_no_test_hooks", problems)
    failed += report("test_archive_has_the_test_hooks",
                     [f"{test}: no {name}" for name in EXPECTED if name not in have])
    print(f"{2 - failed} passed, {failed} failed, 0 skipped")
    return 1 if failed else 0


def report(name, problems):
    """Prints the check's line (and its problems); 1 when it failed."""
    print(f"{'FAIL' if problems else 'ok  '} {name}")
    for p in problems:
        print(f"    {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
