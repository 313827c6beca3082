#!/usr/bin/env python3
"""Generation tokens/s: the KV-cache decode step against the recompute path.

A character-level GPT-2 (vocab 128, context 128, width 128, 4 heads, 4
layers, one row per rank) on 2 CPU ranks (Gloo, blocks as units), the same
seeded weights in every program: the eval program recomputes the whole
window for every new token (today's --generate, full-shard), the decode
step (gpt2(kv_cache=True)) computes each position once against the keys
and values cached in its arena, with its units sharded (each step
all-gathers them, as the recompute path does) or kept whole on every rank
(memory-budget's choice when they fit: no collective per token). Greedy, a 1-token prompt continued to the
context's end; tokens/s over the generation loop alone (the runner's
"seconds": no start-up, compilation or weight initialisation), the ratios,
and the cache's bytes from the report. All paths must draw the same tokens.

    python3 bench/generate.py [--build build]
"""
import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))
from fsdp_mlir import driver  # noqa: E402
from fsdp_mlir.models import gpt2  # noqa: E402

SHAPE = dict(vocab=128, ctx=128, width=128, heads=4, layers=4, batch=1)
RANKS = 2
PROMPT = [10]
NEW_TOKENS = SHAPE["ctx"]  # 1 + 128 - 1 positions: the cache's length


def generate(program, fsdp_run):
    result = driver.run(program, nproc=RANKS, seed=1, generate=NEW_TOKENS,
                        temperature=0, quiet=False, fsdp_run=fsdp_run,
                        prompt_ids=",".join(map(str, PROMPT)), timeout=1200)
    row = result.metrics[0]
    return row["tokens"], row["seconds"], result.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=str(REPO / "build"))
    args = p.parse_args()
    bin_dir = Path(args.build) / "bin"
    os.environ["FSDP_OPT"] = str(bin_dir / "fsdp-opt")  # driver.compile's
    fsdp_run = str(bin_dir / "fsdp-run")
    # The third: memory-budget's choice for a decode step whose whole
    # weights fit (the report's "kept whole across steps"), laid out
    # no-shard.
    variants = (("recompute", False, "full-shard"),
                ("kv cache", True, "full-shard"),
                ("kv cache", True, "kept whole"))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, cached, strategy) in enumerate(variants):
            budget = {"memory_budget": "1GiB"} if strategy == "kept whole" \
                else {}
            program = driver.compile(gpt2(kv_cache=cached, **SHAPE),
                                     Path(tmp) / f"{i}.mlir",
                                     world_size=RANKS, wrap_kinds=["Block"],
                                     mode="eval", **budget)
            results.append(generate(program, fsdp_run))
    tokens = [r[0] for r in results]
    if any(t != tokens[0] for t in tokens):
        sys.exit("the paths drew different tokens:\n"
                 + "\n".join(map(str, tokens)))
    print(f"GPT-2 {SHAPE}, {RANKS} CPU ranks (Gloo), {NEW_TOKENS} new "
          "tokens, greedy (the same tokens on every path)")
    print(f"{'path':<10} {'sharding':<11} {'collectives/token':>17} "
          f"{'seconds':>8} {'tokens/s':>9}")
    for (name, _, strategy), (_, seconds, report) in zip(variants, results):
        gathers = re.search(r"^collectives per step: (\d+)", report,
                            re.M).group(1)
        print(f"{name:<10} {strategy:<11} {gathers:>17} {seconds:8.3f} "
              f"{NEW_TOKENS / seconds:9.1f}")
    recompute_s = results[0][1]
    for (name, _, strategy), (_, seconds, _) in zip(variants[1:],
                                                    results[1:]):
        print(f"{name} ({strategy}) / recompute tokens/s: "
              f"{recompute_s / seconds:.1f}x")
    print(re.search(r"^kv cache: .*$", results[1][2], re.M).group(0))


if __name__ == "__main__":
    main()
