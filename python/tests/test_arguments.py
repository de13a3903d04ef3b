"""Arguments checked in Python before they reach C: integers neither
truncated by ctypes nor taken from strings, floats or bools; no NUL inside
a path or a string (a C string would end there); no empty string where a
file or a value is named. Each error names the argument."""
import numpy as np
import pytest

import stfile

import ringload
from ringload import _handles

from conftest import BACKENDS  # noqa: E402


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_options_out_of_range_are_refused_not_truncated(small_ckpt, backend):
    for key, value in (("queue_depth", 2**64 + 16), ("queue_depth", 2**63),
                       ("queue_depth", -1), ("workers", 2**32 + 1),
                       ("request_bytes", -(2**64) + 8192)):
        with pytest.raises(ringload.ArgumentError) as e:
            ringload.load(small_ckpt, backend=backend, options={key: value})
        assert f"loader option '{key}': {value} not in [" in str(e.value)
        assert e.value.code_name == "RL_E_INVALID_ARG"
    for process in (2**64 + 1, 2**32, -1, 1 << 24):
        with pytest.raises(ringload.ArgumentError) as e:
            ringload.load(small_ckpt, process=process, backend=backend)
        assert f"process: {process} not in [0, 16777215]" == str(e.value)


@pytest.mark.parametrize("value", ["1", 16.7, 16.0, True, None, b"16"])
def test_integers_must_be_integers(small_ckpt, value):
    with pytest.raises(ringload.ArgumentTypeError) as e:
        ringload.load(small_ckpt, options={"queue_depth": value})
    assert isinstance(e.value, TypeError) and not isinstance(e.value, ValueError)
    assert str(e.value) == ("loader option 'queue_depth': expected an integer, "
                            f"not {type(value).__name__} {value!r}")
    with pytest.raises(ringload.ArgumentTypeError) as e:
        ringload.load(small_ckpt, process=value)
    assert str(e.value).startswith("process: expected an integer, not ")
    plan = _handles.Plan()
    with pytest.raises(TypeError, match="chunk_bytes: expected an integer"):
        plan.set(chunk_bytes=value)
    plan.close()


def test_streaming_budget_is_checked_before_anything_is_allocated(tmp_path, torch):
    path = tmp_path / "f32.safetensors"
    stfile.write(path, {"w": ("F32", (4,), bytes(16))})
    for value, exc in (("65536", TypeError), (65536.5, TypeError),
                       (2**64 + 65536, ValueError), (-1, ValueError)):
        with pytest.raises(exc, match="loader option 'staging_budget'"):
            ringload.load(path, framework="pt", options={"staging_budget": value})


def test_integer_types_with_index_are_taken(small_ckpt):
    got = ringload.load(small_ckpt, process=np.int64(0),
                        options={"queue_depth": np.uint16(4), "direct": np.int8(0)})
    assert got[0]["vec"].tolist() == list(range(13))


def _openers(torch):
    """Every entry point that takes a filename: (name, fn(filename))."""
    import ringload.numpy as rnp
    import ringload.torch as rt

    def safe_open(path):
        with ringload.safe_open(path, "np") as f:
            return f.keys()

    return (("load", ringload.load), ("numpy.load_file", rnp.load_file),
            ("torch.load_file", rt.load_file), ("safe_open", safe_open))


@pytest.mark.parametrize("tail", ["\0", "\0.other", b"\0x"])
def test_nul_in_a_path_is_refused_not_cut_short(small_ckpt, tmp_path, torch, tail):
    # the path up to the NUL is a good checkpoint: C would load it
    path = small_ckpt + tail if isinstance(tail, str) else small_ckpt.encode() + tail
    for name, opener in _openers(torch):
        with pytest.raises(ringload.ArgumentError) as e:
            opener(path)
        assert str(e.value) == f"filename: embedded null byte in {path!r}", name
        assert isinstance(e.value, ValueError)
        assert e.value.code_name == "RL_E_INVALID_ARG"
    spec = tmp_path / "spec.json"
    spec.write_text('{"mesh": {"shape": [1], "axes": ["x"]}, "rules": []}')
    with pytest.raises(ringload.ArgumentError, match="^sharding: embedded null byte"):
        ringload.load(small_ckpt, sharding=str(spec) + "\0")
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("0" * 64 + "  small.safetensors\n")
    with pytest.raises(ringload.ArgumentError, match="^sha256: embedded null byte"):
        ringload.load(small_ckpt, sha256=str(sums) + "\0")


@pytest.mark.parametrize("empty", ["", b""])
def test_empty_values_name_the_argument(small_ckpt, torch, empty):
    for name, opener in _openers(torch):
        with pytest.raises(ringload.ArgumentError) as e:
            opener(empty)
        assert str(e.value) == "filename: empty path", name
    for sharding in (empty, " \n"):
        with pytest.raises(ringload.ArgumentError) as e:
            ringload.load(small_ckpt, sharding=sharding)
        assert str(e.value).startswith("sharding: empty: give a dict")
    for sha256 in (empty, "\n"):
        with pytest.raises(ringload.ArgumentError) as e:
            ringload.load(small_ckpt, sha256=sha256)
        assert str(e.value).startswith("sha256: empty: give {file: hex}")
    with pytest.raises(ringload.ArgumentError, match="^sha256: empty"):
        ringload.safe_open(small_ckpt, "np", sha256=empty)


