"""vllm_tp_worker.py RANK PORT MODEL OTHER MISSING OUT: one of 2 ranks of vLLM's
tensor parallelism on gloo (test_vllm_tp.py). Loads vLLM's Llama with
load_format "safetensors" and "ringload" (TP 2), then the error cases of
read once; writes what it saw to OUT (JSON)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vllm_util as vu  # noqa: E402  (sets VLLM_TARGET_DEVICE first)


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - reported to the test
        return f"{type(e).__name__}: {e}"
    return None


def main():
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    model, other, missing, out = sys.argv[3:7]
    import torch
    import ringload.vllm as rv
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader
    rv.register()
    res = {}
    states = {}
    for fmt, extra in (("safetensors", {}),
                       ("ringload", {"staging_budget": "64K"})):
        vc = vu.vllm_config(model, fmt, extra, tp=2)
        with set_current_vllm_config(vc):
            vu.init_dist(rank, 2, port)
            loader = get_model_loader(vc.load_config)
            m = loader.load_model(vllm_config=vc, model_config=vc.model_config)
            states[fmt] = {k: v.clone() for k, v in m.state_dict().items()}
            res[fmt + "_stats"] = {k: v for k, v in getattr(
                loader, "rl_stats", {}).items()
                if k in ("bytes_read", "bytes_needed", "sent_bytes",
                         "received_bytes")}
    res["differences"] = vu.same_tensors(states["safetensors"],
                                         states["ringload"])
    res["shard_shape"] = list(states["ringload"][
        "model.layers.0.mlp.down_proj.weight"].shape)

    group = rv.tp_group(torch.device("cpu"))
    files = sorted(os.path.join(model, f) for f in os.listdir(model)
                   if f.endswith(".safetensors"))

    def run(folder, extra):
        opts, _, _ = rv.parse_extra_config(extra, folder)
        fs = [os.path.join(folder, os.path.basename(f)) for f in files
              if os.path.exists(os.path.join(folder, os.path.basename(f)))]
        return sum(1 for _ in rv.weights(folder, fs, opts, group=group))
    res["pairs"] = run(model, {})
    # rank 1 expects a wrong SHA-256 of every file: whichever it reads fails
    bad = {os.path.basename(f): "0" * 64 for f in files} if rank == 1 else None
    res["checksum"] = _error(lambda: run(model, {"sha256": bad} if bad
                                         else {}))
    res["after_error"] = run(model, {})  # the group is still usable
    res["headers"] = _error(lambda: run(other if rank == 1 else model, {}))
    res["missing"] = _error(lambda: run(missing if rank == 1 else model, {}))
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
