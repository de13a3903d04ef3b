"""One version everywhere: api/ringload.h's three numbers, as the library,
ringload --version, rlperf --version, ringload.__version__, the wheel's
metadata (python/backend) and the Makefile (ringload.pc) give them, and
CHANGELOG.md's latest entry."""
import os
import re
import subprocess
import sys

from conftest import ROOT, build_dir

import ringload


def _header_version():
    with open(os.path.join(ROOT, "api", "ringload.h")) as f:
        text = f.read()
    return ".".join(re.search(rf"^#define RINGLOAD_VERSION_{p} (\d+)$",
                              text, re.M).group(1)
                    for p in ("MAJOR", "MINOR", "PATCH"))


def _changelog_version():
    """The version of CHANGELOG.md's first entry ("## 1.2.3" or
    "## Unreleased (1.2.3)")."""
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        for line in f:
            if line.startswith("## "):
                m = re.match(r"## (?:Unreleased \()?(\d+\.\d+\.\d+)\)?\s*$", line)
                assert m, f"CHANGELOG.md: entry {line.strip()!r} names no version"
                return m.group(1)
    raise AssertionError("CHANGELOG.md has no entry")


def _tool_version(tool):
    out = subprocess.run([os.path.join(build_dir(), tool), "--version"],
                         capture_output=True, text=True, check=True).stdout
    return re.search(r"(\d+\.\d+\.\d+)", out).group(1)


def test_every_version_is_the_headers_and_the_changelogs():
    sys.path.insert(0, os.path.join(ROOT, "python", "backend"))
    try:
        import ringload_build
    finally:
        sys.path.pop(0)
    make = subprocess.run(["make", "-s", "-C", ROOT, "--no-print-directory",
                           "print-version"], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items()  # no
                               # sanitizer runtime (LD_PRELOAD) in make's tools
                               if not k.startswith("MAKE") and k != "LD_PRELOAD"}
                          ).stdout.strip()
    version = _header_version()
    assert {
        "CHANGELOG.md": _changelog_version(),
        "library": ringload.library_version(),
        "ringload.__version__": ringload.__version__,
        "ringload --version": _tool_version("ringload"),
        "rlperf --version": _tool_version("rlperf"),
        "wheel (python/backend)": ringload_build.version(),
        "Makefile (ringload.pc)": make,
    } == dict.fromkeys(["CHANGELOG.md", "library", "ringload.__version__",
                        "ringload --version", "rlperf --version",
                        "wheel (python/backend)", "Makefile (ringload.pc)"],
                       version)
    major, minor, patch = map(int, version.split("."))
    assert ringload._lib.rl_version_number() == major * 10000 + minor * 100 + patch
