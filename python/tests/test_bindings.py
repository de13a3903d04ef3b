"""The ctypes bindings against the C header: structure layouts and enum
values from the compiler (build/tests/py_layout), dtype names from the
library, the functions bound, library lookup, docstrings, make install."""
import ctypes
import inspect
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, build_dir

import ringload
from ringload import _lib


def _layout():
    prog = os.path.join(build_dir(), "tests", "py_layout")
    if not os.access(prog, os.X_OK):
        pytest.fail(f"{prog} is not built (make builds it for make test)")
    structs, fields, consts = {}, {}, {}
    for line in subprocess.run([prog], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        kind, *rest = line.split()
        if kind == "struct":
            structs[rest[0]] = int(rest[1])
        elif kind == "field":
            fields.setdefault(rest[0], {})[rest[1]] = (int(rest[2]), int(rest[3]))
        else:
            consts[rest[0]] = int(rest[1])
    return structs, fields, consts


def test_every_structure_matches_c_offsetof_and_sizeof():
    structs, fields, _ = _layout()
    assert set(structs) == set(_lib.STRUCTURES)
    for cname, cls in _lib.STRUCTURES.items():
        assert ctypes.sizeof(cls) == structs[cname], cname
        py = {name: (getattr(cls, name).offset, getattr(cls, name).size)
              for name, _ in cls._fields_}
        assert py == fields[cname], cname


def _header_structs():
    """{name: [member, ...]} of every `typedef struct rl_x { ... } rl_x;` of
    api/ringload.h and the ringload_types.h it re-exports, read from the
    headers themselves: a member added there
    fails the test below until py_layout (python/tests/struct_layout.c) prints it
    and the ctypes mirror has it."""
    import re
    src = ""
    for path in (("api", "ringload.h"), ("common", "ringload_types.h")):
        with open(os.path.join(ROOT, *path)) as f:
            src += re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    out = {}
    for m in re.finditer(r"typedef struct (rl_\w+) \{(.*?)\} \1;", src, flags=re.S):
        members = []
        for decl in m.group(2).split(";"):
            decl = " ".join(decl.split())
            fn = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)  # a function pointer
            if fn:
                members.append(fn.group(1))
            elif decl:
                decl = re.sub(r"\[[^\]]*\]", "", decl)
                members += [re.findall(r"\w+", d)[-1] for d in decl.split(",")]
        out[m.group(1)] = members
    return out


def test_every_field_of_every_header_structure_is_mirrored():
    """Field by field, from the header: every public structure is printed
    by py_layout and mirrored in _lib.py, with every member in the
    header's order (the offsets and sizes: the test above)."""
    structs, fields, _ = _layout()
    header = _header_structs()
    assert len(header) >= 10 and "rl_load_stats" in header  # the parser finds them
    assert set(header) == set(structs), "structures of the header vs py_layout"
    assert set(header) == set(_lib.STRUCTURES), "structures of the header vs _lib.py"
    for cname, members in header.items():
        assert sorted(fields[cname]) == sorted(members), (
            f"{cname}: python/tests/struct_layout.c prints {sorted(fields[cname])}, "
            f"the header has {members}")
        mirror = [name for name, _ in _lib.STRUCTURES[cname]._fields_]
        assert mirror == members, f"{cname}: _lib.py has {mirror}, the header {members}"


def test_growing_structures_are_size_tagged_with_room():
    """One convention for structures that grow: `size` first (set by the
    caller) and `reserved` room last; no getter takes a size argument
    beside such a struct, and no frozen twin (rl_load_stats_ex) is left."""
    header = _header_structs()
    tagged = {n for n, m in header.items() if m[0] == "size"}
    assert {"rl_load_stats", "rl_file_stats", "rl_plan_xstats", "rl_sums_entry"} <= tagged
    for name in tagged:
        assert header[name][-1] == "reserved", name
    assert not any(n.endswith("_ex") for n in header)
    for name, (_, argtypes) in _lib._PROTOTYPES.items():
        structs = [a for a in argtypes if getattr(getattr(a, "_type_", None), "_fields_", None)
                   and a._type_._fields_[0][0] == "size"]
        assert not (structs and argtypes[-1] is ctypes.c_size_t), name


