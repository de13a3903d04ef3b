"""The fake CUDA driver of tests/fakecuda (libcuda.so.1, RL_LIBCUDA) as a
process's GPUs for ringload.torch, which then runs for real on a machine
without one: its one allocation of device tensors (_cuda_empty) takes the
fake's device memory, which is host memory, so the tensors it returns are
CPU tensors over the very bytes the library's copies wrote; torch.cuda
says it has the fake's devices. Used by dist_worker.py's GPU cases."""
import ctypes
import os

import torch


class Stats(ctypes.Structure):
    """struct fakecuda_stats (fakecuda.h)."""
    _fields_ = [(n, ctypes.c_long) for n in (
        "allocs", "streams", "events", "ctx_refs", "registered", "inflight",
        "copies", "copies_2d", "out_of_bounds", "unpinned", "no_context")] + [
        ("bytes_copied", ctypes.c_ulonglong),
        ("pinned_bytes", ctypes.c_ulonglong),
        ("unbalanced", ctypes.c_long), ("host_allocs", ctypes.c_long)]


class FakeGpus:
    """devices fake GPUs, faults from env (fakecuda.h: FAKECUDA_FAIL_COPY_AT,
    ...), a primary context of each retained (its cuMemAlloc needs one)."""

    def __init__(self, path, devices=2, env=None):
        os.environ.update(RL_LIBCUDA=path, FAKECUDA_DEVICES=str(devices),
                          FAKECUDA_DELAY_US="20", **(env or {}))
        lib = ctypes.CDLL(path)  # the one the library dlopens: same path
        lib.fakecuda_host.restype = ctypes.c_void_p
        lib.fakecuda_host.argtypes = [ctypes.c_ulonglong]
        lib.fakecuda_reset()
        assert lib.cuInit(0) == 0
        self.lib, self.ptrs, self.ctx = lib, [], []
        for o in range(devices):
            ctx = ctypes.c_void_p()
            assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), o) == 0
            self.ctx.append(ctx)

    def install(self, rt, monkey):
        """Makes ringload.torch (rt) allocate here and torch.cuda report
        the fake's devices; monkey(obj, name, value) sets an attribute."""
        monkey(rt, "_cuda_empty", self.empty)
        monkey(rt, "_cuda_stream", lambda ordinal: 0)  # the legacy stream
        monkey(torch.cuda, "is_available", lambda: True)
        monkey(torch.cuda, "device_count", lambda: len(self.ctx))

    def empty(self, nbytes, device):
        """ringload.torch._cuda_empty's twin: (CPU uint8 tensor over
        nbytes of the fake's memory on device's ordinal, device address)."""
        ptr = ctypes.c_ulonglong()
        assert self.lib.cuCtxPushCurrent_v2(self.ctx[device.index]) == 0
        try:
            rc = self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1))
        finally:
            self.lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        assert rc == 0, f"fake cuMemAlloc: {rc}"
        self.ptrs.append((ptr.value, max(nbytes, 1)))
        buf = (ctypes.c_uint8 * max(nbytes, 1)).from_address(
            self.lib.fakecuda_host(ptr.value))
        return torch.frombuffer(buf, dtype=torch.uint8)[:nbytes], ptr.value

    def holds(self, t):
        """Whether tensor t's bytes lie in memory made by empty()."""
        at = t.data_ptr()
        return any(h <= at and at + t.nbytes <= h + n for h, n in (
            (self.lib.fakecuda_host(p), n) for p, n in self.ptrs))

    def stats(self):
        st = Stats()
        self.lib.fakecuda_stats(ctypes.byref(st))
        return st

    def free(self):
        """Frees every allocation of empty() (the tensors over them must
        be gone)."""
        for p, _ in self.ptrs:
            self.lib.cuMemFree_v2(ctypes.c_ulonglong(p))
        self.ptrs.clear()

    def left(self):
        """What a finished load left in the driver, besides this object's
        contexts: {name: count} of the nonzero ones."""
        st = self.stats()
        left = {n: getattr(st, n) for n in (
            "allocs", "streams", "events", "registered", "inflight",
            "out_of_bounds", "unpinned", "no_context", "unbalanced",
            "host_allocs")}
        left["ctx_refs"] = st.ctx_refs - len(self.ctx)
        return {n: v for n, v in left.items() if v}
