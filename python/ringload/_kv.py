"""The processes of a multi-process JAX job as _dist's group, over the
key-value store of JAX's coordination service (jax.distributed): JAX has
no point-to-point transfer of host bytes, but every process holds a
client of that store (set, blocking get, delete).

Keys live under "ringload/load<N>/" (N: the job's loads, counted alike
on every process, since every process calls each load): a gather's
value under "g<seq>/<rank>", a message under "m/<from>-<to>/<tag>/<part>"
(tag: the transfer's index in the cluster, which its root sends once to
each receiver: unique in a load, whatever order the messages are posted
in; the library sends each payload as soon as it is read, which is not
the order of the receives). A payload travels in parts of at most PART
bytes (each one gRPC message, copied once into and once out of Python
bytes); the receiver
deletes each part as it takes it, so the coordinator holds at most the
payloads of one batch (batch_bytes), not the checkpoint. A gather's key
is deleted at the next gather (every process has read it by then), and
process 0 deletes the previous load's keys at the first gather of the
next (every process has then finished it): the job's last load leaves
its last gather's keys (a few hundred bytes), or, when it failed, the
parts nobody took (at most a batch).

Rate between two processes on localhost (2 busy cores): 30-37 MB/s for
random bytes, 64 MiB in parts of 256 KiB to 64 MiB (no size limit met at
64 MiB; 2 or 4 threads at once gain nothing), 10 MB/s for np.arange F32
values: the coordinator's gRPC, not this module, sets it
(perf/jax_read_once.py). Read once pays where the bytes it saves are
worth more than that.

Waits are bounded: a get that sees no value for timeout seconds fails
with RL_E_PEER naming the key and the process it waits for. A process
whose send fails sets "abort" with its error, so that the others' waits
for its messages fail at once instead of at the timeout (gathers do not
look at it: the agreements that follow are how every process learns of
the failure).
"""
import ctypes
import itertools
import pickle
import time

from . import _callback, _errors, _lib

PART = 4 << 20
SLICE_MS = 1000  # a blocking get's slice between looks at "abort"
_loads = itertools.count()


def _client():
    from jax._src import distributed
    return distributed.global_state.client


