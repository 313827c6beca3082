#!/usr/bin/env python3
"""A GPU run against the CPU backend's reference: losses (metrics JSON
lines) and final weights (full safetensors checkpoints), with the bounds of
test/Run (f32: loss rtol 1e-5, weights max|a-r| <= 1e-5 max|r| + atol by
optimizer) or bf16's (2e-2 on losses and on weights, relative to each
tensor's largest value); for AdamW the weight bound is 2 * sum(lr) (see
main). Reads safetensors itself (torch only: the GPU
image has no safetensors package). Prints one JSON object; exit 1 when a
bound is exceeded.

  compare_reference.py --dtype f32|bf16 --optimizer adamw|sgd \
      RUN.jsonl REF.jsonl RUN.safetensors REF.safetensors
"""
import argparse
import json
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
          "I32": torch.int32, "I64": torch.int64}
# test/Run/test_parity.py: (loss rtol, weight rtol, weight atol) by dtype and
# optimizer.
BOUNDS = {("f32", "sgd"): (1e-5, 1e-5, 0.0), ("f32", "adamw"): (1e-5, 1e-5, 1e-5),
          ("bf16", "sgd"): (2e-2, 2e-2, 0.0), ("bf16", "adamw"): (2e-2, 2e-2, 1e-5)}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]) if raw else \
            torch.empty(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def lrs(path):
    with open(path) as f:
        return [json.loads(line)["lr"] for line in f if line.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("f32", "bf16"), required=True)
    parser.add_argument("--optimizer", choices=("sgd", "adamw"), required=True)
    parser.add_argument("run_metrics")
    parser.add_argument("ref_metrics")
    parser.add_argument("run_weights")
    parser.add_argument("ref_weights")
    args = parser.parse_args()
    loss_rtol, rtol, atol = BOUNDS[(args.dtype, args.optimizer)]
    run, ref = losses(args.run_metrics), losses(args.ref_metrics)
    worst_loss = max((abs(a - b) / abs(b) for a, b in zip(run, ref)),
                     default=float("inf"))
    problems = []
    if len(run) != len(ref):
        problems.append(f"{len(run)} losses, reference has {len(ref)}")
    if not worst_loss <= loss_rtol:
        problems.append(f"loss relative difference {worst_loss:.3g} > {loss_rtol}")
    # The kit's references hold the parameters only (no optimizer state).
    a, r = (read_safetensors(args.run_weights),
            read_safetensors(args.ref_weights))
    a = {k: v for k, v in a.items() if not k.startswith("optim.")}
    if sorted(a) != sorted(r):
        problems.append("the checkpoints hold different tensors")
    # AdamW divides each update by the gradient's running RMS, so an element
    # whose gradient is rounding noise (the backends sum in other orders)
    # moves by up to lr a step in either direction: its bound is what the
    # optimizer can move two runs apart (2 * sum of lr), and the share of
    # elements outside the tight bound is reported. SGD is linear in the
    # gradient: the tight bound holds for every element.
    adam_limit = 2 * sum(lrs(args.run_metrics))
    worst_weight, worst_name, worst_outside = 0.0, "", 0.0
    for name in sorted(set(a) & set(r)):
        if a[name].dtype in (torch.int32, torch.int64):
            continue
        x, y = a[name].double(), r[name].double()
        if not y.numel():
            continue
        scale = y.abs().max().item()
        err = (x - y).abs()
        diff = err.max().item()
        outside = (err > rtol * scale + atol).double().mean().item()
        rel = diff / scale if scale else diff
        if rel > worst_weight:
            worst_weight, worst_name = rel, name
        worst_outside = max(worst_outside, outside)
        if args.optimizer == "adamw" and diff > adam_limit:
            problems.append(f"{name}: max |diff| {diff:.3g} > 2 * sum(lr) = "
                            f"{adam_limit:.3g}")
        elif args.optimizer == "sgd" and diff > rtol * scale + atol:
            problems.append(f"{name}: max |diff| {diff:.3g} against max |ref| "
                            f"{scale:.3g}")
    print(json.dumps({"ok": not problems, "losses": run, "reference": ref,
                      "worst_loss_rel": worst_loss,
                      "worst_weight_rel": worst_weight,
                      "worst_weight": worst_name,
                      "worst_share_outside_tight_bound": worst_outside,
                      "problems": problems[:10]}))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
