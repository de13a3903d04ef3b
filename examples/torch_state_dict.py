"""A torch module's weights through ringload: save a small model with
safetensors, then load it into a fresh one with

    model.load_state_dict(ringload.torch.load_file(path))

and check that both give the same outputs.

    PYTHONPATH=python python3 examples/torch_state_dict.py
"""
# needs: torch safetensors
import os
import tempfile

import torch
from safetensors.torch import save_file

import ringload.torch


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


def main():
    torch.manual_seed(0)
    trained = MLP()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "mlp.safetensors")
        save_file(trained.state_dict(), path)

        model = MLP()  # other random weights
        model.load_state_dict(ringload.torch.load_file(path))

    x = torch.randn(4, 16)
    with torch.no_grad():
        assert torch.equal(model(x), trained(x))
    n = sum(p.numel() for p in model.parameters())
    print(f"loaded {len(model.state_dict())} tensors ({n} parameters): "
          "outputs equal")


if __name__ == "__main__":
    main()
