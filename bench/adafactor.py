#!/usr/bin/env python3
"""What Adafactor costs and saves against AdamW, in one run.

The same programs with `optimizer=adafactor` instead of AdamW: Adafactor
keeps a factored second moment (rows + columns per matrix, whole on every
rank) instead of AdamW's two shard-sized moments, and all-reduces two small
vectors per unit per step. For the demo's character-level GPT: median step
time and measured peak arena bytes per rank on 2 CPU ranks; for a
GPT-2-medium-shaped model the compiler's report (optimizer state, peak).

    python3 bench/adafactor.py [--steps 12] [--build build]
"""
from variant_compare import main

if __name__ == "__main__":
    main(__doc__.split("\n")[0], "adafactor", "optimizer=adafactor")
