"""CUDA devices (marked gpu; skipped when torch.cuda.is_available() is
false): load_file and load stream to cuda:N (pinned windows, copy stream,
release on the copy's event), safe_open copies with .to(); bytes equal to
the CPU results."""
import os

import pytest

import oracle

import ringload

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def cuda(torch):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: torch.cuda.is_available() is False")


def _ref(testdata, rel):
    return os.path.join(testdata, "reference", rel)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", 0])
def test_load_file_to_cuda_equals_the_cpu_load(testdata, torch, device):
    path = _ref(testdata, "tiny-moe")
    cpu = ringload.torch.load_file(path)
    gpu = ringload.torch.load_file(path, device=device)
    assert list(gpu) == list(cpu)
    for name, t in gpu.items():
        assert t.device == torch.device("cuda", 0)
        assert t.dtype == cpu[name].dtype and t.shape == cpu[name].shape
        assert oracle.as_bytes(t) == oracle.as_bytes(cpu[name]), name


def test_safe_open_on_cuda(testdata, torch):
    path = _ref(testdata, "shapes.safetensors")
    with ringload.safe_open(path, "pt", device=torch.device("cuda:0")) as f, \
            ringload.safe_open(path, "pt") as c:
        for name in f.keys():
            t = f.get_tensor(name)
            assert t.is_cuda and oracle.as_bytes(t) == oracle.as_bytes(c.get_tensor(name))
        s = f.get_slice("cube")[1:3, ::2]
        assert s.is_cuda and oracle.as_bytes(s) == oracle.as_bytes(c.get_slice("cube")[1:3, ::2])


def test_sharded_load_to_cuda_and_cpu(testdata, torch):
    from test_reference import MOE_SPEC
    path = _ref(testdata, "tiny-moe")
    cpu = ringload.load(path, sharding=MOE_SPEC, process=0, framework="pt")
    got = ringload.load(path, sharding=MOE_SPEC, process=0, framework="pt",
                        device_map={7: "cuda:0", 5: "cpu"})
    for dev, tensors in got.items():
        for name, t in tensors.items():
            assert t.is_cuda == (dev == 7)
            assert oracle.as_bytes(t) == oracle.as_bytes(cpu[dev][name])


def test_absent_cuda_device_is_a_device_error(testdata, torch):
    n = torch.cuda.device_count()
    with pytest.raises(ringload.DeviceError, match=f"{n} CUDA devices"):
        ringload.torch.load_file(_ref(testdata, "shapes.safetensors"), device=n)


def test_streaming_to_cuda_equals_the_cpu_load(testdata, torch):
    """GPU only: pinned windows from torch, copies on a copy stream, each
    piece released on its copy's event; a 64 KiB budget recycles the
    windows many times."""
    from test_reference import MOE_SPEC
    path = _ref(testdata, "tiny-moe")
    cpu = ringload.load(path, sharding=MOE_SPEC, process=0, framework="pt")
    for budget in (64 << 10, 1 << 20):
        got = ringload.load(path, sharding=MOE_SPEC, process=0, framework="pt",
                            device_map={7: "cuda:0", 5: "cuda:0"},
                            options={"staging_budget": budget})
        for dev, tensors in got.items():
            for name, t in tensors.items():
                assert t.is_cuda
                assert oracle.as_bytes(t) == oracle.as_bytes(cpu[dev][name])
