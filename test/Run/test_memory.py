"""The pre-launch memory estimate against the measured arena high-water.

For each example and sharding strategy (2 ranks; hybrid-shard 2x2 on 4), the
largest peak_bytes fsdp-run reports over the steps (the maximum over ranks of
the arena's high-water mark) must lie in [0.95, 1] x the program's
estimate_bytes: the estimate is an upper bound, and a tight one. The table of
the numbers is printed (pytest -s) and added to the terminal summary.
"""
import pytest

from conftest import MODELS, program_info

STRATEGIES = ("full-shard", "shard-grad-op", "no-shard", "hybrid-shard")
STEPS = 3
HEADER = (f"{'model':<15} {'strategy':<14} {'ranks':>5} {'estimate_bytes':>14} "
          f"{'peak_bytes':>11} {'peak/est':>8}")


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("model", MODELS)
def test_peak_within_estimate(fsdp, report_lines, model, strategy):
    ranks = 4 if strategy == "hybrid-shard" else 2
    program = fsdp.compile(model, world_size=ranks, strategy=strategy)
    info = program_info(program)
    estimate = info["estimate_bytes"]
    run = fsdp.run(program, nproc=ranks, steps=STEPS, save=False)
    assert len(run.metrics) == STEPS
    peak = max(m["peak_bytes"] for m in run.metrics)
    row = (f"{model:<15} {strategy:<14} {ranks:>5} {estimate:>14} {peak:>11} "
           f"{peak / estimate:>8.4f}")
    if not report_lines:
        report_lines.append(HEADER)
    report_lines.append(row)
    print("\n" + HEADER + "\n" + row)
    assert peak <= estimate, f"measured peak above the estimate: {row}"
    assert peak >= 0.95 * estimate, f"estimate not tight: {row}"
