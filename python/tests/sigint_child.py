"""The child of test_interrupt: runs each entry point on each backend with
one and two workers, interrupts the load with a SIGINT to this process
while it runs in C, and prints one JSON line per load: what reached the
caller's `except Exception` / `except KeyboardInterrupt`, the codes the C
calls returned (RL_E_CANCELED: the load was canceled in C), the library
handles left and whether SIGINT's handler is Python's default again.

Usage: sigint_child.py CHECKPOINT ENTRY...

The load is slowed (one 4 KiB read in flight, page cache) through the
loader's options, for every entry point (those without an options
argument too), so that the signal lands while it runs; the signal is sent
once the main thread is seen inside a C call of the load (its innermost
Python frame is a hook's, which calls nothing else: it is in ctypes' call,
with the GIL released).
"""
import gc
import json
import os
import signal
import sys
import threading
import time

import ringload
from ringload import _errors, _handles, _lib

BACKENDS = tuple(b for b in _lib.BACKENDS if b != "auto")
SLOW = {"queue_depth": 1, "request_bytes": 4096, "direct": 0}
TENSOR = "w"
TRIES = 3


def _entries(path):
    def get_tensor(fw):
        with ringload.safe_open(path, fw) as f:
            return f.get_tensor(TENSOR)

    def get_slice(fw):
        with ringload.safe_open(path, fw) as f:
            return f.get_slice(TENSOR)[1:]

    def load_file(fw):
        return ringload.__getattr__(fw).load_file(path)

    return {
        "load-np": lambda: ringload.load(path, framework="np"),
        "load-pt": lambda: ringload.load(path, framework="pt"),
        "load-pt-streaming": lambda: ringload.load(
            path, framework="pt", options={"staging_budget": 1 << 20}),
        "numpy.load_file": lambda: load_file("numpy"),
        "torch.load_file": lambda: load_file("torch"),
        "safe_open-np.get_tensor": lambda: get_tensor("np"),
        "safe_open-pt.get_tensor": lambda: get_tensor("pt"),
        "safe_open-np.get_slice": lambda: get_slice("np"),
        "safe_open-pt.get_slice": lambda: get_slice("pt"),
    }


def _reading(fn, *args):
    """Calls fn(*args), one of the long C calls of a load (a run, a wait
    for a piece): the killer sends SIGINT while this frame is innermost."""
    return fn(*args)


class _Hooks:
    """Forces backend, workers and SLOW on every loader; records the codes
    of the C calls that run or end a load; sets `started` on the first
    that reads; `done` once the entry point returned or raised."""

    def __init__(self):
        self.backend, self.workers = "auto", 1
        self.started = threading.Event()
        self.done = False
        self.codes = []
        configure = _handles.Loader._configure

        def forced(loader, backend, opts):
            opts = dict(opts, workers=self.workers, **SLOW)
            return configure(loader, self.backend, opts)

        _handles.Loader._configure = forced
        for name in ("rl_loader_load", "rl_loader_run", "rl_loader_finish"):
            setattr(_lib, name, self._recorded(getattr(_lib, name)))
        next_piece = _lib.rl_loader_next_piece

        def waiting(*args):
            self.started.set()
            return _reading(next_piece, *args)

        _lib.rl_loader_next_piece = waiting

    def _recorded(self, fn):
        def call(*args):
            self.started.set()
            rc = _reading(fn, *args)
            self.codes.append(_errors.code_name(rc) if rc < 0 else rc)
            return rc
        return call

    @staticmethod
    def in_c():
        """Whether the main thread is inside one of the C calls that read."""
        frame = sys._current_frames().get(threading.main_thread().ident)
        return frame is not None and frame.f_code is _reading.__code__


def _interrupt(hooks):
    hooks.started.wait()
    while not hooks.done:
        if hooks.in_c():
            os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.001)


def _one(hooks, entry):
    hooks.started.clear()
    hooks.done = False
    hooks.codes.clear()
    killer = threading.Thread(target=_interrupt, args=(hooks,))
    killer.start()
    try:
        entry()
        got = "returned"
    except Exception as e:  # what a swallowed Ctrl-C looks like
        got = f"Exception {type(e).__name__}: {e}"
    except KeyboardInterrupt:
        got = "KeyboardInterrupt"
    hooks.done = True
    hooks.started.set()
    killer.join()
    return got


def _row(hooks, entry):
    """One load interrupted, tried again (up to TRIES in all) while the
    signal came too late to cancel it in C: sent as a C call ended, it is
    handled once the load is over. A load that is never canceled fails."""
    for attempt in range(1, TRIES + 1):
        got = _one(hooks, entry)
        if hooks.codes[-1:] == ["RL_E_CANCELED"]:
            break
    handler = signal.getsignal(signal.SIGINT)
    return {"got": got, "codes": list(hooks.codes), "attempts": attempt,
            "handles": _handles.live_handles(),
            "handler_restored": handler is signal.default_int_handler}


def main():
    path, names = sys.argv[1], sys.argv[2:]
    hooks = _Hooks()
    entries = _entries(path)
    gc.disable()  # reference counting alone must free everything
    for name in names:
        for hooks.backend in BACKENDS:
            for hooks.workers in (1, 2):
                row = _row(hooks, entries[name])
                print(json.dumps({"entry": name, "backend": hooks.backend,
                                  "workers": hooks.workers, **row}),
                      flush=True)


if __name__ == "__main__":
    main()
