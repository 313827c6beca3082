"""Dropout in the zoo builders (gpt2's and transformer_with_shared_params'
`dropout`), and the written-out attention it needs (layers.attention:
Q·Kᵀ·scale, causal mask, softmax, dropout, ·V).

1. The written-out attention without dropout (`decompose_attention=True`)
   against torch's fused F.scaled_dot_product_attention /
   nn.MultiheadAttention: GPT-2 (causal self-attention) and
   TransformerWithSharedParams in training mode (self- and
   cross-attention, Tq != Tk), 2 ranks full-shard, with the oracle of
   test_torch_oracle*.py and its tolerances (losses rel 1e-5, every final
   tensor within 1e-4 of its max).
2. Dropout 0.1 (nanoGPT's sites; nn.Transformer(dropout=0.1) in train
   mode): 2 ranks full-shard and 1 rank no-shard with 2 micro-batches
   (grad-accum-steps=2) on the same samples give the same losses and final
   parameters (rank r draws the masks of micro-batch r); the masks act (the
   losses differ from dropout 0); a rerun is bit-identical; another --seed
   on the same initial weights (--load) draws other masks.

fsdp-run gives rank r of R its k-th sample of step s from dataset row
s*G + r + k*R, and micro-batch m of one rank rows s*G + m*B + j (G the
global batch, B the per-rank batch; runtime/runner/Data.cpp): the 1-rank
dataset is the 2-rank one with each step's rows reordered so that
micro-batch m sees rank m's samples.

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_dropout_models.py
"""
from __future__ import annotations

import math
import re

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")

from fsdp_mlir import driver, models  # noqa: E402

import test_torch_oracle as base  # noqa: E402  (skips without the tools)
import test_torch_oracle_transformer as tbase  # noqa: E402
from torch_reference import GPT  # noqa: E402

SEED = base.SEED
P = 0.1


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("dropout_models")


def _compile(workdir, model, tag, **options):
    return driver.compile(model, workdir / f"{tag}.mlir", **options)


def _train(workdir, prog, tag, nproc, steps, data, seed=SEED, load=None):
    """(losses, final checkpoint) of `steps` steps."""
    save = workdir / tag
    result = driver.run(prog, nproc=nproc, steps=steps, seed=seed, data=data,
                        save=save, load=load, timeout=120)
    state = st_numpy.load_file(str(save / f"step-{steps}.safetensors"))
    return [row["loss"] for row in result.metrics], state


def _initial(workdir, model, tag):
    """The seeded initial weights (the step-0 checkpoint) and its path."""
    return base.seeded_initial_weights(model, workdir / f"{tag}.init")


def _assert_runs_differ(what, losses, ref_losses, state, ref_state, params):
    """Every step's loss differs by more than float noise (1e-5 relative)
    and the trained tensors moved apart (> 1e-2 of their scale)."""
    moved = _worst_tensor(state, ref_state, params)
    print(f"{what}: losses {losses} vs {ref_losses}, "
          f"params/optim-state {moved:.2g}")
    assert all(abs(a - b) > 1e-5 * abs(b) for a, b in zip(losses, ref_losses))
    assert moved > 1e-2