class Group:
    """This process of the JAX job (jax.process_index() of
    jax.process_count()) as _dist's group. Make it first in a load, on
    every process, before anything that can fail: it takes the load's
    number."""

    def __init__(self, timeout):
        import jax
        self.client = _client()
        if self.client is None:
            raise _errors.StateError(_lib.RL_E_STATE, "read_once needs "
                                     "jax.distributed.initialize() (the "
                                     "coordination service's key-value "
                                     "store carries the bytes)")
        self.rank, self.size = jax.process_index(), jax.process_count()
        self.load = next(_loads)
        self.prefix = f"ringload/load{self.load}"
        self.seq = 0
        if isinstance(timeout, bool) or \
                not isinstance(timeout, (int, float)) or not timeout > 0:
            raise _errors.ArgumentError(_lib.RL_E_INVALID_ARG, (
                f"timeout {timeout!r}: give the seconds a process waits "
                "for another (a number > 0)"))
        self.timeout = float(timeout)

    def put(self, key, data):
        """Sets key's parts to data (bytes or a ctypes buffer)."""
        view = memoryview(data).cast("B")
        for i in range(max(1, -(-len(view) // PART))):
            self.client.key_value_set_bytes(
                f"{self.prefix}/{key}/{i}", bytes(view[i * PART:
                                                       (i + 1) * PART]))

    def _get_one(self, key, who, abort):
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return self.client.blocking_key_value_get_bytes(
                    key, int(max(1, min(SLICE_MS, left * 1000))))
            except Exception as e:  # noqa: BLE001 - JaxRuntimeError
                if not str(e).startswith("DEADLINE_EXCEEDED"):
                    raise _errors.error(_lib.RL_E_PEER, (
                        f"read_once over JAX's key-value store: process "
                        f"{self.rank} waiting for {who} (key {key}): "
                        f"{str(e).splitlines()[0]}")) from e
            if abort:
                why = self._try(f"{self.prefix}/abort")
                if why is not None:  # the other's error is the one told
                    e = _errors.error(_lib.RL_E_PEER, why.decode())
                    e.ringload_secondary = True
                    raise e
            if time.monotonic() >= deadline:
                raise _errors.error(_lib.RL_E_PEER, (
                    f"read_once over JAX's key-value store: process "
                    f"{self.rank} waited {self.timeout:g} s for {who} "
                    f"(key {key}): is that process alive?"))

    def _try(self, key):
        try:
            return self.client.key_value_try_get_bytes(key)
        except Exception:  # noqa: BLE001 - not there
            return None

    def get(self, key, n, who, into=None, abort=False):
        """The n bytes under key's parts (into: a writable buffer to fill
        instead), each part deleted once read."""
        out = bytearray() if into is None else None
        for i in range(max(1, -(-n // PART))):
            k = f"{self.prefix}/{key}/{i}"
            part = self._get_one(k, who, abort)
            self.client.key_value_delete(k)
            if into is None:
                out += part
            elif len(part):
                ctypes.memmove(into + i * PART, part, len(part))
        return bytes(out) if out is not None else None

    def gather(self, what, obj):
        """Every process's obj, in rank order (pickled; the processes of
        one job trust each other, as all_gather_object does)."""
        seq, self.seq = self.seq, self.seq + 1
        data = pickle.dumps(obj)
        self.client.key_value_set_bytes(f"{self.prefix}/g{seq}/{self.rank}",
                                        data)
        out = []
        for r in range(self.size):
            key = f"{self.prefix}/g{seq}/{r}"
            out.append(obj if r == self.rank else pickle.loads(
                self._get_one(key, f"process {r}'s {what}", False)))
        if seq:  # every process has set g<seq>: all have read g<seq-1>
            self.client.key_value_delete(
                f"{self.prefix}/g{seq - 1}/{self.rank}")
        elif self.rank == 0 and self.load:  # and all finished the last load
            self.client.key_value_delete(f"ringload/load{self.load - 1}")
        return out

    def abort(self, why):
        self.client.key_value_set_bytes(f"{self.prefix}/abort", why.encode(),
                                        allow_overwrite=True)

    def transport(self):
        return Transport(self)


class Transport(_callback.CallbackTransport):
    """The ops over group (Group): send sets the payload's parts, recv
    notes where the bytes go and wait takes them (a receive that blocked
    when posted would wait for a send its peer posts later), agree
    gathers the statuses and takes the minimum."""

    def __init__(self, group):
        super().__init__()
        self.group = group
        self.posted = []

    @staticmethod
    def _key(src, dst, tag):
        return f"m/{src}-{dst}/{tag}"

    def _send(self, _user, peer, tag, buf, n):
        key = self._key(self.group.rank, peer, tag)

        def post():
            self.group.put(key, (ctypes.c_uint8 * n).from_address(buf)
                           if n else b"")
            self.messages += 1
            self.sent += n
        rc = self._guard(post)
        if rc:  # the peer's receive fails now, not at the timeout
            try:
                self.group.abort(f"process {self.group.rank} failed to send "
                                 f"to process {peer}: {self.exc!r}")
            except Exception:  # noqa: BLE001 - the first one is kept
                pass
        return rc

    def _recv(self, _user, peer, tag, buf, n):
        self.posted.append((self._key(peer, self.group.rank, tag), peer,
                            buf, n))
        return 0

    def _wait(self, _user):
        posted, self.posted = self.posted, []
        rc = 0
        for key, peer, buf, n in posted:  # every one: each deletes its key
            def take(key=key, peer=peer, buf=buf, n=n):
                self.group.get(key, n, f"a message from process {peer}",
                               into=buf, abort=True)
                self.messages += 1
                self.received += n
            r = self._guard(take)
            rc = rc or r
        return rc

    def _agree(self, _user, status):
        mine = status[0]

        def reduce():
            status[0] = min(self.group.gather("agreement", mine))
        return self._agreed(mine, status, reduce)
