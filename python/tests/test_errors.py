"""Errors: bad files raise the reference's verdict as the right Error
subclass with the C library's code and message (the CLI prints the same
message); spec, argument, framework, device and dtype errors."""
import errno
import json
import os
import pickle
import subprocess
import types

import numpy as np
import pytest

import oracle
import stfile
from conftest import build_dir

import ringload
import ringload.numpy as rnp
from ringload import _dtypes, _errors, _lib

VARIANT_CODE = {
    "HeaderTooSmall": "RL_E_HEADER_TOO_SMALL", "HeaderTooLarge": "RL_E_HEADER_TOO_LARGE",
    "InvalidHeaderLength": "RL_E_HEADER_LENGTH", "InvalidHeader": "RL_E_HEADER_UTF8",
    "InvalidHeaderDeserialization": "RL_E_HEADER_JSON",
    "InvalidOffset": "RL_E_INVALID_OFFSET", "ValidationOverflow": "RL_E_OVERFLOW",
    "MisalignedSlice": "RL_E_MISALIGNED", "TensorInvalidInfo": "RL_E_SIZE_MISMATCH",
}


def _cli(*args):
    """stderr of build/ringload ARGS (one line)."""
    r = subprocess.run([os.path.join(build_dir(), "ringload"), *args],
                       capture_output=True, text=True)
    assert r.returncode != 0
    return r.stderr.strip()


def _expected_code(variant, case):
    if variant == "MetadataIncompleteBuffer":
        return "RL_E_TRUNCATED" if "short" in case else "RL_E_INCOMPLETE"
    return VARIANT_CODE[variant]


def _header_cases(testdata):
    with open(os.path.join(testdata, "headers", "EXPECTED.json")) as f:
        exp = json.load(f)
    return [(case, verdict, os.path.join(testdata, "headers", case + ".safetensors"))
            for case, verdict in sorted(exp.items())]


def test_bad_headers_raise_header_error_with_the_c_code_and_message(testdata):
    n = 0
    for case, verdict, path in _header_cases(testdata):
        if not verdict.startswith("err "):
            continue
        for opener in (rnp.load_file, lambda p: ringload.safe_open(p, "np"),
                       lambda p: ringload.load(p, framework="np")):
            with pytest.raises(ringload.HeaderError) as e:
                opener(path)
            assert e.value.code_name == _expected_code(verdict[4:], case), case
            assert e.value.code == _lib.ERROR_CODES[e.value.code_name]
            assert path in str(e.value), case
        assert _cli("inspect", path) == \
            f"ringload inspect: {e.value.message} ({e.value.strerror})", case
        n += 1
    assert n >= 40


def test_accepted_headers_load_as_the_independent_reader_reads_them(testdata):
    for case, verdict, path in _header_cases(testdata):
        if not verdict.startswith("ok "):
            continue
        tensors, meta = stfile.read(path)
        if any(oracle.numpy_expect(d, s) and max(s, default=0) >= 1 << 63 or
               np.prod([x or 1 for x in s], dtype=object) * stfile.DTYPES[d][0] // 8
               >= 1 << 63 for d, s, _ in tensors.values()):
            with pytest.raises(ringload.ArgumentError) as e:
                rnp.load_file(path)
            assert e.value.code_name == "RL_E_TOO_LARGE", case
            continue
        got = rnp.load_file(path)
        assert len(got) == int(verdict[3:]) == len(tensors), case
        for name, (dtype, shape, data) in tensors.items():
            assert got[name].shape == shape and oracle.as_bytes(got[name]) == data
        with ringload.safe_open(path, "np") as f:
            assert f.metadata() == meta, case  # {} for an empty one


def test_missing_file_is_a_file_not_found_error_naming_it(tmp_path):
    path = str(tmp_path / "absent.safetensors")
    for fn in (rnp.load_file, lambda p: ringload.safe_open(p, "numpy")):
        with pytest.raises(FileNotFoundError) as e:
            fn(path)
        assert isinstance(e.value, ringload.SysError)
        assert e.value.errno == errno.ENOENT and e.value.code == -errno.ENOENT
        assert e.value.code_name == "ENOENT"
        assert path in str(e.value)
        assert e.value.strerror == os.strerror(errno.ENOENT)
        # the drop-ins in safetensors' words (its test_file_not_found)
        assert str(e.value) == f"No such file or directory: {path}"
    with pytest.raises(FileNotFoundError) as e:
        ringload.load(path)
    assert _cli("inspect", path) == f"ringload inspect: {e.value.message}"


def test_truncated_file_raises_before_reading(tmp_path):
    path = tmp_path / "t.safetensors"
    stfile.write(path, {"w": ("F32", (64,), bytes(256))})
    os.truncate(path, os.path.getsize(path) - 10)
    with pytest.raises(ringload.HeaderError) as e:
        rnp.load_file(path)
    assert e.value.code_name == "RL_E_TRUNCATED"
    assert _cli("inspect", str(path)) == \
        f"ringload inspect: {e.value.message} ({e.value.strerror})"


