"""Tensor parallelism with DTensor: 4 processes (gloo, CPU) parallelize an
MLP with ColwiseParallel / RowwiseParallel, then load its weights straight
into that layout with

    state = ringload.torch.load_dtensors(path, mesh, placements)
    model.load_state_dict(state)

Each rank reads only its own shards (read once: a replicated bias is read
by one rank and sent to the others). The output is checked against the
unsharded model.

    PYTHONPATH=python python3 examples/tp_dtensor.py
"""
# needs: torch>=2.4 safetensors
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import save_file
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (ColwiseParallel,
                                               RowwiseParallel,
                                               parallelize_module)

import ringload.torch

WORLD = 4


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(32, 128)
        self.down = torch.nn.Linear(128, 32)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def rank_main(rank, path, init):
    dist.init_process_group("gloo", init_method=f"file://{init}",
                            rank=rank, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,))
    model = parallelize_module(MLP(), mesh, {"up": ColwiseParallel(),
                                             "down": RowwiseParallel()})
    placements = {name: p.placements
                  for name, p in model.state_dict().items()}
    stats = {}
    state = ringload.torch.load_dtensors(path, mesh, placements, stats=stats)
    model.load_state_dict(state)

    torch.manual_seed(1)
    x = torch.randn(4, 32)
    reference = MLP()
    reference.load_state_dict(ringload.torch.load_file(path))
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x))
    print(f"rank {rank}: up.weight {tuple(state['up.weight'].to_local().shape)}"
          f", read {stats['bytes_needed']} of {stats['unique_bytes']} bytes, "
          f"received {stats['received_bytes']}; output equals the full "
          "model's", flush=True)
    dist.destroy_process_group()


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "mlp.safetensors")
        save_file(MLP().state_dict(), path)
        mp.spawn(rank_main, args=(path, os.path.join(d, "init")),
                 nprocs=WORLD)


if __name__ == "__main__":
    sys.exit(main())
