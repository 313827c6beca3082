#!/usr/bin/env python3
"""Ahead of time against just in time, measured in one run.

For each model: fsdp-opt lowers it once; fsdp-compile makes step libraries
at -O0 (the default) and -O2; then
  - compile time of each library,
  - start-up, launch to first step: `--steps 0` runs everything a run does
    before its first step (launch, rendezvous, JIT compilation or dlopen,
    initialisation) and exits; median of REPEATS launches,
  - median step time of STEPS steps of the JIT, the -O0 and the -O2 library.
Prints a table of seconds and the AOT/JIT ratios.

  python3 bench/aot_startup.py [--models char_gpt,gpt2_124m] [--repeats 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("FSDP_BIN", REPO / "build" / "bin"))
# model -> (ranks, steps timed, pipeline options beyond world-size)
MODELS = {
    "char_gpt": (2, 20, "auto-wrap-policy=module-kind wrap-kinds=Block "
                        "optimizer=adamw"),
    "gpt2_124m": (1, 0, "auto-wrap-policy=module-kind wrap-kinds=Block "
                        "optimizer=adamw"),
}


def timed(cmd, env=None):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def median_step(runner, program, ranks, steps, workdir):
    metrics = workdir / "m.jsonl"
    subprocess.run([str(runner), str(program), "--nproc", str(ranks),
                    "--steps", str(steps), "--quiet", "--metrics",
                    str(metrics)], check=True)
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return statistics.median(r["step_time_s"] for r in rows[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="char_gpt,gpt2_124m")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    print(f"{'model':10} {'what':24} {'seconds':>9}")
    for name in args.models.split(","):
        ranks, steps, options = MODELS[name]
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            model = work / f"{name}.mlir"
            subprocess.run([sys.executable, "-m", "fsdp_mlir.models", name,
                            "-o", str(model)], check=True, env=env)
            lowered = work / f"{name}.lowered.mlir"
            subprocess.run([str(BIN / "fsdp-opt"), str(model), "-o",
                            str(lowered), f"--fsdp-pipeline=world-size={ranks}"
                            f" {options} lower=true"], check=True)
            rows = {}
            for level in ("0", "2"):
                lib = work / f"{name}.O{level}.so"
                rows[f"fsdp-compile -O{level}"] = timed(
                    [str(BIN / "fsdp-compile"), str(lowered), f"-O{level}",
                     "-o", str(lib)])
            runs = {"fsdp-run (JIT)": (BIN / "fsdp-run", lowered),
                    "fsdprt-run -O0": (BIN / "fsdprt-run",
                                       work / f"{name}.O0.so"),
                    "fsdprt-run -O2": (BIN / "fsdprt-run",
                                       work / f"{name}.O2.so")}
            for label, (runner, program) in runs.items():
                rows[f"start-up {label}"] = statistics.median(
                    timed([str(runner), str(program), "--nproc", str(ranks),
                           "--steps", "0", "--quiet"])
                    for _ in range(args.repeats))
            if steps:
                for label, (runner, program) in runs.items():
                    rows[f"step {label}"] = median_step(runner, program, ranks,
                                                        steps, work)
            for what, seconds in rows.items():
                print(f"{name:10} {what:24} {seconds:9.4f}")
            jit = rows["start-up fsdp-run (JIT)"]
            aot = rows["start-up fsdprt-run -O0"]
            print(f"{name:10} {'start-up AOT/JIT':24} {aot / jit:9.3f}")
            if steps:
                print(f"{name:10} {'step -O2/-O0':24} "
                      f"{rows['step fsdprt-run -O2'] / rows['step fsdprt-run -O0']:9.3f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