SPEC_ERRORS = [
    ({"mesh": {"shape": [2], "axes": ["m"]},
      "rules": [{"match": "w", "spec": ["x"]}]}, "RL_E_SPEC_AXIS"),
    ({"mesh": {"shape": [2], "axes": ["m"], "devices": [0]}}, "RL_E_SPEC_MESH"),
    ({"mesh": {"shape": [2], "axes": ["m"]},
      "rules": [{"match": "w(", "spec": ["m"]}]}, "RL_E_SPEC_REGEX"),
    ({"mesh": {"shape": [2], "axes": ["m"]},
      "rules": [{"match": "w", "spec": ["m", None, None]}]}, "RL_E_SPEC_RANK"),
    ({"rules": "no"}, "RL_E_SPEC"),
    ({"targets": [{"name": "", "source": "w"}]}, "RL_E_SPEC_TARGET"),
]


@pytest.mark.parametrize("spec,code", SPEC_ERRORS)
def test_bad_sharding_raises_spec_error_with_the_c_message(tmp_path, spec, code):
    path = tmp_path / "w.safetensors"
    stfile.write(path, {"w": ("F32", (4, 4), bytes(64))})
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    with pytest.raises(ringload.SpecError) as e:
        ringload.load(path, sharding=spec)
    assert e.value.code_name == code
    assert e.value.message in _cli("plan", str(path), "--sharding", str(spec_path))


def test_missing_tensor_in_spec_raises_tensor_not_found(tmp_path):
    path = tmp_path / "w.safetensors"
    stfile.write(path, {"w": ("F32", (4,), bytes(16))})
    with pytest.raises(ringload.TensorNotFoundError) as e:
        ringload.load(path, sharding={"tensors": ["nope"]})
    assert "nope" in str(e.value) and e.value.code_name == "RL_E_MISSING_TENSOR"
    with ringload.safe_open(path, "np") as f:
        with pytest.raises(ringload.TensorNotFoundError) as e:
            f.get_tensor("nope")
        with pytest.raises(ringload.TensorNotFoundError):
            f.get_slice("nope")
    assert str(e.value) == f"{path}: File does not contain tensor nope"  # safetensors'


def test_every_code_maps_to_its_group_class():
    groups = {"RL_E_HEADER": ringload.HeaderError, "RL_E_INVALID_OFFSET": ringload.HeaderError,
              "RL_E_OVERFLOW": ringload.HeaderError, "RL_E_MISALIGNED": ringload.HeaderError,
              "RL_E_SIZE_MISMATCH": ringload.HeaderError, "RL_E_INCOMPLETE": ringload.HeaderError,
              "RL_E_TRUNCATED": ringload.HeaderError, "RL_E_BAD_INDEX": ringload.CheckpointError,
              "RL_E_DUPLICATE_TENSOR": ringload.CheckpointError,
              "RL_E_MISSING_TENSOR": ringload.TensorNotFoundError,
              "RL_E_SPEC": ringload.SpecError, "RL_E_SHAPE_MISMATCH": ringload.SpecError,
              "RL_E_SUBBYTE_SPLIT": ringload.SpecError, "RL_E_DTYPE": ringload.SpecError,
              "RL_E_INVALID_ARG": ringload.ArgumentError, "RL_E_TOO_LARGE": ringload.ArgumentError,
              "RL_E_STATE": ringload.StateError, "RL_E_BACKEND": ringload.LoadError,
              "RL_E_CANCELED": ringload.CanceledError, "RL_E_STAGING": ringload.LoadError,
              "RL_E_RELEASE_TIMEOUT": ringload.LoadError, "RL_E_PIECE": ringload.LoadError,
              "RL_E_FILE_UNAVAILABLE": ringload.LoadError, "RL_E_MPI": ringload.LoadError,
              "RL_E_PEER": ringload.LoadError, "RL_E_CLUSTER_MISMATCH": ringload.LoadError,
              "RL_E_FILE_CHANGED": ringload.IntegrityError,
              "RL_E_CHECKSUM": ringload.IntegrityError, "RL_E_CUDA": ringload.LoadError}
    for name, code in _lib.ERROR_CODES.items():
        cls = next(c for prefix, c in groups.items() if name.startswith(prefix))
        e = _errors.error(code, "msg")
        assert type(e) is cls, name
        assert e.code == code and e.code_name == name and e.message == "msg"
        assert str(e) == "msg" or cls is ringload.HeaderError and \
            str(e).startswith("msg [safetensors: Error while deserializing header: ")
        assert e.strerror == _lib.text(_lib.rl_strerror(code))
        again = pickle.loads(pickle.dumps(e))
        assert type(again) is cls and again.code == code and str(again) == str(e)
    # codes a newer library appends land in their group
    assert type(_errors.error(-5067, "x")) is ringload.HeaderError
    assert type(_errors.error(-5085, "x")) is ringload.LoadError
    assert type(_errors.error(-errno.EIO, "x")) is ringload.SysError
    assert isinstance(_errors.error(-errno.EACCES), PermissionError)
    assert str(_errors.error(-errno.EIO)) == os.strerror(errno.EIO)


@pytest.mark.parametrize("framework", ["tf", "tensorflow", "jax", "flax", "mlx",
                                       "", "PT", None, 3])
