"""The reference fixtures (written by the safetensors reference): every
dtype and shape, numpy and torch, whole and sharded, against the
independent reader and MANIFEST.json's sha256 of every tensor."""
import os

import numpy as np
import pytest

import oracle
import stfile

import ringload
import ringload.numpy as rnp

FILES = ["dtypes.safetensors", "shapes.safetensors",
         "tiny-moe/model-00001-of-00003.safetensors",
         "tiny-moe/model-00002-of-00003.safetensors",
         "tiny-moe/model-00003-of-00003.safetensors"]


def _ref(testdata, rel):
    return os.path.join(testdata, "reference", rel)


@pytest.mark.parametrize("rel", FILES)
def test_independent_reader_agrees_with_the_manifest(testdata, manifest, rel):
    tensors, _ = stfile.read(_ref(testdata, rel))
    assert set(tensors) == set(manifest[rel])
    for name, (dtype, shape, data) in tensors.items():
        m = manifest[rel][name]
        assert (dtype, list(shape), len(data)) == (m["dtype"], m["shape"], m["nbytes"])
        assert oracle.sha256(data) == m["sha256"], name


def _check_numpy(name, arr, dtype, shape, data):
    exp = oracle.numpy_expect(dtype, shape)
    assert exp is not None, name
    assert (arr.dtype, arr.shape) == exp, name
    assert oracle.as_bytes(arr) == data, name


@pytest.mark.parametrize("rel", FILES)
def test_numpy_load_file_every_dtype_and_shape(testdata, rel):
    tensors, _ = stfile.read(_ref(testdata, rel))
    got = oracle.numpy_load_file(_ref(testdata, rel))
    assert list(got) == sorted(tensors)
    for name, (dtype, shape, data) in tensors.items():
        _check_numpy(name, got[name], dtype, shape, data)


def _check_torch(torch, name, t, dtype, shape, data):
    assert t.dtype == oracle.torch_expect(torch, dtype, shape), name
    assert tuple(t.shape) == oracle.torch_shape(dtype, shape), name
    assert t.device.type == "cpu"
    assert oracle.as_bytes(t) == data, name


@pytest.mark.parametrize("rel", FILES)
def test_torch_every_dtype_and_shape_or_a_dtype_error(testdata, torch, rel):
    tensors, _ = stfile.read(_ref(testdata, rel))
    with ringload.safe_open(_ref(testdata, rel), "pt") as f:
        for name, (dtype, shape, data) in tensors.items():
            if oracle.torch_expect(torch, dtype, shape) is None:
                with pytest.raises(ringload.DtypeError) as e:
                    f.get_tensor(name)
                assert f"tensor '{name}'" in str(e.value)
                assert dtype in str(e.value)
                assert e.value.code == ringload._lib.RL_E_INVALID_ARG
            else:
                _check_torch(torch, name, f.get_tensor(name), dtype, shape, data)


def test_torch_load_file_whole_files(testdata, torch):
    for rel in FILES[1:]:
        tensors, _ = stfile.read(_ref(testdata, rel))
        got = ringload.torch.load_file(_ref(testdata, rel))
        assert list(got) == sorted(tensors)
        for name, (dtype, shape, data) in tensors.items():
            _check_torch(torch, name, got[name], dtype, shape, data)


def test_torch_load_file_refuses_a_dtype_torch_lacks_before_reading(testdata, torch):
    missing = [n for n, (dt, _, _) in stfile.read(_ref(testdata, FILES[0]))[0].items()
               if oracle.torch_expect(torch, dt) is None]
    assert missing  # F4 and F6 have no torch type in any version
    with pytest.raises(ringload.DtypeError) as e:
        ringload.torch.load_file(_ref(testdata, FILES[0]))
    assert any(f"tensor '{n}'" in str(e.value) for n in missing)
    assert ringload._handles.live_handles() == {}


def _moe(testdata):
    tensors = {}
    for rel in FILES[2:]:
        tensors.update(stfile.read(_ref(testdata, rel))[0])
    return tensors


