"""Shared by the benchmarks that compare a program with and without one
fsdp-pipeline option (activation_checkpointing.py,
selective_checkpointing.py, cpu_offload.py, adafactor.py), in one run: the demo's
character-level GPT trained a few steps on 2 CPU ranks
(median step time, measured peak arena bytes per rank) and the compiler's
report for both it and a GPT-2-medium-shaped model (24 layers, width 1024,
context 1024, batch 4 per rank; too large to train here). The machine is
shared and noisy: compare the ratios of one run."""
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
    # A variant may be another optimizer than the plain run's AdamW.
    base = WRAP if "optimizer=" not in extra else WRAP.replace(
        " optimizer=adamw", "")
    proc = subprocess.run(
        [fsdp_opt, str(model),
         f"--fsdp-pipeline=world-size=2 {base} lower=true report=true {extra}",
         "-o", str(out)], check=True, capture_output=True, text=True)
    report = proc.stdout

    def number(pattern):
        m = re.search(pattern, report)
        return float(m.group(1)) if m else 0.0
    return {"peak": number(r"peak memory per rank: (\d+) bytes"),
            "optimizer_state": number(r"optimizer state\s+(\d+)"),
            "activations": number(r"activations for backward\s+(\d+)"),
            "host_bytes": number(r"host memory per rank (\d+) bytes"),
            "predicted_ms": number(r"predicted step time: ([\d.]+) ms")}


def train(fsdp_run, program, steps, metrics):
    subprocess.run([fsdp_run, str(program), "--nproc", "2", "--steps",
                    str(steps), "--data", str(REPO / "data/shakespeare.txt"),
                    "--metrics", str(metrics), "--quiet"], check=True)
    rows = [json.loads(line) for line in open(metrics)][2:]
    return {"step_s": statistics.median(r["step_time_s"] for r in rows),
            "measured_peak": max(r["peak_bytes"] for r in rows)}


def bench_args(description):
    """--steps and --build; returns (args, fsdp-opt, fsdp-run)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--build", default=str(REPO / "build"))
    args = p.parse_args()
    return (args, str(Path(args.build) / "bin/fsdp-opt"),
            str(Path(args.build) / "bin/fsdp-run"))


def gpt2_medium(tmp):
    """The GPT-2-medium-shaped model (report only) written into tmp."""
    medium = tmp / "gpt2_medium.mlir"
    subprocess.run([sys.executable, "-m", "fsdp_mlir.models", "gpt2",
                    "--vocab", "50257", "--ctx", "1024", "--width", "1024",
                    "--heads", "16", "--layers", "24", "--batch", "4",
                    "-o", str(medium)], check=True,
                   env={"PYTHONPATH": str(REPO / "python")})
    return medium


def main(description, label, option):
    """Prints each number plain and with `option` (named `label`)."""
    args, fsdp_opt, fsdp_run = bench_args(description)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        medium = gpt2_medium(tmp)
        rows = {}
        for name, model, run in (("char_gpt", REPO / "examples/char_gpt.mlir",
                                  True),
                                 ("gpt2_medium", medium, False)):
            for variant, extra in (("plain", ""), (label, option)):
                out = tmp / f"{name}-{variant}.mlir"
                row = compile_program(fsdp_opt, model, out, extra)
                if run:
                    row.update(train(fsdp_run, out, args.steps,
                                     tmp / f"{name}-{variant}.jsonl"))
                rows[(name, variant)] = row
        for name in ("char_gpt", "gpt2_medium"):
            plain, other = rows[(name, "plain")], rows[(name, label)]
            print(f"{name}:")
            for key in other:
                ratio = (f"{other[key] / plain[key]:.3f}" if plain[key]
                         else "-")
                print(f"  {key:14s} plain {plain[key]:14.4g}  {label} "
                      f"{other[key]:14.4g}  ratio {ratio}")
