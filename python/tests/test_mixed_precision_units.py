"""Per-unit mixed precision against FSDP2: torch_reference's GPT with each
unit's own MixedPrecisionPolicy, given at import by an FSDP2-style
fn(path, module) policy, trained at 2 ranks by fsdp-run and by
`fully_shard(unit, mp_policy=...)` on 2 gloo processes from the same
weights and batches (the reference's attention and LayerNorm computing in
f32 and rounding once, as ours: see the test). Also: the IR fields each
policy kind gives, and the errors for what units do not take.

Run: PYTHONPATH=python:python/tests python3 -m pytest -q python/tests/test_mixed_precision_units.py
"""
from __future__ import annotations

import copy
import json
import re

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")
fsdp = pytest.importorskip("torch.distributed.fsdp")
wrap = pytest.importorskip("torch.distributed.fsdp.wrap")

from fsdp_mlir import driver, from_torch  # noqa: E402
from fsdp_mlir.torch_import import UnsupportedModelError  # noqa: E402
from test_torch_import import (LOSS_RTOL, NUM_SAMPLES, PER_RANK,  # noqa: E402
                               STEPS, gpt_case, torch_losses, train_imported)
from torch_reference import Block, free_port, run_workers  # noqa: E402

BF16, F32 = torch.bfloat16, torch.float32


def _policies():
    """The units' own policies: the blocks compute in bf16 and reduce in
    f32, the second block hands f32 on (output_dtype), and the final norm
    (the head before the tied projection) runs in f32; the root keeps
    FSDP2's default (no casting)."""
    P = fsdp.MixedPrecisionPolicy
    return {"transformer.h.0": P(param_dtype=BF16, reduce_dtype=F32),
            "transformer.h.1": P(param_dtype=BF16, reduce_dtype=F32,
                                 output_dtype=F32),
            "transformer.ln_f": P(param_dtype=F32)}


def _fsdp2_policy(path, module):
    policy = _policies().get(path)
    return policy is not None and {"mp_policy": policy}


def _gpt(**options):
    torch.manual_seed(0)
    module, data, _ = gpt_case(np.random.default_rng(3))
    example = [torch.from_numpy(d[:PER_RANK]) for d in data]
    return module, data, from_torch(module, example, name="gpt", **options)


def _unit_text(model, path):
    m = model.root
    for name in path.split("."):
        m = m.children[name]
    return m._unit_text()


def test_policies_become_unit_fields():
    _, _, model = _gpt(auto_wrap_policy=_fsdp2_policy)
    # torch 2.15's FSDP2 reduces in the parameters' f32 when reduce_dtype is
    # None; param_dtype None (no cast) is the parameters' own f32, with no
    # input cast.
    assert _unit_text(model, "transformer.h.1") == (
        " unit<param_dtype = bf16, reduce_dtype = f32, output_dtype = f32, "
        "cast_forward_inputs = true>")
    assert _unit_text(model, "transformer.ln_f") == (
        " unit<param_dtype = f32, reduce_dtype = f32, "
        "cast_forward_inputs = true>")
    # FSDP1's MixedPrecision through CustomPolicy's kwargs: reduce_dtype
    # None is the param dtype, and FSDP1 casts no inputs by default.
    custom = wrap.CustomPolicy(
        lambda m: isinstance(m, Block) and
        {"mixed_precision": fsdp.MixedPrecision(param_dtype=torch.float16)})
    _, _, model = _gpt(auto_wrap_policy=custom)
    assert _unit_text(model, "transformer.h.0") == (
        " unit<param_dtype = f16, reduce_dtype = f16, "
        "cast_forward_inputs = false>")
    nothing = wrap.CustomPolicy(
        lambda m: isinstance(m, Block) and
        {"mixed_precision": fsdp.MixedPrecision()})
    assert _unit_text(_gpt(auto_wrap_policy=nothing)[2],
                      "transformer.h.1") == (
        " unit<param_dtype = f32, reduce_dtype = f32, "
        "cast_forward_inputs = false>")