def test_unsupported_framework_is_a_clear_error(small_ckpt, framework):
    path = small_ckpt
    with pytest.raises(ringload.FrameworkError) as e:
        ringload.load(path, framework=framework)
    assert repr(framework) in str(e.value) and "pt, torch, pytorch, np, numpy" in str(e.value)
    if isinstance(framework, str):
        with pytest.raises(ringload.FrameworkError) as e:
            ringload.safe_open(path, framework)
        assert repr(framework) in str(e.value)
    else:  # safetensors' TypeError, word for word (test_parity.py)
        with pytest.raises(TypeError, match="^argument 'framework': '"):
            ringload.safe_open(path, framework)
    with pytest.raises(TypeError):
        ringload.safe_open(path)  # framework is required, as in safetensors


def test_loader_options_and_backend_are_checked(small_ckpt):
    path = small_ckpt
    with pytest.raises(ringload.ArgumentError) as e:
        ringload.load(path, backend="spdk")
    assert "spdk" in str(e.value)
    with pytest.raises(ringload.ArgumentError) as e:
        ringload.load(path, options={"queue_deep": 4})
    assert "queue_deep" in str(e.value)
    with pytest.raises(ringload.ArgumentError) as e:
        ringload.load(path, options={"queue_depth": 0})
    assert e.value.code_name == "RL_E_INVALID_ARG" and "not in [1, 4096]" in str(e.value)
    got = ringload.load(path, options={"queue_depth": 2, "direct": 0})
    assert got[0]["vec"].shape == (13,)


def test_numpy_without_ml_dtypes_refuses_bf16_and_f8_as_safetensors(small_ckpt,
                                                                   monkeypatch):
    # safetensors fails there with these types and words; ringload.load
    # (its own API) gives raw unsigned views instead.
    monkeypatch.setattr(_dtypes, "_ml_dtypes", None)
    with ringload.safe_open(small_ckpt, "np") as f:
        with pytest.raises(TypeError) as e:
            f.get_tensor("bf16")
        assert isinstance(e.value, ringload.DtypeError)
        assert "tensor 'bf16'" in str(e.value) and "ml_dtypes" in str(e.value)
        assert "data type 'bfloat16' not understood" in str(e.value)
        for name, attr in (("f8e4m3", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2"),
                           ("f8e8m0", "float8_e8m0fnu")):
            with pytest.raises(AttributeError, match=f"module 'numpy' has no "
                               f"attribute '{attr}'"):
                f.get_tensor(name)
            with pytest.raises(ringload.DtypeError):
                f.get_slice(name)[:1]
        assert f.get_tensor("f4").dtype == np.uint8  # packed bytes, as before
    with pytest.raises(ringload.DtypeError, match="'bfloat16' not understood"):
        rnp.load_file(small_ckpt)
    assert ringload._handles.live_handles() == {}
    got = ringload.load(small_ckpt, framework="np")[0]
    expect = {"bf16": "uint16", "f8e4m3": "uint8", "f8e5m2": "uint8",
              "f8e8m0": "uint8", "f4": "uint8", "f6e2m3": "uint8", "f6e3m2": "uint8"}
    for name, dt in expect.items():
        assert got[name].dtype == np.dtype(dt), name
    assert got["f4"].shape == (4, 4) and got["f6e2m3"].shape == (2, 6)
    assert got["f6e3m2"].shape == (4, 3)


def test_numpy_dtypes_come_from_ml_dtypes_when_installed(small_ckpt, monkeypatch):
    # ml_dtypes is not a Debian package: a stand-in module with two of its
    # names checks that its types are taken where present; a type it lacks
    # (an older ml_dtypes) is refused as without it.
    fake = types.SimpleNamespace(bfloat16=np.dtype("float16"),
                                 float8_e5m2=np.dtype("int8"))
    monkeypatch.setattr(_dtypes, "_ml_dtypes", fake)
    with ringload.safe_open(small_ckpt, "np") as f:
        assert f.get_tensor("bf16").dtype == np.float16
        assert f.get_tensor("f8e5m2").dtype == np.int8
        with pytest.raises(AttributeError, match="float8_e4m3fn"):
            f.get_tensor("f8e4m3")
    got = ringload.load(small_ckpt, framework="np")[0]
    assert got["bf16"].dtype == np.float16 and got["f8e4m3"].dtype == np.uint8


def test_subbyte_tensor_numpy_cannot_hold_is_a_dtype_error(tmp_path, torch):
    path = tmp_path / "f4.safetensors"
    stfile.write(path, {"odd": ("F4", (2, 3), bytes(3)), "ok": ("F4", (2,), bytes(1))})
    with pytest.raises(ringload.DtypeError) as e:
        rnp.load_file(path)
    assert "tensor 'odd'" in str(e.value) and "F4" in str(e.value)
    with ringload.safe_open(path, "np") as f:
        assert f.get_tensor("ok").shape == (1,)
        with pytest.raises(ringload.DtypeError):
            f.get_slice("ok")[0:1]
    with pytest.raises(ringload.DtypeError) as e:
        ringload.torch.load_file(path)
    assert "F4" in str(e.value)
