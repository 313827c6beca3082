#!/usr/bin/env python3
"""How fsdp-opt's time grows with depth: the whole `--fsdp-pipeline ...
lower=true` on a GPT-3-175B-shaped model (width 12288, 96 heads, context
2048, vocabulary 50257, batch 1) at 1024 ranks, for 24 / 48 / 96 layers in
one run (median of --repeats), with the time of convert-fsdp-to-rt alone
(--mlir-timing) and the ratios between depths. A benchmark, not a test.

  python3 bench/lowering_scaling.py [--layers 24,48,96] [--repeats 3]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FSDP_OPT = Path(os.environ.get("FSDP_OPT", REPO / "build" / "bin" / "fsdp-opt"))
PIPELINE = ("--fsdp-pipeline=world-size=1024 auto-wrap-policy=module-kind "
            "wrap-kinds=Block optimizer=adamw lower=true")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="24,48,96")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for layers in map(int, args.layers.split(",")):
            model = Path(tmp) / f"gpt3_{layers}.mlir"
            subprocess.run([sys.executable, "-m", "fsdp_mlir.models", "gpt2",
                            "--vocab", "50257", "--ctx", "2048", "--width",
                            "12288", "--heads", "96", "--layers", str(layers),
                            "--batch", "1", "-o", str(model)],
                           check=True, env=env)
            walls, lowering = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                proc = subprocess.run(
                    [str(FSDP_OPT), str(model), PIPELINE, "-o", os.devnull,
                     "--mlir-timing"], check=True, capture_output=True,
                    text=True)
                walls.append(time.perf_counter() - start)
                m = re.search(r"([0-9.]+) \(\s*[0-9.]+%\)\s+ConvertFSDPToRTPass",
                              proc.stderr)
                lowering.append(float(m.group(1)) if m else float("nan"))
            rows.append((layers, statistics.median(walls),
                         statistics.median(lowering)))
    print(f"{'layers':>6} {'fsdp-opt s':>11} {'convert-fsdp-to-rt s':>21} "
          f"{'x previous':>10}")
    for i, (layers, wall, lower) in enumerate(rows):
        ratio = f"{wall / rows[i - 1][1]:10.2f}" if i else f"{'':>10}"
        print(f"{layers:6d} {wall:11.3f} {lower:21.3f} {ratio}")


if __name__ == "__main__":
    main()
