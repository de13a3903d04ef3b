"""Streaming loads (RL_STAGING_STREAM, docs/streaming.md): the shards
arrive as pieces in a bounded pool of windows, pulled with
rl_loader_next_piece (which blocks in C with the GIL released), and each
piece's window is reused only after release(piece).

The consumer is a loop, not a callback: Python never runs on a library
thread. A consumer that holds pieces until some asynchronous copy is done
(a CUDA event) hands `idle` to pieces(): it is called whenever no piece is
ready, to release what is finished, so that a small budget cannot stall
with every window held by finished copies.
"""
import ctypes

import numpy as np

from . import _handles, _lib, _sha256

# How long one wait for a piece blocks before Python runs again (signals,
# KeyboardInterrupt, idle()).
_POLL_MS = 100


def piece_array(piece):
    """Returns a uint8 numpy view of piece's bytes in its window (valid
    until the piece is released)."""
    if not piece.length:
        return np.empty(0, np.uint8)
    return np.frombuffer((ctypes.c_uint8 * piece.length).from_address(piece.data),
                         np.uint8)


class StreamingLoad:
    """One streaming load of job (a _core.Job), as a context manager.

    budget: bytes of windows (None: the loader option staging_budget, else
    the library's default from the process's limits); pool: (address,
    length) of caller memory for the windows (e.g. pinned by torch), kept
    alive by the caller until this load is closed. Attributes: shards (the
    plan's, in plan order), devices ([(id, staging_bytes)]). Iterate with
    pieces(); release each piece; close() (or leaving the with block) ends
    the load, cancelling it when pieces were still to come.
    """

    def __init__(self, job, budget=None, pool=None):
        opts = dict(job.options or {}, staging=_lib.RL_STAGING_STREAM)
        if budget is not None:
            opts["staging_budget"] = int(budget)
        self.loader = _handles.Loader(job.backend, opts, job.sha256)
        self.plan, self._ckpt = None, job.ckpt
        self._started = self._ended = False
        try:
            if pool is not None:
                self.loader.set_window_pool(*pool)
            self.plan = _handles.Plan()
            self.plan.set(process=job.process,
                          chunk_bytes=self.loader.request_bytes(job.ckpt))
            self.plan.build(job.ckpt, job.spec)
            self.shards, self.devices = self.plan.shards(), self.plan.devices()
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def pieces(self, idle=None):
        """Yields every piece (an _lib.Piece) as it arrives; idle() (may be
        None) runs whenever none is ready and returns True when it released
        something. Raises the load's error."""
        self.loader.start(self.plan)
        self._started = True
        while True:
            piece = self.loader.next_piece(0 if idle else _POLL_MS)
            if piece is False and idle is not None and not idle():
                piece = self.loader.next_piece(_POLL_MS)
            if piece is None:
                self._ended = True
                return
            if piece is not False:
                yield piece

    def run_cuda(self, device_map, dests, streams=None, one_gpu=None):
        """Runs the whole load into GPU memory through the library's CUDA
        sink (docs/cuda.md), in C: device_map [CUDA ordinal per spec device
        id]; dests [(device address, nbytes)] per shard in plan order (the
        caller's tensors); streams {ordinal: CUstream value} the copies
        wait for and that wait for them (torch's current streams); one_gpu:
        every spec device on that ordinal instead of device_map. No
        piece reaches Python; returns when every copy finished, or raises
        the load's error (nothing in flight)."""
        self.loader.set_cuda(device_map, one_gpu)
        for ordinal, stream in (streams or {}).items():
            self.loader.set_cuda_stream(ordinal, stream)
        for i, (ptr, nbytes) in enumerate(dests):
            if nbytes:
                self.loader.set_cuda_dest(i, ptr, nbytes)
        self.run()

    def run(self):
        """Runs the whole load in C onto the device its loader is set to
        deliver to (ringload.torch._to_gpus, or run_cuda): no piece
        reaches Python; returns when every copy finished, or raises the
        load's error (nothing in flight)."""
        self.loader.run(self.plan)
        self._ended = True

    def release(self, piece):
        """Gives piece's window back (any thread)."""
        self.loader.release(piece)

    def stats(self, ckpt=None):
        """The statistics of the load (after it ended; Loader.stats)."""
        return self.loader.stats(ckpt)

    def close(self):
        """Ends the load (cancelling it when it had more pieces) and frees
        the loader and plan; held pieces become invalid. Idempotent."""
        loader, self.loader = getattr(self, "loader", None), None
        try:
            if loader is not None and self._started:
                self._started = False
                loader.finish(early=not self._ended)
                if self._ended:
                    _sha256.warn_unchecked(loader, self._ckpt)
        finally:
            if loader is not None:
                loader.close()
            if self.plan is not None:
                self.plan.close()
                self.plan = None
