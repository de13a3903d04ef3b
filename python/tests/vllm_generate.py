"""vllm_generate.py MODEL_DIR: generates greedily with vLLM's LLM from
the same prompt with load_format "safetensors" and "ringload"; exits 0
when the tokens are equal, 1 when not, 77 (skip) with the reason on the
last line when this vLLM build cannot run the model here (test_vllm.py)."""
import os
import sys

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")


def generate(model, load_format):
    from vllm import LLM, SamplingParams
    llm = LLM(model=model, load_format=load_format, skip_tokenizer_init=True,
              enforce_eager=True, max_model_len=64, dtype="bfloat16",
              model_loader_extra_config={"staging_budget": "128K"}
              if load_format == "ringload" else {})
    out = llm.generate([{"prompt_token_ids": [1, 5, 9, 42, 7]}],
                       SamplingParams(max_tokens=12, temperature=0.0,
                                      detokenize=False))
    return list(out[0].outputs[0].token_ids)


def main():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", ""))
    import ringload.vllm
    ringload.vllm.register()
    try:
        want = generate(sys.argv[1], "safetensors")
    except Exception as e:  # noqa: BLE001 - the reason of the skip
        print(f"vLLM {__import__('vllm').__version__} cannot generate on "
              f"this machine's platform: {type(e).__name__}: "
              f"{str(e).splitlines()[0][:200] if str(e) else ''}")
        return 77
    got = generate(sys.argv[1], "ringload")
    print("safetensors", want)
    print("ringload   ", got)
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main())
