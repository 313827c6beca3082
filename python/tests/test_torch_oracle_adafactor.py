"""Adafactor (issue 42, item 6) against torch.optim.Adafactor: the MLP
(every Linear a unit, so each flat parameter holds a factored weight and an
unfactored bias, cut between the ranks mid-row) at 1, 2 and 4 ranks
(4: hybrid-shard, shard groups of 2), with weight decay and non-default
hyper-parameters, and the factored state under torch's names (row_var
[rows, 1], col_var [1, cols], variance).

The row and column sums of grad², Σ param² and Σ update² are sums over
whole parameters, whose elements the shard group's ranks hold between them:
each rank sums its part and two small all-reduces complete them, so the
sums are added in another order than torch's. That is float noise of a few
ulps in the statistics, which Adafactor then normalises, as Adam does.

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_torch_oracle_adafactor.py
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from test_torch_oracle_optim import (MODELS, RANK_CASES,  # noqa: E402
                                     _assert_losses, _train_ours,
                                     _train_reference)

STEPS = 10
LR = 1e-2
WEIGHT_DECAY = 0.1
STATE_NAMES = ("row_var", "col_var", "variance")


def train_torch_adafactor(init, tensors, global_batch, **hyper):
    """torch.optim.Adafactor on the unsharded MLP, the rows fsdp-run feeds:
    (losses, final parameters and state by our checkpoint's names)."""
    losses, _, final = _train_reference(
        init, tensors, global_batch,
        lambda m: torch.optim.Adafactor(m.parameters(), lr=LR, foreach=False,
                                        **hyper),
        STATE_NAMES, steps=STEPS)
    return losses, final


def assert_close_to_torch(ours, ref):
    """Parameters and state within what float noise in the sums admits:
    Adafactor's update of an element is grad / √(row·col / mean(row)), so a
    gradient element that is float noise (a ReLU's dead unit summed in
    another order) gets an update of the parameter's full size, as under
    Adam. Bound: 1e-4 of each tensor's largest element, plus per step the
    largest update any element can take, α = max(eps2, RMS(param))·lr,
    times a few for the elements whose gradient is pure noise (at most 1 in
    100 of a tensor)."""
    assert sorted(ours) == sorted(ref)
    for key, want in ref.items():
        want = want.astype(np.float64)
        diff = np.abs(ours[key].astype(np.float64) - want)
        bound = 1e-4 * np.abs(want).max() + 1e-12
        if not key.startswith("optim."):
            rms = math.sqrt(float(np.mean(want ** 2)))
            noise = diff > bound
            assert noise.sum() <= max(1, noise.size // 100), \
                f"{key}: {noise.sum()} elements beyond {bound:.3g}"
            bound = 2 * STEPS * max(1e-3, rms) * LR
        assert diff.max() <= bound, \
            f"{key}: max|diff| {diff.max():.3g} > {bound:.3g}"


@pytest.mark.parametrize("ranks,strategy", RANK_CASES, ids=str)
def test_adafactor_matches_torch(ranks, strategy, tmp_path):
    """optimizer=adafactor with weight decay 0.1 and torch's other
    defaults: losses to LOSS_RTOL, weights and factored state to the bound
    above."""
    batch = MODELS["mlp"][2]
    tensors, init, metrics, ours = _train_ours(
        tmp_path, ranks, strategy, steps=STEPS, optimizer="adafactor", lr=LR,
        weight_decay=WEIGHT_DECAY)
    ref_losses, ref = train_torch_adafactor(init, tensors, batch * ranks,
                                            weight_decay=WEIGHT_DECAY)
    _assert_losses(metrics, ref_losses)
    assert ours["optim.row_var.fc1.weight"].shape == (32, 1)
    assert ours["optim.col_var.fc1.weight"].shape == (1, 16)
    assert ours["optim.variance.fc1.bias"].shape == (32,)
    assert_close_to_torch(ours, ref)


def test_adafactor_hyper_parameters_match_torch(tmp_path):
    """beta2-decay, eps1, eps2 and clip-threshold are torch's beta2_decay,
    eps and d: a slower decay, a larger eps2 (the floor on RMS(param)) and
    d = 2 change the trajectory, and it still matches."""
    batch = MODELS["mlp"][2]
    tensors, init, metrics, ours = _train_ours(
        tmp_path, 2, "full-shard", steps=STEPS, optimizer="adafactor", lr=LR,
        beta2_decay=-0.5, eps1=1e-20, eps2=0.2, clip_threshold=2.0)
    ref_losses, ref = train_torch_adafactor(init, tensors, batch * 2,
                                            beta2_decay=-0.5,
                                            eps=(1e-20, 0.2), d=2.0)
    _assert_losses(metrics, ref_losses)
    assert_close_to_torch(ours, ref)
    # The settings took effect: torch's defaults give other weights.
    _, plain = train_torch_adafactor(init, tensors, batch * 2)
    assert not np.allclose(ref["fc1.weight"], plain["fc1.weight"], rtol=1e-3)
