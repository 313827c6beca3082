"""reshard_after_forward = N against PyTorch FSDP2 (ZeRO++ hpZ).

`unit<reshard_after_forward = 2>` at 4 ranks: after the forward each rank
keeps 1/2 of a unit's gathered parameters (its chunk in its pair of
consecutive ranks, FSDP2's mesh.view(-1, 2)) instead of freeing them, and
the backward gathers over that pair instead of all 4 ranks. The same math
as reshard_after_forward=True (bit for bit), and FSDP2 with
fully_shard(..., reshard_after_forward=2) on gloo at the oracle's bounds;
the report shows the post-forward shards it keeps and the smaller groups of
the backward gathers.

Run: PYTHONPATH=python:python/tests python3 -m pytest -q python/tests/test_torch_oracle_reshard.py
"""
from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from test_torch_oracle import (MODELS, assert_losses_match,  # noqa: E402
                               assert_state_matches, datasets,
                               initial_weights, workdir)
from test_torch_oracle_accum import (MLP_FULL_BYTES, _skip_without_fsdp2,  # noqa: E402
                                     collectives, fsdp2_accum, peak,
                                     train_ours)

RANKS = 4


def mlp_with_units(reshard):
    """examples/mlp.mlir with fc1..fc3 units reshard_after_forward=`reshard`
    (the root is a unit with the strategy's choice: kept)."""
    text = MODELS["mlp"][0].read_text()
    value = str(reshard).lower()
    marked = text.replace('kind "Linear" {',
                          f'kind "Linear" unit<reshard_after_forward = '
                          f'{value}> {{')
    assert marked.count("unit<") == 3
    return marked


def backward_gathers(report):
    """(unit, group annotation) of the report's backward all-gathers."""
    return re.findall(r"all_gather +(\w+) +backward .*?all-gather(.*)",
                      report)


@pytest.mark.parametrize("micro_batches", [1, 2])
def test_reshard_to_pairs_matches_true_and_fsdp2(
        micro_batches, workdir, datasets, initial_weights):
    _skip_without_fsdp2()
    data_path, _ = datasets["mlp"]
    runs = {reshard: train_ours(
        workdir, f"raf-{reshard}-{micro_batches}", data_path, RANKS,
        example=mlp_with_units(reshard), micro_batches=micro_batches,
        auto_wrap_policy="none", report=True)
        for reshard in (2, True)}

    # The report: the same gathers and bytes, the backward ones over pairs;
    # between forward and backward each rank holds half of fc2 and fc3
    # (fc1's backward reads no weight: freed, never gathered again).
    (pairs, pairs_bytes), (whole, whole_bytes) = (
        collectives(runs[r][2]) for r in (2, True))
    assert pairs == whole and pairs_bytes == whole_bytes
    assert pairs[("all_gather", "backward")] == 2 * micro_batches
    assert backward_gathers(runs[2][2]) == \
        [("fc3", " (post-forward group of 2 ranks)"),
         ("fc2", " (post-forward group of 2 ranks)")] * micro_batches
    assert all(group == "" for _, group in backward_gathers(runs[True][2]))
    gathered = MLP_FULL_BYTES["fc2"] + MLP_FULL_BYTES["fc3"]
    assert (f"post-forward shards (reshard_after_forward = N): 2 units "
            f"keep {gathered // 2} bytes from forward to backward of the "
            f"{gathered} they gather") in runs[2][2]
    assert "post-forward shards" not in runs[True][2]
    # At the peak (fc2's backward) fc3's half is gone and fc2 is gathered
    # either way: the same peak.
    assert peak(runs[2][2]) == peak(runs[True][2])

    # Same math as reshard_after_forward=True: bit for bit.
    assert runs[2][0] == runs[True][0]
    for name, value in runs[True][1].items():
        np.testing.assert_array_equal(runs[2][1][name], value, name)

    ref_losses, ref_state = fsdp2_accum(
        workdir, f"raf-{micro_batches}", initial_weights("mlp"), data_path,
        RANKS, 2, micro_batches=micro_batches)
    assert_losses_match(runs[2][0], ref_losses, what="FSDP2")
    assert_state_matches(runs[2][1], ref_state)  # the oracle's plain bounds


def test_pairs_kept_across_micro_batches_match_fsdp2(
        workdir, datasets, initial_weights):
    """With reshard-after-backward=false (FSDP2's set_reshard_after_backward
    (False) on the first of 2 micro-batches) the backward's pair-gathered
    fc2 and fc3 serve the next forward: 4 forward all-gathers instead of 6,
    the same math."""
    _skip_without_fsdp2()
    data_path, _ = datasets["mlp"]
    runs = {keep: train_ours(
        workdir, f"raf-keep-{keep}", data_path, RANKS,
        example=mlp_with_units(2), micro_batches=2, auto_wrap_policy="none",
        reshard_after_backward=not keep, report=True)
        for keep in (True, False)}
    (kept, _), (default, _) = (collectives(runs[k][2]) for k in (True, False))
    assert (kept[("all_gather", "forward")],
            default[("all_gather", "forward")]) == (4, 6)
    assert kept[("all_gather", "backward")] == 4  # over pairs
    assert runs[True][0] == runs[False][0]
    for name, value in runs[False][1].items():
        np.testing.assert_array_equal(runs[True][1][name], value, name)

    ref_losses, ref_state = fsdp2_accum(
        workdir, "raf-keep", initial_weights("mlp"), data_path, RANKS, 2,
        keep=True, micro_batches=2)
    assert_losses_match(runs[True][0], ref_losses, what="FSDP2")
    assert_state_matches(runs[True][1], ref_state)
