#!/usr/bin/env python3
"""What sharding costs and buys, measured with fsdp-run in one run.

Trains the same model (default: the demo's character-level GPT) for a few
steps under several configurations and prints, per configuration, the mean
step time, tokens/s, the exposed communication (time the compute stream
waited for all-gathers / reduce-scatters) and the measured peak arena bytes
per rank, then ratios against the 1-rank no-shard baseline and full-shard
against no-shard (DDP) at the same rank count. The machine is shared and
noisy: compare ratios from one run, not absolute times across runs.

    python3 bench/fsdp_run_scaling.py [--model examples/char_gpt.mlir]
        [--steps 20] [--ranks 2] [--build build]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def compile_program(fsdp_opt, model, out, world_size, strategy, extra):
    opts = [f"world-size={world_size}", f"sharding-strategy={strategy}",
            "optimizer=adamw", "lower=true"] + extra
    subprocess.run([fsdp_opt, model, f"--fsdp-pipeline={' '.join(opts)}",
                    "-o", out], check=True)


def run(fsdp_run, program, nproc, steps, data, metrics, threads):
    subprocess.run([fsdp_run, program, "--nproc", str(nproc), "--steps",
                    str(steps), "--data", data, "--metrics", metrics,
                    "--rank-threads", str(threads), "--quiet"], check=True)
    rows = [json.loads(line) for line in open(metrics)]
    rows = rows[2:] or rows  # the first steps warm caches and the JIT'd code
    return {
        "step_s": statistics.median(r["step_time_s"] for r in rows),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in rows),
        "exposed_s": statistics.median(r["comm_exposed_s"] for r in rows),
        "peak_bytes": max(r["peak_bytes"] for r in rows),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(REPO / "examples/char_gpt.mlir"))
    p.add_argument("--data", default=str(REPO / "data/shakespeare.txt"))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--build", default=str(REPO / "build"))
    args = p.parse_args()
    fsdp_opt = str(Path(args.build) / "bin/fsdp-opt")
    fsdp_run = str(Path(args.build) / "bin/fsdp-run")
    wrap = (["auto-wrap-policy=module-kind", "wrap-kinds=Block"]
            if "gpt" in Path(args.model).name else [])
    n = args.ranks
    # (label, world size, strategy, extra options, ranks, threads per rank):
    # the baseline gets one thread, like each rank of the N-rank runs.
    configs = [
        ("1 rank, no-shard (grad-accum N)", 1, "no-shard",
         wrap + [f"grad-accum-steps={n}"], 1, 1),
        (f"{n} ranks, no-shard (DDP)", n, "no-shard", wrap, n, 1),
        (f"{n} ranks, full-shard", n, "full-shard", wrap, n, 1),
        (f"{n} ranks, full-shard, forward prefetch", n, "full-shard",
         wrap + ["forward-prefetch=true"], n, 1),
        (f"{n} ranks, shard-grad-op", n, "shard-grad-op", wrap, n, 1),
    ]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, world, strategy, extra, nproc, threads) in enumerate(configs):
            program = f"{tmp}/p{i}.mlir"
            compile_program(fsdp_opt, args.model, program, world, strategy, extra)
            results[label] = run(fsdp_run, program, nproc, args.steps,
                                 args.data, f"{tmp}/m{i}.jsonl", threads)

    base = results[configs[0][0]]
    ddp = results[configs[1][0]]
    print(f"model {Path(args.model).name}, {args.steps} steps, medians after 2 warm-up steps")
    print(f"{'configuration':42s} {'step s':>8s} {'tok/s':>9s} {'exposed':>8s} "
          f"{'peak/rank':>11s} {'tok/s vs 1':>10s} {'peak vs DDP':>11s}")
    for label, r in results.items():
        print(f"{label:42s} {r['step_s']:8.3f} {r['tokens_per_s']:9.0f} "
              f"{r['exposed_s'] / r['step_s']:7.1%} {r['peak_bytes']:11d} "
              f"{r['tokens_per_s'] / base['tokens_per_s']:10.2f} "
              f"{r['peak_bytes'] / ddp['peak_bytes']:11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