def test_enum_values_match_the_header():
    _, _, consts = _layout()
    assert consts["sizeof_enum"] == ctypes.sizeof(ctypes.c_int)
    for name, value in _lib.ERROR_CODES.items():
        assert consts[name] == value, name
    assert {k for k in consts if k.startswith("RL_E_")} == set(_lib.ERROR_CODES)
    for name, value in _lib.PLAN_PARAMS.items():
        assert consts["RL_PLAN_" + name.upper()] == value, name
    for name, value in _lib.LOADER_PARAMS.items():
        assert consts["RL_OPT_" + name.upper()] == value, name
    for name, value in _lib.BACKENDS.items():
        assert consts["RL_BACKEND_" + name.upper()] == value, name
    assert consts["RL_STAGING_CALLER"] == _lib.RL_STAGING_CALLER
    assert consts["RL_STAGING_LIBRARY"] == _lib.RL_STAGING_LIBRARY
    assert consts["RL_STAGING_STREAM"] == _lib.RL_STAGING_STREAM
    assert consts["RL_SHA256_PARTIAL"] == _lib.RL_SHA256_PARTIAL
    assert consts["RL_SHA256_STREAMED"] == _lib.RL_SHA256_STREAMED
    assert {k: v for k, v in consts.items() if k.startswith("RL_FALLBACK_")} == \
        {"RL_FALLBACK_" + k.upper(): v for k, v in _lib.FALLBACKS.items()}
    assert consts["RL_MAX_DIMS"] == _lib.RL_MAX_DIMS
    assert consts["RL_TOTAL"] == _lib.RL_TOTAL
    assert consts["RL_DTYPE_COUNT"] == len(_lib.DTYPES)


def test_dtype_names_match_the_library():
    for i, name in enumerate(_lib.DTYPES):
        assert _lib.text(_lib.rl_dtype_name(i)) == name
        assert _lib.rl_dtype_from_name(name.encode()) == i


def _exports():
    path = ringload.library_path()
    if not shutil.which("nm"):
        pytest.skip("needs nm (binutils)")
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1].split("@")[0] for line in out.splitlines()
            if line.split()[-2] in ("T", "W")}


def test_copy_runs_gives_the_strided_rule_through_ctypes():
    seen = []

    def run(arg, src, dst, length):
        seen.append((src, dst, length))
        return 0

    fn = _lib.COPY_RUN_FN(run)
    c = _lib.CopyInfo(src=100, len=8, count=3, src_stride=32, dst=1000)
    assert _lib.rl_copy_runs(ctypes.byref(c), fn, None) == 0
    assert seen == [(100, 1000, 8), (132, 1008, 8), (164, 1016, 8)]


def test_every_bound_function_is_exported():
    missing = set(_lib.BOUND) - _exports()
    assert not missing - set(_lib._OPTIONAL), missing


def test_every_exported_function_is_bound():
    unbound = sorted(_exports() - set(_lib.BOUND))
    assert not unbound, ("exported but not bound in python/ringload/_lib.py: " +
                         ", ".join(unbound))


def _header_enum(prefix):
    """{NAME: value} of every `PREFIX... = value` enumerator of api/ringload.h
    and the ringload_types.h it re-exports (read from the headers themselves,
    so that a new value fails here until _lib.py has it)."""
    import re
    src = ""
    for path in (("api", "ringload.h"), ("common", "ringload_types.h")):
        with open(os.path.join(ROOT, *path)) as f:
            src += f.read()
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"\b(" + prefix + r"\w+)\s*=\s*(-?\d+)\s*,", src)}


