"""What every Python transport (rl_transport_ops) shares: the ops table
whose function objects live as long as the transport, the counts of what
it moved, the guard that keeps an op's exception out of C, and
raise_kept, which raises that exception instead of the library's
message. _transport (torch.distributed) and _kv (JAX's key-value store)
fill in send, recv, wait and agree.
"""
import ctypes

from . import _errors, _lib


class CallbackTransport:
    """The shared half of a transport: counts what it moved (sent,
    received: payload bytes; messages), own_failed / peer_failed after an
    agreement that failed, and the first exception an op raised."""

    def __init__(self):
        self.exc = None
        self.sent = self.received = self.messages = 0
        self.own_failed = self.peer_failed = False
        # ctypes function objects live as long as this object: the loader
        # keeps only their addresses
        self.ops = _lib.TransportOps(
            version=_lib.RL_TRANSPORT_V1,
            size=ctypes.sizeof(_lib.TransportOps),
            send=_lib.TRANSPORT_SEND_FN(self._send),
            recv=_lib.TRANSPORT_RECV_FN(self._recv),
            wait=_lib.TRANSPORT_WAIT_FN(self._wait),
            agree=_lib.TRANSPORT_AGREE_FN(self._agree))

    def _send(self, _user, peer, tag, buf, n):
        raise NotImplementedError

    def _recv(self, _user, peer, tag, buf, n):
        raise NotImplementedError

    def _wait(self, _user):
        raise NotImplementedError

    def _agree(self, _user, status):
        raise NotImplementedError

    def _guard(self, fn):
        """fn() as an op: 0, or a negative code with the exception kept."""
        try:
            fn()
            return 0
        except BaseException as e:  # noqa: BLE001 - never through C
            if self.exc is None:
                self.exc = e
            code = getattr(e, "code", None)
            return code if isinstance(code, int) and code < 0 \
                else _lib.RL_E_PEER

    def _agreed(self, mine, status, reduce):
        """The agree op: reduce() sets status[0] to the minimum of every
        process's status (mine: this one's); notes who failed."""
        rc = self._guard(reduce)
        if not rc and status[0]:
            self.own_failed |= mine != 0
            self.peer_failed |= mine == 0
        return rc

    def raise_kept(self, err):
        """Raises the exception an op kept (its message in a ringload
        Error of err's code when it is not one), else err."""
        exc, self.exc = self.exc, None
        if exc is None:
            raise err
        if isinstance(exc, _errors.Error) or \
                not isinstance(exc, Exception):
            raise exc
        raise _errors.error(err.code, f"{err.message}: {type(exc).__name__}"
                            f": {exc}") from exc
