#!/usr/bin/env python3
"""What CPU offload costs and saves, measured in one run.

For the demo's character-level GPT: trains a few steps on 2 CPU ranks with
and without `cpu-offload=true` and prints the median step time and the
measured peak arena (device) bytes per rank, and their ratios; for it and
a GPT-2-medium-shaped model the report's device peak, host bytes and
predicted step time (variant_compare.py). On the CPU backend the copies
are host memcpys, so the step-time ratio is the schedule's overhead, not a
PCIe transfer's.

    python3 bench/cpu_offload.py [--steps 12] [--build build]
"""
from variant_compare import main

if __name__ == "__main__":
    main(__doc__.split("\n")[0], "offloaded", "cpu-offload=true")