def test_error_codes_and_params_are_every_one_of_the_header():
    assert _header_enum("RL_E_") == _lib.ERROR_CODES
    assert _header_enum("RL_PLAN_") == {"RL_PLAN_" + k.upper(): v
                                        for k, v in _lib.PLAN_PARAMS.items()}
    assert _header_enum("RL_OPT_") == {"RL_OPT_" + k.upper(): v
                                       for k, v in _lib.LOADER_PARAMS.items()}


def test_device_kinds_come_from_the_library():
    """_lib.DEVICE_KINDS is the library's registry (rl_device_kind_at), as
    the CLI's --device reads it: the release library has CUDA alone."""
    assert _lib.DEVICE_KINDS == ("cuda",)
    assert _lib.rl_device_kind_at(1) is None


def test_the_librarys_name_table_holds_every_constant_of_the_header():
    """Python's constants come from the library (rl_name_get): the table
    must hold every RL_ constant of the headers (enumerators and #defines,
    but backends: their own table, and dtypes: rl_dtype_name) with the
    header's value, and rl_error_name every RL_E_ code."""
    import re
    src = ""
    for path in (("api", "ringload.h"), ("common", "ringload_types.h")):
        with open(os.path.join(ROOT, *path)) as f:
            src += f.read()
    want = _header_enum("RL_")
    for m in re.finditer(r"^#define (RL_\w+)\s+\(?(-?\d+)u?( << \d+)?\)?\s*(/\*.*)?$",
                         src, re.M):
        want[m.group(1)] = int(m.group(2)) << int((m.group(3) or "<< 0")[3:])
    want = {k: v for k, v in want.items()
            if not k.startswith(("RL_BACKEND_", "RL_DTYPE_")) or k == "RL_DTYPE_COUNT"}
    want["RL_DTYPE_COUNT"] = len(_lib.DTYPES)
    assert {k: v for k, v in _lib.NAMES.items()} == want
    for name, code in _lib.ERROR_CODES.items():
        assert _lib.rl_error_name(code) == name.encode()
    assert _lib.rl_error_name(0) == b"RL_OK"
    assert _lib.rl_error_name(-2) is None and _lib.rl_error_name(5) is None
    assert ringload.Error(-2).code_name == "ENOENT"


def _public_callables():
    import ringload.numpy
    import ringload.torch
    for mod in (ringload, ringload.numpy, ringload.torch):
        for name in getattr(mod, "__all__", None) or dir(mod):
            obj = getattr(mod, name)
            if name.startswith("_") or inspect.ismodule(obj):
                continue
            if getattr(obj, "__module__", "").startswith("ringload") and \
                    callable(obj):
                yield f"{mod.__name__}.{name}", obj
                if inspect.isclass(obj):
                    for mname, m in vars(obj).items():
                        if callable(m) and (not mname.startswith("_") or
                                            mname in ("__getitem__",
                                                      "__enter__", "__exit__")):
                            yield f"{mod.__name__}.{name}.{mname}", m


def test_every_public_function_has_a_docstring(torch):
    undocumented = [n for n, obj in _public_callables()
                    if not (obj.__doc__ or "").strip()]
    names = [n for n, _ in _public_callables()]
    assert "ringload.safe_open.get_slice" in names  # the walk reaches methods
    assert not undocumented, undocumented


