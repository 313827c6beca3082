#!/usr/bin/env python3
"""What memory-budget= chooses, against whole-unit checkpointing.

For budgets from whole-unit checkpointing's peak (every Block recomputed
whole) up to the plain program's: the units the compiler chooses to
recompute (none / selective / whole), the peak and the predicted recompute
time per step, beside whole-unit checkpointing's. A GPT-2-medium-shaped
model (24 layers, width 1024, context 1024, batch 4 per rank) through the
report only (peak: the planned peak); the demo's character-level GPT
lowered (peak: the arena plan, which a lowered program's budget bounds)
and trained on 2 CPU ranks (measured arena peak per rank, median step
time).

    python3 bench/memory_budget.py [--steps 12] [--build build]
"""
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from variant_compare import REPO, WRAP, bench_args, gpt2_medium, train

sys.path.insert(0, str(REPO / "python"))
from fsdp_mlir.driver import program_info  # noqa: E402

FRACTIONS = (0.0, 0.25, 0.5, 0.75)  # of the way from whole-unit to plain


def compile_program(fsdp_opt, model, out, extra, lower):
    proc = subprocess.run(
        [fsdp_opt, str(model),
         f"--fsdp-pipeline=world-size=2 {WRAP} lower={str(lower).lower()} "
         f"report=true {extra}", "-o", str(out)], check=True,
        capture_output=True, text=True)
    report = proc.stdout

    def number(pattern):
        m = re.search(pattern, report)
        return float(m.group(1)) if m else 0.0
    choice = Counter(re.findall(r"^  recompute \S+: (none|selective|whole "
                                r"unit)$", report, re.M))
    peak = (program_info(out)["estimate_bytes"] if lower else
            number(r"peak memory per rank: (\d+) bytes"))
    return {"peak": peak,
            "compute_ms": number(r"= compute ([\d.]+) ms"),
            "recompute_ms": number(r"predicted recompute of the choice ([\d.]+) ms"),
            "evaluations": number(r"; (\d+) choices evaluated"),
            "choice": ", ".join(f"{n} {p}" for p, n in sorted(choice.items()))}


def main():
    args, fsdp_opt, fsdp_run = bench_args(__doc__.split("\n")[0])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        medium = gpt2_medium(tmp)
        for name, model, run in (("char_gpt", REPO / "examples/char_gpt.mlir",
                                  True),
                                 ("gpt2_medium", medium, False)):
            rows = {}
            for variant, extra in (("plain", ""),
                                   ("whole", "activation-checkpointing=Block")):
                out = tmp / f"{name}-{variant}.mlir"
                rows[variant] = compile_program(fsdp_opt, model, out, extra,
                                                run)
                rows[variant]["program"] = out
            plain, whole = rows["plain"], rows["whole"]
            whole["recompute_ms"] = whole["compute_ms"] - plain["compute_ms"]
            for f in FRACTIONS:
                budget = int(whole["peak"] + f * (plain["peak"] - whole["peak"]))
                out = tmp / f"{name}-budget-{f}.mlir"
                rows[f"budget {f:.2f}"] = row = compile_program(
                    fsdp_opt, model, out, f"memory-budget={budget}", run)
                row["budget"] = budget
                row["program"] = out
            if run:
                for i, row in enumerate(rows.values()):
                    row.update(train(fsdp_run, row["program"], args.steps,
                                     tmp / f"{name}-{i}.jsonl"))
            kind = "arena plan" if run else "planned peak"
            print(f"{name} ({kind}): plain {plain['peak']:.0f} bytes, whole-unit "
                  f"peak {whole['peak']:.0f} bytes, whole-unit predicted "
                  f"recompute {whole['recompute_ms']:.1f} ms per step")
            for variant, row in rows.items():
                line = (f"  {variant:12s} budget {row.get('budget', 0):>12} "
                        f"peak {row['peak']:>12.0f} recompute "
                        f"{row['recompute_ms']:8.1f} ms")
                if "budget" in row:
                    line += (f" ({row['recompute_ms'] / whole['recompute_ms']:.3f}"
                             f" of whole-unit's; {row['choice']}; "
                             f"{row['evaluations']:.0f} evaluations)")
                if run:
                    line += (f" measured peak {row['measured_peak']:>10} "
                             f"step {row['step_s'] * 1e3:.1f} ms")
                print(line)


if __name__ == "__main__":
    main()