@pytest.mark.parametrize("settings, message", [
    ({"mp_policy": fsdp.MixedPrecisionPolicy(param_dtype=torch.float64)},
     r"unit 'transformer.h.0' param_dtype=torch.float64: float32, "
     "bfloat16 or float16"),
    ({"mp_policy": fsdp.MixedPrecisionPolicy(
        param_dtype_override_fn=lambda p: None)},
     "unit 'transformer.h.0' a MixedPrecisionPolicy with "
     "param_dtype_override_fn="),
    ({"mixed_precision": fsdp.MixedPrecision(buffer_dtype=BF16)},
     "unit 'transformer.h.0' a MixedPrecision with buffer_dtype="
     r"torch.bfloat16, which units do not take"),
    ({"mixed_precision": fsdp.MixedPrecision(keep_low_precision_grads=True)},
     "a MixedPrecision with keep_low_precision_grads=True"),
    ({"mp_policy": "bf16"},
     "unit 'transformer.h.0' mixed precision 'bf16': a "
     "torch.distributed.fsdp MixedPrecisionPolicy or MixedPrecision"),
])
def test_what_units_do_not_take_is_an_error(settings, message):
    with pytest.raises(UnsupportedModelError, match=message):
        _gpt(auto_wrap_policy=lambda path, m:
             path == "transformer.h.0" and settings)


def _assert_weights_match(ours, ref, f32):
    """Every weight within one bf16 ulp (2^-8: bf16 has 8 bits of mantissa)
    of its tensor's scale from FSDP2's, and each tensor on FSDP2's side of
    the midpoint between FSDP2's weights and those of all-f32 training
    (`f32`). Not the suite's per-element bound: a master weight within f32
    noise (the reductions' summation order) of a bf16 rounding boundary
    rounds the other way on one side, so its bf16 copy differs by one ulp
    and so do the gradients it feeds from then on; over 5 steps at this lr
    such flips spread to many elements (measured on an AVX2-only AMD EPYC:
    68 of a 4096-element weight beyond the suite's bound, each tensor at
    0.07 to 0.24 of the f32 run's distance; FSDP2 itself, run with ATen's
    scalar kernels instead of its AVX2 ones, lands at about a third of
    ours). A unit computing in the wrong dtype lands at the f32 run's
    distance or beyond."""
    for key, want in ref.items():
        want = want.astype(np.float64)
        diff = np.abs(ours[key].astype(np.float64) - want)
        scale = float(np.abs(want).max())
        assert diff.max() <= 2.0 ** -8 * scale, \
            f"{key}: max|diff| {diff.max():.3g} (max|torch| {scale:.3g})"
        f32_off = np.linalg.norm(f32[key].astype(np.float64) - want)
        assert np.linalg.norm(diff) <= 0.5 * f32_off, \
            f"{key}: |ours - FSDP2| {np.linalg.norm(diff):.3g}, " \
            f"|f32 - FSDP2| {f32_off:.3g}"


_FSDP2_WORKER = r'''
import sys
import torch

TESTS, INIT, DATA, OUT, PORT, WORLD, BATCH, STEPS, N = sys.argv[1:]
WORLD, BATCH, STEPS, N = int(WORLD), int(BATCH), int(STEPS), int(N)
sys.path.insert(0, TESTS)
from test_mixed_precision_units import _policies
from test_torch_import import OPTIMIZERS
from torch_reference import (GPT, fed_batches, finish_fsdp2, join_gloo,
                             load_weights, train_steps)


F = torch.nn.functional
SDPA, LAYER_NORM = F.scaled_dot_product_attention, F.layer_norm


def sdpa_in_f32(q, k, v, is_causal=False):
    return SDPA(q.float(), k.float(), v.float(), is_causal=is_causal).to(q.dtype)


def layer_norm_in_f32(x, shape, weight, bias, eps):
    return LAYER_NORM(x.float(), shape, weight.float(), bias.float(),
                      eps).to(x.dtype)


# Each op computed in f32 and its results rounded once, as our kernels do
# (torch's bf16 CPU kernels of these two round inside: see the test).
F.scaled_dot_product_attention = sdpa_in_f32
F.layer_norm = layer_norm_in_f32


def worker(rank):
    join_gloo(rank, WORLD, PORT)
    from torch.distributed.fsdp import fully_shard
    model = GPT()
    load_weights(model, INIT)
    modules = dict(model.named_modules())
    for path, policy in _policies().items():
        fully_shard(modules[path], mp_policy=policy)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), **OPTIMIZERS["sgd"])
    losses = train_steps(model, opt, STEPS,
                         fed_batches(DATA, rank, WORLD, BATCH, N))
    finish_fsdp2(OUT, model, losses)


if __name__ == "__main__":
    torch.multiprocessing.spawn(worker, nprocs=WORLD)
'''


