#!/usr/bin/env python3
"""PyTorch's time for the GPT-2 124M training step the kit runs with
fsdprt-run (batch 8 x context 1024, AdamW, tied lm_head), on one GPU:
eager f32, eager bf16 autocast (SDPA picks its fused kernel), and
torch.compile bf16. The model is the tests' torch oracle
(torch_reference.GPT, our parameter names). Writes one JSON object.

  python3 torch_gpt2_step.py --out torch.json [--steps 20] [--warmup 5]
                             [--batch 8]
"""
import argparse
import json
import time

import torch

from torch_reference import GPT

PRESET = dict(vocab=50257, ctx=1024, width=768, heads=12, layers=12)


def gpt2_init(model):
    """GPT-2's initialisation (weights N(0, 0.02), biases 0, LayerNorm 1 and
    0), as the compiled GPT-2 step's: PyTorch's module defaults (N(0, 1)
    embeddings) started the loss at ~83 instead of ln(50257) = 10.8. Step
    time and memory do not depend on it."""
    for module in model.modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
            torch.nn.init.normal_(module.weight, 0.0, 0.02)
        if isinstance(module, torch.nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)


def time_step(mode, batch, steps, warmup):
    torch.manual_seed(0)
    model = GPT(**PRESET).cuda()
    gpt2_init(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    step_model = torch.compile(model) if mode == "compile_bf16" else model
    idx = torch.randint(0, PRESET["vocab"], (batch, PRESET["ctx"]),
                        device="cuda")
    targets = torch.randint(0, PRESET["vocab"], (batch, PRESET["ctx"]),
                            device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16,
                            enabled=mode != "eager_f32"):
            loss = step_model(idx, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    times.sort()
    return {"median_step_s": times[len(times) // 2],
            "tokens_per_s": batch * PRESET["ctx"] / times[len(times) // 2],
            "peak_bytes": torch.cuda.max_memory_allocated(),
            "last_loss": float(loss)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=8,
                        help="sequences per step (the kit's step: 8; llm.c: 64)")
    parser.add_argument("--modes", default="eager_f32,eager_bf16,compile_bf16")
    args = parser.parse_args()
    # f32 means f32: no TF32 in matmuls, as our cuBLAS calls.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
              "batch": args.batch, **PRESET}
    for mode in args.modes.split(","):
        try:
            result[mode] = time_step(mode, args.batch, args.steps, args.warmup)
        except Exception as e:  # one mode failing must not hide the others
            result[mode] = {"error": f"{type(e).__name__}: {e}"}
        print(mode, result[mode], flush=True)
        torch.cuda.empty_cache()
        # Written after every mode: a part timeout keeps the modes done.
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
