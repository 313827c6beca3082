#!/usr/bin/env python3
"""What activation checkpointing costs and saves, measured in one run.

For the demo's character-level GPT: trains a few steps on 2 CPU ranks with
and without `activation-checkpointing=Block` and prints the median step
time and the measured peak arena bytes per rank, and their ratios. For a
GPT-2-medium-shaped model (24 layers, width 1024, context 1024, batch 4
per rank; too large to train here) it prints the compiler's report: peak
bytes per rank, activation bytes and predicted step time, with and without.
The machine is shared and noisy: compare the ratios of one run.

    python3 bench/activation_checkpointing.py [--steps 12] [--build build]
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WRAP = "auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw"


def compile_program(fsdp_opt, model, out, extra):
    proc = subprocess.run(
        [fsdp_opt, str(model),
         f"--fsdp-pipeline=world-size=2 {WRAP} lower=true report=true {extra}",
         "-o", str(out)], check=True, capture_output=True, text=True)
    report = proc.stdout
    number = lambda pattern: float(re.search(pattern, report).group(1))
    return {"peak": number(r"peak memory per rank: (\d+) bytes"),
            "activations": number(r"activations for backward\s+(\d+)"),
            "predicted_ms": number(r"predicted step time: ([\d.]+) ms")}


def train(fsdp_run, program, steps, metrics):
    subprocess.run([fsdp_run, str(program), "--nproc", "2", "--steps",
                    str(steps), "--data", str(REPO / "data/shakespeare.txt"),
                    "--metrics", str(metrics), "--quiet"], check=True)
    rows = [json.loads(line) for line in open(metrics)][2:]
    return {"step_s": statistics.median(r["step_time_s"] for r in rows),
            "measured_peak": max(r["peak_bytes"] for r in rows)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--build", default=str(REPO / "build"))
    args = p.parse_args()
    fsdp_opt = str(Path(args.build) / "bin/fsdp-opt")
    fsdp_run = str(Path(args.build) / "bin/fsdp-run")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        medium = tmp / "gpt2_medium.mlir"
        subprocess.run([sys.executable, "-m", "fsdp_mlir.models", "gpt2",
                        "--vocab", "50257", "--ctx", "1024", "--width", "1024",
                        "--heads", "16", "--layers", "24", "--batch", "4",
                        "-o", str(medium)], check=True,
                       env={"PYTHONPATH": str(REPO / "python")})
        rows = {}
        for name, model, run in (("char_gpt", REPO / "examples/char_gpt.mlir",
                                  True),
                                 ("gpt2_medium", medium, False)):
            for label, extra in (("plain", ""),
                                 ("checkpointed",
                                  "activation-checkpointing=Block")):
                out = tmp / f"{name}-{label}.mlir"
                row = compile_program(fsdp_opt, model, out, extra)
                if run:
                    row.update(train(fsdp_run, out, args.steps,
                                     tmp / f"{name}-{label}.jsonl"))
                rows[(name, label)] = row
        for name in ("char_gpt", "gpt2_medium"):
            plain, ckpt = rows[(name, "plain")], rows[(name, "checkpointed")]
            print(f"{name}:")
            for key in ckpt:
                print(f"  {key:14s} plain {plain[key]:14.4g}  checkpointed "
                      f"{ckpt[key]:14.4g}  ratio {ckpt[key] / plain[key]:.3f}")


if __name__ == "__main__":
    main()