def test_per_unit_policies_train_like_fsdp2(tmp_path):
    """SGD with momentum: AdamW's first steps move each weight by about
    lr·sign(gradient), so the rare bf16 rounding that differs (see
    _assert_weights_match) flips whole lr-sized updates where a gradient is
    near zero, and its losses drift 1e-4 apart within 5 steps (measured)."""
    if not hasattr(fsdp, "fully_shard") or not \
            torch.distributed.is_gloo_available():
        pytest.skip("no torch.distributed.fsdp.fully_shard or gloo")
    module, data, model = _gpt(auto_wrap_policy=_fsdp2_policy)
    f32_module = copy.deepcopy(module)
    ranks = 2
    ours, state = train_imported(tmp_path, module, model, data, ranks, "sgd")

    out = tmp_path / "fsdp2"
    run_workers(tmp_path, "fsdp2_worker", _FSDP2_WORKER,
                [tmp_path / "weights.safetensors", tmp_path / "data.safetensors",
                 out, free_port(), ranks, PER_RANK, STEPS, NUM_SAMPLES])
    want = json.loads(out.with_suffix(".json").read_text())
    ref = st_numpy.load_file(str(out) + ".safetensors")
    f32 = torch_losses(f32_module, data, ranks, "sgd")

    # The cast points are the same (the blocks' inputs and parameters to
    # bf16, h.1's output and ln_f's input to f32, every op's results rounded
    # once to their dtype), so bf16 rounds alike on both sides up to the
    # f32 summation order (the first loss: 1e-7 apart). The reference's
    # attention and LayerNorm compute in f32 and round their results
    # (sdpa_in_f32, layer_norm_in_f32), as our kernels do: torch's bf16 CPU
    # kernels of these two round inside (the softmax probabilities before
    # P·V; the LayerNorm backward's partial results: 642 of 2048 input
    # gradients one bf16 ulp away from f32-then-round on random data), which
    # put the losses up to 2.2e-3 apart after a step, a bf16 ulp of 8 bits
    # of mantissa in most of the blocks' gradients.
    # After the first update, a master weight within f32 noise of a bf16
    # rounding boundary may round the other way on one side (see
    # _assert_weights_match); the gradients it feeds differ from then on,
    # and with this lr the losses 4 steps on move by up to 1e-5 for one such
    # flip (measured on an AVX2-only AMD EPYC: 1.0e-5 at step 4, where f32
    # training is itself only 1.2e-5 from FSDP2's). So: the first loss (the
    # same weights: the forward's cast points alone) within LOSS_RTOL, and
    # the whole trajectory at least 10 times closer to FSDP2's than all-f32
    # training's is (measured: 0.01 of it). A cast point of the wrong dtype
    # moves the losses by the f32 run's distance from the first update on.
    print(f"\nlosses: ours {ours}\nFSDP2 {want}\nf32 {f32}")
    assert abs(ours[0] - want[0]) <= LOSS_RTOL * abs(want[0]), (ours, want)
    ours_off = sum(abs(a - b) for a, b in zip(ours, want))
    f32_off = sum(abs(c - b) for c, b in zip(f32, want))
    assert ours_off <= 0.1 * f32_off, (ours, want, f32)
    # The units did compute in bf16: all-f32 training is farther away.
    assert max(abs(b - c) / abs(b) for b, c in zip(want, f32)) > \
        10 * LOSS_RTOL, (want, f32)
    assert sorted(k for k in state if not k.startswith("optim.")) == \
        sorted(ref)
    _assert_weights_match(state, ref, {
        n: p.detach().numpy() for n, p in f32_module.named_parameters()})

    # The report's collectives move each unit's dtypes: the blocks gather
    # bf16 and reduce f32; ln_f and the root stay f32.
    rows = re.findall(r"^\s*\d+\s+(all_gather|reduce_scatter)\s+(\S+)\s+"
                      r"\w+\s+(\w+)\s+(\d+)\s+(\d+)", driver.program_info(
                          tmp_path / "step.mlir")["report"], re.M)
    blocks = {f"transformer.h.{i}": {"all_gather": "bf16",
                                     "reduce_scatter": "f32"} for i in (0, 1)}
    size = {"bf16": 2, "f32": 4}
    assert {unit for _, unit, _, _, _ in rows} == \
        {"(root)", "transformer.ln_f", *blocks}
    for kind, unit, dtype, elements, nbytes in rows:
        assert dtype == blocks.get(unit, {}).get(kind, "f32"), (kind, unit)
        assert int(nbytes) == int(elements) * size[dtype], (kind, unit)