@pytest.mark.parametrize("value", [np.True_, np.bool_(False), np.array([3]),
                                   np.array(3.0)])
def test_numpy_bools_and_arrays_are_not_integers(small_ckpt, value):
    with pytest.raises(ringload.ArgumentTypeError) as e:
        ringload.load(small_ckpt, options={"queue_depth": value})
    assert str(e.value).startswith("loader option 'queue_depth': expected an "
                                   f"integer, not {type(value).__name__}")


@pytest.mark.parametrize("key", ["0", 0.7, True, np.True_, None])
def test_device_map_keys_must_be_device_ids(small_ckpt, key):
    with pytest.raises(ringload.ArgumentTypeError) as e:
        ringload.load(small_ckpt, device_map={key: "cpu"})
    assert str(e.value).startswith("device_map key: expected an integer, not ")
    with pytest.raises(ringload.ArgumentError, match=r"^device_map key: -1 not in \[0, "):
        ringload.load(small_ckpt, device_map={-1: "cpu"})
    assert ringload.load(small_ckpt, device_map={np.uint8(0): "cpu"})[0]["vec"].size == 13


@pytest.mark.parametrize("given", [["cpu"], [(0, "cpu")], "cpu", 0])
def test_device_map_that_is_no_dict_is_a_type_error_naming_it(small_ckpt, given):
    """Regression (issue 32 item 5): a list raised AttributeError."""
    with pytest.raises(ringload.ArgumentTypeError) as e:
        ringload.load(small_ckpt, device_map=given)
    assert isinstance(e.value, TypeError)
    assert str(e.value) == ("device_map: a dict {device_id: device}, not "
                            f"{type(given).__name__} {given!r}")


@pytest.mark.parametrize("device", [2**70, 2**63, 2**64 + 1])
def test_a_device_index_too_large_is_invalid_naming_it(small_ckpt, torch, device):
    """Regression (issue 32 item 5): 2**70 raised a plain ValueError
    "Overflow when unpacking long long"; safetensors says "device ... is
    invalid"."""
    import ringload.torch as rt
    for call in (lambda: rt.load_file(small_ckpt, device=device),
                 lambda: ringload.load(small_ckpt, framework="pt",
                                       device_map={0: device})):
        with pytest.raises(ringload.DeviceError) as e:
            call()
        assert str(e.value).startswith(f"device {device} is invalid"), str(e.value)


def test_arguments_are_checked_before_anything_is_opened(tmp_path, torch):
    import ringload.numpy as rnp
    import ringload.torch as rt
    missing = tmp_path / "missing.safetensors"
    for kwargs, exc, what in (
            ({"options": {"queue_depth": 2**64}}, ringload.ArgumentError,
             "loader option 'queue_depth'"),
            ({"options": {"queue_dpeth": 2}}, ringload.ArgumentError,
             "unknown loader option 'queue_dpeth'"),
            ({"backend": "spdk"}, ringload.ArgumentError, "backend 'spdk'"),
            ({"stats": []}, ringload.ArgumentTypeError, "stats: "),
            ({"copy": "no"}, ringload.ArgumentTypeError, "copy: "),
            ({"device_map": {"0": "cpu"}}, ringload.ArgumentTypeError,
             "device_map key: ")):
        with pytest.raises(exc) as e:
            ringload.load(missing, **kwargs)
        assert str(e.value).startswith(what), kwargs
        if "stats" in kwargs or "copy" in kwargs:
            for load_file in (rnp.load_file, rt.load_file):
                with pytest.raises(exc, match=f"^{what}"):
                    load_file(missing, **kwargs)


@pytest.mark.parametrize("value", ["no", 1, 0, None, np.True_])
def test_copy_must_be_a_bool(small_ckpt, value):
    with pytest.raises(ringload.ArgumentTypeError) as e:
        ringload.load(small_ckpt, copy=value)
    assert str(e.value) == f"copy: True or False, not {type(value).__name__} {value!r}"


def test_an_unknown_parameter_is_not_given_bounds():
    from ringload import _lib
    with pytest.raises(ringload.Error, match="^x: unknown parameter 9999$"):
        _handles._bounded("x", 1, _lib.rl_loader_param_bounds, 9999)


def test_fields_the_library_filled_in_part_are_left_out():
    import ctypes

    class Tagged(ctypes.Structure):
        _fields_ = [("size", ctypes.c_uint32), ("a", ctypes.c_uint32),
                    ("b", ctypes.c_uint64), ("c", ctypes.c_uint64)]

    st = Tagged(size=Tagged.b.offset + 4, a=1, b=2, c=3)
    assert _handles._fields(st) == {"a": 1}
    st.size = Tagged.c.offset
    assert _handles._fields(st) == {"a": 1, "b": 2}
