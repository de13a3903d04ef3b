"""A transport (rl_transport_ops) over a torch.distributed process group:
the library's read-once executor runs the transfers of rl_loader_run()
and calls these ops for the bytes between ranks.

Every op runs on the thread that called rl_loader_run() (ctypes releases
the GIL for that call and each callback takes it back), so gloo's
collectives run on the caller's thread as they would without the library.
send/recv post dist.isend/dist.irecv of a uint8 tensor viewing the
library's buffer (no copy; the buffer stays valid until wait returns);
wait waits every posted work; agree is an all_reduce MIN of the statuses
(0 or a negative code: the minimum is 0 only when every rank gave 0).

Tags: the transfer's 64-bit cluster index is passed modulo 2^31 (gloo
takes a non-negative int). Correct matching does not rest on it: the
executor posts one message per (peer, transfer) of a batch, in the
cluster's transfer order on every rank, and gloo matches the messages of
one peer and tag in the order posted; two transfers of one batch share a
tag only past 2^31 transfers. The buffers are host memory: gloo (or
another backend that sends CPU tensors), not NCCL.

An exception in an op never crosses C: the op returns a negative code
(the Error's own, else RL_E_PEER) and keeps the first exception, which
the loader's caller raises instead of the library's message
(_callback: the guard and raise_kept every transport shares).
"""
import ctypes

import torch
import torch.distributed as dist

from . import _callback

TAG_MASK = (1 << 31) - 1


def _view(addr, n):
    """A uint8 tensor over n bytes at addr (no copy; it does not own them)."""
    if not n:
        return torch.empty(0, dtype=torch.uint8)
    return torch.frombuffer((ctypes.c_uint8 * n).from_address(addr),
                            dtype=torch.uint8)


class Transport(_callback.CallbackTransport):
    """The ops of one group (None: the default group). peer in the ops is
    the plan's process, the rank in the group; torch's send/recv take the
    global rank. What it moved and who failed: _callback."""

    def __init__(self, group):
        super().__init__()
        self.group = group
        self.works = []

    def _global(self, peer):
        if self.group is None:
            return peer
        return dist.get_global_rank(self.group, peer)

    def _post(self, fn, peer, tag, buf, n):
        """Posts fn (dist.isend or dist.irecv) of the n bytes at buf with
        peer; after a failure, posts it once more and still fails: the
        peer's matching receive or send then completes instead of waiting
        for the group's timeout (which leaves the group unusable), and
        the batch's agreement fails every rank with this one's error."""
        def post():
            self.works.append(fn(_view(buf, n), self._global(peer),
                                 self.group, tag & TAG_MASK))
            self.messages += 1
            return n
        rc = self._guard(post)
        if rc:
            try:
                post()
            except BaseException:  # noqa: BLE001 - the first one is kept
                pass
        return rc

    def _send(self, _user, peer, tag, buf, n):
        rc = self._post(dist.isend, peer, tag, buf, n)
        self.sent += 0 if rc else n
        return rc

    def _recv(self, _user, peer, tag, buf, n):
        rc = self._post(dist.irecv, peer, tag, buf, n)
        self.received += 0 if rc else n
        return rc

    def _wait(self, _user):
        works, self.works = self.works, []
        rc = 0
        for w in works:  # every one: the library frees buffers after
            r = self._guard(w.wait)
            rc = rc or r
        return rc

    def _agree(self, _user, status):
        mine = status[0]

        def reduce():
            t = torch.tensor([mine], dtype=torch.int64)
            dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.group)
            status[0] = int(t.item())
        return self._agreed(mine, status, reduce)