def _max_rel(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def _worst_tensor(ours, ref, keys):
    """max over `keys` of max|diff| / max|ref|."""
    worst = 0.0
    for k in keys:
        r = ref[k].astype(np.float64)
        d = np.abs(ours[k].astype(np.float64) - r).max()
        worst = max(worst, float(d) / (float(np.abs(r).max()) or 1.0))
    return worst


# -- 0. the IR ----------------------------------------------------------------
def test_dropout_sites_are_numbered():
    from fsdp_mlir.ir import Model, Module, tensor
    root = Module("root", "Net")
    f = root.forward(tensor(2, 4))
    x = f.args[0]
    assert f.dropout(x, 0.0) is x  # p = 0: no op
    a = f.dropout(x, 0.5)
    b = f.dropout(a, 0.25, rng_id=2)  # explicit ids are kept and avoided
    c = f.dropout(b, 0.5)
    f.ret(c)
    text = Model("m", root).text()
    assert "nn.dropout %x {p = 0.5 : f64, rng_id = 1 : i64} : tensor<2x4xf32>" \
        in text
    assert "{p = 0.25 : f64, rng_id = 2 : i64}" in text
    assert "{p = 0.5 : f64, rng_id = 3 : i64}" in text
    with pytest.raises(ValueError):
        f.dropout(x, 1.0)
    # Every site of a builder has its own id; dropout 0 is today's IR.
    gpt = models.gpt2(dropout=0.2, layers=3).text()
    ids = [int(m) for m in re.findall(r"rng_id = (\d+)", gpt)]
    assert sorted(ids) == list(range(1, 1 + 3 * 3 + 1))
    assert models.gpt2(dropout=0.0).text() == models.gpt2().text()
    assert models.transformer_with_shared_params(training=True, dropout=0.0) \
        .text() == models.transformer_with_shared_params(training=True).text()
    with pytest.raises(ValueError):
        models.transformer_with_shared_params(dropout=0.1)  # eval mode


# -- 1. the written-out attention against torch's fused one --------------------
def test_gpt2_decomposed_attention_matches_torch(workdir):
    model = models.gpt2(decompose_attention=True)
    text = model.text()
    assert "= nn.attention " not in text and "= nn.dropout " not in text
    assert "nn.softmax" in text
    rng = np.random.default_rng(1234)
    tensors = base._gpt_data(rng)
    data = workdir / "gpt.safetensors"
    st_numpy.save_file(tensors, str(data))
    init, _ = _initial(workdir, model, "gpt2-decomposed")
    ranks, lr = 2, base.LR[("gpt2", "sgd")]
    prog = _compile(workdir, model, "gpt2-decomposed-2", world_size=ranks,
                    sharding_strategy="full-shard", wrap_kinds=["Block"],
                    optimizer="sgd", lr=lr, momentum=0.9)
    ours_losses, ours = _train(workdir, prog, "gpt2-decomposed-2", ranks,
                               base.STEPS, data)
    ref_losses, ref = base.train_in_torch(GPT(), "sgd", lr, init, tensors,
                                          4 * ranks)
    print("\ngpt2 decomposed vs torch SDPA: loss %.2g, weights/state %.2g"
          % (_max_rel(ours_losses, ref_losses), _worst_tensor(ours, ref, ref)))
    base.assert_losses_match(ours_losses, ref_losses)
    assert sorted(ours) == sorted(ref)
    base.assert_state_matches(ours, ref)


def test_transformer_decomposed_attention_matches_torch(workdir):
    model = models.transformer_with_shared_params(training=True,
                                                  decompose_attention=True)
    text = model.text()
    assert "= nn.attention " not in text and "= nn.dropout " not in text
    assert text.count("nn.softmax") == 6  # 2 encoder + 2 x 2 decoder
    ranks, lr = 2, tbase.LR["adamw"]
    data = workdir / "get_input-2.safetensors"
    st_numpy.save_file({"input.0": np.repeat(tbase.SRC, ranks, axis=0),
                        "input.1": np.repeat(tbase.TGT, ranks, axis=0)},
                       str(data))
    init, _ = _initial(workdir, model, "transformer-decomposed")
    prog = _compile(workdir, model, "transformer-decomposed-2",
                    world_size=ranks, sharding_strategy="full-shard",
                    optimizer="adamw", lr=lr)
    ours_losses, ours = _train(workdir, prog, "transformer-decomposed-2",
                               ranks, base.STEPS, data)
    ref_losses, ref = tbase.train_in_torch("train", "adamw", lr, init)
    print("\ntransformer decomposed vs torch nn.Transformer: worst loss / "
          "weight / optim-state / key-bias-noise differences "
          "%.2g / %.2g / %.2g / %.2g"
          % tbase._worst(ours_losses, ref_losses, ours, ref))
    base.assert_losses_match(ours_losses, ref_losses)
    assert sorted(ours) == sorted(ref)
    base.assert_state_matches(ours, ref, adamw_lr=lr,
                              noise_mask=tbase._noise_only)


# -- 2. dropout: ranks like micro-batches, masks act, reproducible -------------
STEPS = 3
RANKS = 2


def _datasets(workdir, tag, tensors, batch):
    """The 2-rank dataset (`tensors`, STEPS global batches) and the 1-rank
    2-micro-batch one holding the same samples in micro-batch order."""
    G = batch * RANKS
    perm = [s * G + m + RANKS * j for s in range(STEPS)
            for m in range(RANKS) for j in range(batch)]
    two, one = workdir / f"{tag}-2.safetensors", workdir / f"{tag}-1.safetensors"
    st_numpy.save_file(tensors, str(two))
    st_numpy.save_file({k: v[perm].copy() for k, v in tensors.items()},
                       str(one))
    return two, one


CONFIGS = {
    # GPT-2 (the small default config, examples/gpt2.mlir's) with nanoGPT's
    # dropout; vocab 64, context 16, batch 4 per rank.
    "gpt2": dict(
        build=lambda p: models.gpt2(dropout=p), batch=4,
        data=lambda rng, n: {
            "input.0": rng.integers(0, 64, (n, 16), np.int64),
            "input.1": rng.integers(0, 64, (n, 16), np.int64)},
        options=dict(wrap_kinds=["Block"], optimizer="adamw", lr=3e-3),
        sites=7),  # drop + 2 x (attn_dropout, resid_dropout, mlp)
    # PyTorch's model: nn.Transformer(dropout=0.1) in train mode.
    "transformer": dict(
        build=lambda p: models.transformer_with_shared_params(
            training=True, dropout=p), batch=2,
        data=lambda rng, n: {
            "input.0": rng.integers(0, 23, (n, 6), np.int64),
            "input.1": rng.integers(0, 23, (n, 4), np.int64)},
        options=dict(optimizer="adamw", lr=3e-3),
        sites=20),  # 2 x 4 (encoder) + 2 x 6 (decoder)
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_dropout_ranks_match_micro_batches(name, workdir):
    cfg = CONFIGS[name]
    model = cfg["build"](P)
    text = model.text()
    assert text.count("= nn.dropout ") == cfg["sites"]
    assert "= nn.attention " not in text
    batch = cfg["batch"]
    rng = np.random.default_rng(99)
    two_data, one_data = _datasets(workdir, name, cfg["data"](
        rng, STEPS * batch * RANKS), batch)

    two = _compile(workdir, model, f"{name}-two", world_size=RANKS,
                   sharding_strategy="full-shard", **cfg["options"])
    accum = _compile(workdir, model, f"{name}-accum", world_size=1,
                     sharding_strategy="no-shard", grad_accum_steps=RANKS,
                     **cfg["options"])
    two_losses, two_state = _train(workdir, two, f"{name}-two", RANKS, STEPS,
                                   two_data)
    accum_losses, accum_state = _train(workdir, accum, f"{name}-accum", 1,
                                       STEPS, one_data)

    # N ranks drop what 1 rank with N micro-batches drops.
    # BatchNorm's running statistics are not compared: each rank updates
    # them once from its batch, one rank twice (once per micro-batch).
    params = [k for k in accum_state
              if not k.startswith(("bn.running_", "bn.num_batches_tracked"))]
    # num_batches_tracked counts forwards: 2 per step with 2 micro-batches.
    if "bn.num_batches_tracked" in accum_state:
        assert accum_state["bn.num_batches_tracked"] == 2 * STEPS
        assert two_state["bn.num_batches_tracked"] == STEPS
    print(f"\n{name} dropout {P}: 2 ranks vs 1 rank x 2 micro-batches: "
          f"loss {_max_rel(two_losses, accum_losses):.2g}, "
          "params/optim-state %.2g"
          % _worst_tensor(two_state, accum_state, params))
    assert sorted(two_state) == sorted(accum_state)
    for step, (a, b) in enumerate(zip(two_losses, accum_losses)):
        assert math.isclose(a, b, rel_tol=1e-5), f"step {step}: {a} vs {b}"
    base.assert_state_matches(two_state, {k: accum_state[k] for k in params},
                              adamw_lr=cfg["options"]["lr"])

    # The masks act: the same run without dropout has other losses.
    plain = _compile(workdir, cfg["build"](0.0), f"{name}-plain",
                     world_size=1, sharding_strategy="no-shard",
                     grad_accum_steps=RANKS, **cfg["options"])
    plain_losses, plain_state = _train(workdir, plain, f"{name}-plain", 1,
                                       STEPS, one_data)
    # GPT-2's init (std 0.02) keeps its logits near 0, so its loss hardly
    # depends on the activations at first (ln 64 either way): ~1e-4 apart
    # at step 1, still ~100x the float noise of two equivalent runs.
    _assert_runs_differ(f"{name}: dropout {P} vs 0", accum_losses,
                        plain_losses, accum_state, plain_state, params)

    # Bit-identical rerun.
    again_losses, again_state = _train(workdir, two, f"{name}-two-again",
                                       RANKS, STEPS, two_data)
    assert again_losses == two_losses
    for k, v in two_state.items():
        assert np.array_equal(again_state[k], v), k

    # Another seed on the same initial weights: other masks, other losses.
    _, init_path = _initial(workdir, model, name)
    loaded_losses, _ = _train(workdir, two, f"{name}-two-loaded", RANKS,
                              STEPS, two_data, load=init_path)
    assert loaded_losses == two_losses, "--load of the seed's own init"
    other_losses, other_state = _train(workdir, two, f"{name}-two-seed8",
                                       RANKS, STEPS, two_data, seed=SEED + 1,
                                       load=init_path)
    _assert_runs_differ(f"{name}: seed {SEED} vs {SEED + 1} (same init)",
                        other_losses, two_losses, other_state, two_state,
                        params)