def _python(code, env=None, cwd="/"):
    """Runs code in a fresh /usr/bin/python3 (RL_PYTHON); returns stdout."""
    r = subprocess.run([os.environ.get("RL_PYTHON", sys.executable), "-c", code],
                       capture_output=True, text=True, env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _env(**changes):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RINGLOAD_LIB", "PYTHONPATH")}
    env.update({k: v for k, v in changes.items() if v is not None})
    return env


def test_import_ringload_imports_neither_torch_nor_cuda():
    out = _python("import sys, ringload, ringload.numpy; "
                  "print(sorted(m for m in sys.modules "
                  "if m.split('.')[0] in ('torch', 'jax')))",
                  _env(PYTHONPATH=os.path.join(ROOT, "python"),
                       RINGLOAD_LIB=os.environ.get("RINGLOAD_LIB")))
    assert out == "[]"


def test_library_from_RINGLOAD_LIB_first():
    so = os.path.join(build_dir(), "libringload.so.0")
    out = _python("import ringload; print(ringload.library_path())",
                  _env(PYTHONPATH=os.path.join(ROOT, "python"), RINGLOAD_LIB=so))
    assert out == os.path.realpath(so)
    r = subprocess.run([os.environ.get("RL_PYTHON", sys.executable), "-c",
                        "import ringload"], capture_output=True, text=True,
                       env=_env(PYTHONPATH=os.path.join(ROOT, "python"),
                                RINGLOAD_LIB="/nonexistent/libringload.so.0"))
    assert r.returncode != 0
    assert "/nonexistent/libringload.so.0" in r.stderr
    assert "RINGLOAD_LIB" in r.stderr


def test_library_next_to_the_package_from_the_build_tree():
    link = os.path.join(ROOT, "python", "ringload", _lib.SONAME)
    if not os.path.exists(link):
        pytest.skip(f"no {link}: make (not a sanitizer build) links it")
    out = _python("import ringload; print(ringload.library_path())",
                  _env(PYTHONPATH=os.path.join(ROOT, "python")))
    assert out == os.path.realpath(link)


def test_library_by_soname_when_not_next_to_the_package(tmp_path):
    shutil.copytree(os.path.join(ROOT, "python", "ringload"),
                    tmp_path / "ringload",
                    ignore=shutil.ignore_patterns(_lib.SONAME, "__pycache__"))
    out = _python("import ringload; print(ringload.library_path())",
                  _env(PYTHONPATH=str(tmp_path), LD_LIBRARY_PATH=build_dir()))
    assert out == os.path.realpath(os.path.join(build_dir(), _lib.SONAME))


def test_make_install_into_a_temporary_prefix(tmp_path, small_ckpt):
    prefix = tmp_path / "prefix"
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "RINGLOAD_LIB",
                        "PYTHONPATH")}
    make_env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}  # sanitizers'
    r = subprocess.run(["make", "-C", ROOT, "--no-print-directory", "install",
                        f"PREFIX={prefix}", f"BUILD={build_dir()}",
                        f"SAN={os.environ.get('RL_SAN', '')}"],
                       capture_output=True, text=True, env=make_env)
    assert r.returncode == 0, r.stdout + r.stderr
    pydir = _make_pydir(prefix)
    assert pydir.startswith(f"{prefix}/lib/python3.")
    ref = small_ckpt
    out = _python("import ringload, ringload.numpy as n; "
                  "print(ringload.__file__); print(ringload.library_path()); "
                  f"print(ringload.load({ref!r}, framework='np')[0]['vec'].shape)",
                  dict(env, PYTHONPATH=pydir))
    file, lib, shape = out.splitlines()
    assert file == os.path.join(pydir, "ringload", "__init__.py")
    assert lib == str(prefix / "lib" / "libringload.so.0")
    assert shape == "(13,)"


def _make_pydir(prefix):
    """The Makefile's PYDIR for PREFIX=prefix."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MAKE") and k != "LD_PRELOAD"}  # sanitizers'
    return subprocess.run(["make", "-s", "-C", ROOT, "--no-print-directory",
                           "print-pydir", f"PREFIX={prefix}"], capture_output=True,
                          text=True, check=True, env=env).stdout.strip()


@pytest.mark.parametrize("prefix", ["/usr/local", "/usr"])
def test_make_install_puts_the_package_where_debians_python_looks(prefix):
    pydir = _make_pydir(prefix)
    path = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.path)"],
                          capture_output=True, text=True, check=True).stdout
    assert pydir.startswith(prefix + "/")
    assert repr(pydir) in path, f"{pydir} is not on /usr/bin/python3's sys.path"
