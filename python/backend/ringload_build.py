"""The PEP 517 backend of pyproject.toml: builds libringload.so.0 with the
Makefile and writes a wheel of python/ringload with the library inside
(ringload/libringload.so.0, which _lib.py loads first after RINGLOAD_LIB).

In-tree and standard library only (zipfile, hashlib, tomllib): pip needs
nothing from PyPI to build it. The version is api/ringload.h's; the
metadata is pyproject.toml's [project] table.
"""
import base64
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "python", "ringload")
SONAME = "libringload.so.0"


def version():
    """Returns "MAJOR.MINOR.PATCH" of api/ringload.h."""
    with open(os.path.join(ROOT, "api", "ringload.h")) as f:
        text = f.read()
    parts = [re.search(rf"^#define RINGLOAD_VERSION_{p} (\d+)$", text, re.M)
             for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise RuntimeError("api/ringload.h: no RINGLOAD_VERSION_MAJOR/MINOR/PATCH")
    return ".".join(m.group(1) for m in parts)


def _project():
    import tomllib  # Python 3.11; older Pythons build with pip's tomli
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _metadata(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {version()}", f"Summary: {project['description']}",
             f"License: {project['license']}",
             f"Requires-Python: {project['requires-python']}"]
    lines += [f"Requires-Dist: {d}" for d in project["dependencies"]]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    return "\n".join(lines) + "\n"


def _tag():
    """py3-none-<platform>: pure Python, with this machine's library."""
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"py3-none-{plat}"


def _build_library():
    """Runs make for the shared library; returns its path."""
    build = os.environ.get("BUILD", "build")
    target = os.path.join(build, "libringload.so")
    r = subprocess.run(["make", "-C", ROOT, "--no-print-directory", target],
                       stdout=sys.stderr)
    if r.returncode:
        raise RuntimeError(f"make {target} failed (exit {r.returncode})")
    return os.path.join(ROOT, build, SONAME)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{arcname},sha256={digest.decode()},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    """Nothing: the backend uses the standard library and make."""
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds the library, writes the wheel into wheel_directory and
    returns its file name."""
    library = _build_library()
    project = _project()
    name, ver = project["name"], version()
    dist_info = f"{name}-{ver}.dist-info"
    files = [(f"ringload/{f}", os.path.join(PACKAGE, f))
             for f in sorted(os.listdir(PACKAGE)) if f.endswith(".py")]
    files.append((f"ringload/{SONAME}", library))
    meta = {f"{dist_info}/METADATA": _metadata(project),
            f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: ringload_build\n"
                                  f"Root-Is-Purelib: false\nTag: {_tag()}\n"}
    wheel = f"{name}-{ver}-{_tag()}.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arcname, path in files:
            with open(path, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arcname.endswith(SONAME) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            record.append(_record_line(arcname, data))
        for arcname, text in meta.items():
            z.writestr(arcname, text)
            record.append(_record_line(arcname, text.encode()))
        record.append(f"{dist_info}/RECORD,,")
        z.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel
