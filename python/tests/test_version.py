"""One version everywhere: api/ringload.h's three numbers, as the library,
ringload --version, rlperf --version, ringload.__version__, the wheel's
metadata (python/backend) and the Makefile (ringload.pc) give them,
CHANGELOG.md's latest entry, the man pages' headers, the newest node of
the symbol-version script and the library's soname (0.x: .so.0)."""
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


def _man_versions():
    """{page: version} of each man page's .TH line ("ringload 1.2.3")."""
    out = {}
    for page in sorted(os.listdir(os.path.join(ROOT, "man"))):
        with open(os.path.join(ROOT, "man", page)) as f:
            th = next(line for line in f if line.startswith(".TH "))
        m = re.search(r'"ringload (\d+\.\d+(?:\.\d+)?)"', th)
        out[f"man/{page}"] = m.group(1) if m else th.strip()
    return out


def _soname():
    out = subprocess.run(["readelf", "-d", os.path.join(build_dir(), "libringload.so.0")],
                         capture_output=True, text=True, check=True).stdout
    return re.search(r"\(SONAME\)\s+Library soname: \[(.*)\]", out).group(1)


def _newest_map_node():
    with open(os.path.join(ROOT, "api", "ringload.map")) as f:
        return re.findall(r"^RINGLOAD_(\d+\.\d+) \{", f.read(), re.M)[-1]


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
    assert _man_versions() == dict.fromkeys(_man_versions(), version)
    major, minor, patch = map(int, version.split("."))
    assert ringload._lib.rl_version_number() == major * 10000 + minor * 100 + patch
    assert _newest_map_node() == f"{major}.{minor}", "api/ringload.map's newest node"
    # the soname names the ABI: 0 throughout 0.x (CHANGELOG.md), then the major
    assert _soname() == f"libringload.so.{major}" == ringload._lib.SONAME
