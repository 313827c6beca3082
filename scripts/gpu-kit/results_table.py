#!/usr/bin/env python3
"""The GPT-2 124M table of a lease's results.json (gpu-lease.sh's), in
Markdown, as the closing notes and docs/GPU-Results.md quote it:

    python3 scripts/gpu-kit/results_table.py OUT/results.json

One row per run of ours and of PyTorch's (median step time, tokens/s, MFU,
peak memory: ours the device's high-water mark, with the arena, the GEMM
workspace and the per-call scratch reserve it holds), then the ratios the
CUDA issue's goals are stated in: bf16 step time against PyTorch eager bf16
and torch.compile, peak memory against torch.compile's; then the same at
llm.c's batch (64 x 1024: the kit's b64 runs) with issue 41's bar, 500k
tokens/s.
"""
import json
import sys

CONTEXT = 1024
BAR_TOKENS_PER_S = 500e3  # issue 41: GPT-2 124M on one H100 (llm.c ~460k)
# 6 N + 12 L T d FLOPs per token (N = 124M parameters, L = 12 layers,
# T = 1024, d = 768): the forward and backward of the weights and of
# attention's two products.
FLOPS_PER_TOKEN = 6 * 124.4e6 + 12 * 12 * 1024 * 768
PEAK_FLOPS = 989e12  # H100 SXM, dense bf16

OURS = [("bf16", "ours bf16, the step as one CUDA graph"),
        ("bf16-fused", "ours bf16, fuse-add-layer-norm + fuse-bias-gelu + "
                       "fused-optimizer"),
        ("bf16-lean", "ours bf16, lean norm kernels "
                      "(FSDPRT_NORM_KERNELS=lean)"),
        ("bf16-leanxent", "ours bf16, lean cross-entropy kernels "
                          "(FSDPRT_XENT_KERNELS=lean)"),
        ("bf16-eager", "ours bf16, eager (--cuda-graphs off)"),
        ("bf16-nondet", "ours bf16, cuDNN's non-deterministic attention "
                        "backward"),
        ("bf16-nostats", "ours bf16, without kept attention statistics"),
        ("bf16-unpadded", "ours bf16, lm head unpadded (pad-vocab=0)"),
        ("bf16-nocudnn", "ours bf16, attention on cuBLAS (FSDPRT_CUDNN=0)"),
        ("f32", "ours f32")]
PYTORCH = [("eager_f32", "PyTorch eager f32"),
           ("eager_bf16", "PyTorch eager bf16 autocast + SDPA"),
           ("compile_bf16", "PyTorch torch.compile bf16")]


def gb(n):
    return f"{n / 1e9:.2f} GB" if n else "-"


def ours_memory(run):
    """The device's mark, and what it holds: the arena's high-water mark,
    the GEMM workspace and the per-call scratch reserve."""
    parts = [f"arena {gb(run.get('peak_bytes'))}"]
    if run.get("gemm_workspace_bytes") is not None:
        parts.append(f"workspace {run['gemm_workspace_bytes'] / 2**20:.0f} MiB")
    if run.get("scratch_reserve_bytes") is not None:
        parts.append(f"scratch {run['scratch_reserve_bytes'] / 1e6:.0f} MB")
    return f"{gb(run.get('device_peak_bytes'))} ({', '.join(parts)})"


def row(label, seconds, memory, batch=8):
    tokens = batch * CONTEXT / seconds
    mfu = tokens * FLOPS_PER_TOKEN / PEAK_FLOPS
    return (f"| {label} | {seconds:.4f} s | {tokens / 1e3:.0f}k | "
            f"{100 * mfu:.1f}% | {memory} |")


def table(results):
    lines = ["| | step time | tokens/s | MFU | peak memory |",
             "|---|---|---|---|---|"]
    for key, label in OURS:
        run = results.get(f"gpt2_124m_{key}")
        if run:
            lines.append(row(label, run["median_step_s"], ours_memory(run)))
    torch = results.get("torch_gpt2_124m") or {}
    for key, label in PYTORCH:
        if key in torch:
            lines.append(row(label, torch[key]["median_step_s"],
                             gb(torch[key]["peak_bytes"])))
    ratios = [ratio_line("bf16 step time", results.get("gpt2_124m_bf16"),
                         torch)]
    ours64 = results.get("gpt2_124m_bf16-b64")
    torch64 = results.get("torch_gpt2_124m_b64") or {}
    if ours64:
        lines.append(row("ours bf16, batch 64, one CUDA graph",
                         ours64["median_step_s"], ours_memory(ours64), 64))
    lean64 = results.get("gpt2_124m_bf16-b64lean")
    if lean64:
        lines.append(row("ours bf16, batch 64, lean norm + cross-entropy",
                         lean64["median_step_s"], ours_memory(lean64), 64))
    if "compile_bf16" in torch64:
        lines.append(row("PyTorch torch.compile bf16, batch 64",
                         torch64["compile_bf16"]["median_step_s"],
                         gb(torch64["compile_bf16"]["peak_bytes"]), 64))
    ratios.append(ratio_line("batch 64 step time", ours64, torch64))
    if ours64:
        tokens = 64 * CONTEXT / ours64["median_step_s"]
        ratios.append(f"batch 64: {tokens / 1e3:.0f}k tokens/s, "
                      f"{tokens / BAR_TOKENS_PER_S:.2f}x issue 41's bar "
                      f"({BAR_TOKENS_PER_S / 1e3:.0f}k)")
    base, lean = (results.get(f"gpt2_124m_{k}")
                  for k in ("bf16", "bf16-leanxent"))
    if base and lean:
        ratios.append(f"lean cross-entropy kernels: "
                      f"{lean['median_step_s'] / base['median_step_s']:.3f}x "
                      f"the default kernels' step time")
    ratios = [r for r in ratios if r]
    return "\n".join(lines + ([""] + ratios if ratios else []))


def ratio_line(what, ours, torch):
    """Ours against PyTorch eager and torch.compile at the same batch,
    whichever ran (None: neither, or no run of ours)."""
    if not ours:
        return None
    step, parts = ours["median_step_s"], []
    if "eager_bf16" in torch:
        parts.append(f"{step / torch['eager_bf16']['median_step_s']:.2f}x "
                     f"PyTorch eager's")
    if "compile_bf16" in torch:
        parts.append(f"{step / torch['compile_bf16']['median_step_s']:.2f}x "
                     f"torch.compile's")
    if not parts:
        return None
    line = f"{what}: {', '.join(parts)}"
    if "compile_bf16" in torch and ours.get("device_peak_bytes"):
        line += (f"; peak memory "
                 f"{ours['device_peak_bytes'] / torch['compile_bf16']['peak_bytes']:.2f}"
                 f"x torch.compile's")
    return line


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: results_table.py RESULTS_JSON")
    with open(sys.argv[1]) as f:
        print(table(json.load(f)))
