"""A JAX model sharded over a 2x4 mesh of devices, each device reading
only its own box of each weight:

    params = ringload.jax.load(path, {"w1": NamedSharding(mesh, P(None, "model")), ...})

Runs on 8 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8,
set here before jax is imported) and checks a jitted forward pass against
numpy on the file's own values.

    PYTHONPATH=python python3 examples/jax_named_sharding.py
"""
# needs: jax ml_dtypes safetensors
import os
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

import ringload.jax  # noqa: E402


def main():
    rng = np.random.default_rng(0)
    weights = {
        "w1": rng.standard_normal((32, 64)).astype(ml_dtypes.bfloat16),
        "b1": rng.standard_normal(64).astype(np.float32),
        "w2": rng.standard_normal((64, 16)).astype(ml_dtypes.bfloat16),
    }
    # Auto axes: XLA chooses the layout of the products (jit's default)
    mesh = jax.make_mesh((2, 4), ("data", "model"),
                         axis_types=(AxisType.Auto, AxisType.Auto))
    shardings = {
        "w1": NamedSharding(mesh, P(None, "model")),   # columns over model
        "b1": NamedSharding(mesh, P("model")),
        "w2": NamedSharding(mesh, P("model", None)),   # rows over model
    }
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "mlp.safetensors")
        save_file(weights, path)
        params = ringload.jax.load(path, shardings)

    for name, a in params.items():
        shard = a.addressable_shards[0]
        print(f"{name}: {a.dtype} {a.shape}, {len(a.addressable_shards)} "
              f"shards of {shard.data.shape} ({a.sharding.spec})")

    @jax.jit
    def forward(p, x):
        h = jnp.maximum(x @ p["w1"].astype(jnp.float32) + p["b1"], 0)
        return h @ p["w2"].astype(jnp.float32)

    x = rng.standard_normal((8, 32)).astype(np.float32)
    got = np.asarray(forward(params, x))
    h = np.maximum(x @ weights["w1"].astype(np.float32) + weights["b1"], 0)
    want = h @ weights["w2"].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    print("forward pass on the sharded weights equals numpy's")


if __name__ == "__main__":
    main()
