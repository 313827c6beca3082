#!/usr/bin/env python3
"""What activation checkpointing costs and saves, measured in one run.

For the demo's character-level GPT: trains a few steps on 2 CPU ranks with
and without `activation-checkpointing=Block` and prints the median step
time and the measured peak arena bytes per rank, and their ratios. For a
GPT-2-medium-shaped model it prints the compiler's report: peak bytes per
rank, activation bytes and predicted step time, with and without
(variant_compare.py).

    python3 bench/activation_checkpointing.py [--steps 12] [--build build]
"""
from variant_compare import main

if __name__ == "__main__":
    main(__doc__.split("\n")[0], "checkpointed",
         "activation-checkpointing=Block")