@pytest.mark.parametrize("form", ["tiny-moe", "tiny-moe/model.safetensors.index.json"])
def test_whole_checkpoint_of_three_files_by_directory_and_index(testdata, form, torch):
    tensors = _moe(testdata)
    for fw, got in (("np", oracle.numpy_load_file(_ref(testdata, form))),
                    ("pt", ringload.torch.load_file(_ref(testdata, form)))):
        assert list(got) == sorted(tensors), fw
        for name, (dtype, shape, data) in tensors.items():
            if fw == "np":
                _check_numpy(name, got[name], dtype, shape, data)
            else:
                _check_torch(torch, name, got[name], dtype, shape, data)


MOE_SPEC = {
    "mesh": {"shape": [2, 2], "axes": ["data", "model"],
             "devices": [7, 5, 3, 1], "process_of_device": [0, 0, 1, 1]},
    "rules": [
        {"match": "model\\.layers\\.[0-9]+\\.mlp\\.experts\\.[0-9]+\\.(gate|up)_proj\\.weight",
         "spec": ["model", None]},
        {"match": "model\\.layers\\.[0-9]+\\.mlp\\.experts\\.[0-9]+\\.down_proj\\.weight",
         "spec": [None, ["data", "model"]]},
        {"match": "model\\.embed_tokens\\.weight", "spec": [["model", "data"]]},
        {"match": "model\\.layers\\.[0-9]+\\.self_attn\\.o_proj\\.weight",
         "spec": ["data", "model"]},
    ],
}


def check_sharded(torch, result, spec, process, tensors, framework):
    """Every device of process holds every tensor's box, bytes exact."""
    assert sorted(result) == sorted(oracle.devices_of(spec, process))
    for name, (dtype, shape, data) in tensors.items():
        for dev, box in oracle.boxes(spec, name, shape).items():
            if dev not in result:
                continue
            t = result[dev][name]
            bshape = tuple(b - a for a, b in box)
            if framework == "np":
                assert (t.dtype, t.shape) == oracle.numpy_expect(dtype, bshape), name
            else:
                assert t.dtype == oracle.torch_expect(torch, dtype), name
                assert tuple(t.shape) == bshape, name
            assert oracle.as_bytes(t) == stfile.box_bytes(dtype, shape, data, box), \
                (name, dev, box)
    for dev in result:
        assert set(result[dev]) == set(tensors)


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("process", [0, 1])
def test_sharded_tiny_moe_every_device_box(testdata, torch, framework, process):
    tensors = _moe(testdata)
    got = ringload.load(_ref(testdata, "tiny-moe"), sharding=MOE_SPEC,
                        process=process, framework=framework)
    check_sharded(torch, got, MOE_SPEC, process, tensors, framework)


def test_sharding_given_as_json_text_and_as_a_file(testdata, tmp_path):
    import json
    tensors = _moe(testdata)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(MOE_SPEC))
    for sharding in (json.dumps(MOE_SPEC), str(path), path):
        got = ringload.load(_ref(testdata, "tiny-moe"), sharding=sharding, process=1)
        check_sharded(None, got, MOE_SPEC, 1, tensors, "np")


def test_cpu_results_are_views_of_staging_that_keep_it_alive(testdata):
    # ringload.load always reads into staging; load_file maps a file the
    # page cache holds instead (test_hot.py checks that mapping's lifetime)
    got = ringload.load(_ref(testdata, "shapes.safetensors"), framework="np")[0]
    vec = got["vec"]
    expect = oracle.as_bytes(vec)
    assert not vec.flags.owndata  # a view, no copy
    assert ringload._handles.live_handles() == {"rl_loader": 1}
    del got
    assert ringload._handles.live_handles() == {"rl_loader": 1}  # vec holds it
    np.ones(1 << 20)  # reuse freed memory, if it were freed
    assert oracle.as_bytes(vec) == expect
    del vec
    assert ringload._handles.live_handles() == {}
