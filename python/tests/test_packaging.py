"""pip wheel . / pip install . (pyproject.toml, python/backend): the wheel
carries libringload.so.0, and a fresh venv with only numpy imports ringload
and loads a file from another directory, without PYTHONPATH, RINGLOAD_LIB
or LD_LIBRARY_PATH. Offline: the build needs nothing from PyPI, and numpy
comes from the wheels make pydeps keeps in its venv (VENV/wheels)."""
import glob
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import stfile
from conftest import ROOT

import ringload

pytestmark = pytest.mark.venv

_SCRUB = ("PYTHONPATH", "RINGLOAD_LIB", "LD_LIBRARY_PATH", "LD_PRELOAD",
          "PYTHONHOME", "VIRTUAL_ENV")


def _env():
    """The environment without any way to the tree's package or library,
    nor the make of make test (its jobserver)."""
    return {k: v for k, v in os.environ.items()
            if k not in _SCRUB and not k.startswith("MAKE")}


def _run(args, cwd="/"):
    r = subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=_env())
    assert r.returncode == 0, f"{' '.join(map(str, args))}:\n{r.stdout}{r.stderr}"
    return r.stdout.strip()


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
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-index",
          "--no-deps", "--disable-pip-version-check", "-w", str(out), ROOT])
    (whl,) = glob.glob(str(out / "ringload-*.whl"))
    return whl


def _fresh_venv(path):
    _run(["/usr/bin/python3", "-m", "venv", str(path)])
    return str(path / "bin" / "python")


def _loads_from_another_directory(py, venv, cwd):
    ckpt = str(cwd / "m.safetensors")
    stfile.write(ckpt, {"mat": ("I16", (3, 5), np.arange(15, dtype="<i2").tobytes())})
    out = _run([py, "-c", "import ringload, ringload.numpy as n; "
                "print(ringload.library_path()); print(ringload.__version__); "
                f"print(n.load_file({ckpt!r})['mat'].sum())"], cwd=cwd)
    lib, version, total = out.splitlines()
    assert lib.startswith(str(venv) + "/lib/") and \
        lib.endswith("/site-packages/ringload/libringload.so.0"), lib
    assert version == ringload.__version__  # the tree's
    assert total == str(sum(range(15)))


def test_wheel_holds_the_package_and_the_library(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "ringload/libringload.so.0" in names
    assert "ringload/__init__.py" in names and "ringload/torch.py" in names
    meta = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = zipfile.ZipFile(wheel).read(meta[0]).decode()
    assert "Requires-Dist: numpy" in text
    assert os.path.basename(wheel).endswith("-py3-none-linux_x86_64.whl")


def test_wheel_installs_into_a_fresh_venv_with_only_numpy(wheel, numpy_wheels,
                                                        tmp_path):
    venv = tmp_path / "venv"
    py = _fresh_venv(venv)
    _run([py, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
          "--find-links", numpy_wheels, wheel])
    _loads_from_another_directory(py, venv, tmp_path)


def test_pip_install_of_the_source_tree(numpy_wheels, tmp_path):
    venv = tmp_path / "venv"
    py = _fresh_venv(venv)
    _run([py, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
          "--find-links", numpy_wheels, ROOT])
    _loads_from_another_directory(py, venv, tmp_path)
