#!/usr/bin/env python3
"""What selective activation checkpointing costs and saves, in one run.

As activation_checkpointing.py, with `activation-checkpointing-policy=
selective`: each Block's linears and attention keep their results and only
the cheap ops are recomputed. For the demo's character-level GPT: median
step time and measured peak arena bytes per rank on 2 CPU ranks; for a
GPT-2-medium-shaped model the compiler's report.

    python3 bench/selective_checkpointing.py [--steps 12] [--build build]
"""
from variant_compare import main

if __name__ == "__main__":
    main(__doc__.split("\n")[0], "selective",
         "activation-checkpointing=Block activation-checkpointing-policy=selective")
