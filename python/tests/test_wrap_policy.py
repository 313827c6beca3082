"""Wrapping by any rule at import (fsdp_mlir.torch_import.wrap_policy):
FSDP1's own policy objects and functions (run by torch's code, so they pick
what FSDP1 picks: isinstance matching, size thresholds, CustomPolicy's
per-unit settings), an FSDP2-style callable `fn(path, module)`, and
`or_policy`; the picked modules become units of the compiled program, which
trains like torch.
"""
from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")
wrap = pytest.importorskip("torch.distributed.fsdp.wrap")
np = pytest.importorskip("numpy")

from torch.distributed.fsdp import ShardingStrategy  # noqa: E402

from fsdp_mlir import driver, from_torch  # noqa: E402
from fsdp_mlir.torch_import import UnsupportedModelError, or_policy  # noqa: E402
from test_torch_import import (OPTIMIZERS, gpt_case, torch_losses,  # noqa: E402
                               train_imported, PER_RANK)
from torch_reference import GPT, Block  # noqa: E402


class SpecialBlock(Block):
    """A subclass: class-name matching misses it, isinstance does not."""


def _model(**options):
    """torch_reference's GPT with its second block a SpecialBlock, its data
    and its import with `options`."""
    torch.manual_seed(0)
    module, data, _ = gpt_case(np.random.default_rng(3))
    special = SpecialBlock(32, 4)
    special.load_state_dict(module.transformer.h[1].state_dict())
    module.transformer.h[1] = special
    example = [torch.from_numpy(d[:PER_RANK]) for d in data]
    return module, data, from_torch(module, example, name="gpt", **options)


def _units(model):
    """{path of every unit below the root: its reshard_after_forward}."""
    return {path: unit.reshard_after_forward
            for path, unit in model.named_units()}


BLOCKS = {"transformer.h.0": None, "transformer.h.1": None}


def test_fsdp1_module_wrap_policy_matches_by_isinstance():
    _, _, model = _model(auto_wrap_policy=wrap.ModuleWrapPolicy({Block}))
    assert _units(model) == BLOCKS  # the SpecialBlock too


def test_fsdp1_lambda_and_size_policies():
    lam = functools.partial(wrap.lambda_auto_wrap_policy,
                            lambda_fn=lambda m: isinstance(m, Block))
    assert _units(_model(auto_wrap_policy=lam)[2]) == BLOCKS
    # FSDP1's size rule, bottom-up: a module whose parameters not yet in a
    # unit number at least min_num_params. c_attn (3,168), c_fc (4,224) and
    # c_proj of the MLP (4,128) qualify; what is left of a block then
    # (1,184) does not; wte (2,048) does, wpe (512) not.
    size = functools.partial(wrap.size_based_auto_wrap_policy,
                             min_num_params=2000)
    assert _units(_model(auto_wrap_policy=size)[2]) == {
        "transformer.wte": None,
        **{f"transformer.h.{b}.{layer}": None for b in (0, 1)
           for layer in ("attn.c_attn", "mlp.c_fc", "mlp.c_proj")}}


def test_custom_policy_settings_per_unit():
    policy = wrap.CustomPolicy(
        lambda m: {"sharding_strategy": ShardingStrategy.SHARD_GRAD_OP}
        if isinstance(m, SpecialBlock) else isinstance(m, Block))
    _, _, model = _model(auto_wrap_policy=policy)
    assert _units(model) == {"transformer.h.0": None,
                             "transformer.h.1": False}
    assert "unit<reshard_after_forward = false>" in model.text()


def test_a_callable_and_or_policy():
    embeddings = wrap.ModuleWrapPolicy({torch.nn.Embedding})

    def second_block(path, module):
        return path == "transformer.h.1" and {"reshard_after_forward": False}
    _, _, model = _model(auto_wrap_policy=or_policy(embeddings, second_block))
    assert _units(model) == {"transformer.wte": None, "transformer.wpe": None,
                             "transformer.h.1": False}


def test_reshard_after_forward_int():
    """FSDP2's int reshard_after_forward (reshard to N ranks) reaches the
    IR; below 1 it is an error naming the unit (a bool is not an int)."""
    _, _, model = _model(auto_wrap_policy=lambda path, m: isinstance(
        m, Block) and {"reshard_after_forward": 2})
    assert _units(model) == {"transformer.h.0": 2, "transformer.h.1": 2}
    assert model.text().count("unit<reshard_after_forward = 2>") == 2
    with pytest.raises(UnsupportedModelError,
                       match="unit 'transformer.h.0' reshard_after_forward=0: "
                             "a bool or an int >= 1"):
        _model(auto_wrap_policy=lambda path, m: path == "transformer.h.0" and
               {"reshard_after_forward": 0})


def _activations(model):
    """The activations the report keeps for the backward at the peak (2
    ranks, the units as marked)."""
    report = driver.report(model, world_size=2, auto_wrap_policy="none")
    return report["breakdown"]["activations"]


def _train_bit_identical(tmp_path, module, data, model, plain):
    """`model` (units checkpointed) and `plain` imported from `module`,
    trained 2 steps at 2 ranks with AdamW: the same losses and state, bit
    for bit (recomputing runs the same kernels on the same values); their
    losses."""
    runs = {}
    for name, imported in (("checkpointed", model), ("plain", plain)):
        (tmp_path / name).mkdir()
        runs[name] = train_imported(tmp_path / name, module, imported, data,
                                    2, "adamw")
    (got, got_state), (want, want_state) = runs["checkpointed"], runs["plain"]
    assert got == want
    for name, value in want_state.items():
        np.testing.assert_array_equal(got_state[name], value, err_msg=name)
    return got


def test_activation_checkpointing_per_unit(tmp_path):
    """A policy's `activation_checkpointing` setting and
    apply_activation_checkpointing's check_fn mark units; the marked unit
    keeps fewer activations for the backward, and training is bit-identical
    to the same units without checkpointing (the recompute runs the same
    kernels on the same values) and torch's (1e-5: f32 summation order)."""
    blocks = wrap.ModuleWrapPolicy({Block})
    module, data, plain = _model(auto_wrap_policy=blocks)
    _, _, by_setting = _model(auto_wrap_policy=lambda path, m: isinstance(
        m, Block) and {"activation_checkpointing": path == "transformer.h.0"})
    _, _, by_check_fn = _model(
        auto_wrap_policy=blocks,
        activation_checkpointing=lambda m: isinstance(m, SpecialBlock))
    for model, marked in ((by_setting, "transformer.h.0"),
                          (by_check_fn, "transformer.h.1")):
        assert {path for path, unit in model.named_units()
                if unit.activation_checkpointing} == {marked}
        assert _activations(model) < _activations(plain)

    got = _train_bit_identical(tmp_path, module, data, by_check_fn, plain)
    torch_want = torch_losses(module, data, 2, "adamw")
    assert max(abs(a - b) for a, b in zip(got, torch_want)) <= 1e-5


def test_selective_activation_checkpointing_per_unit(tmp_path):
    """activation_checkpointing="selective", as a policy's setting or what
    check_fn returns, marks units selective: they keep fewer activations
    than without checkpointing and more than whole-unit checkpointing (the
    linears' and attention's results), and training is bit-identical to
    the plain run (the recompute runs the same kernels on the same
    values)."""
    blocks = wrap.ModuleWrapPolicy({Block})
    module, data, plain = _model(auto_wrap_policy=blocks)
    _, _, whole = _model(auto_wrap_policy=blocks,
                         activation_checkpointing=lambda m: isinstance(
                             m, Block))
    _, _, by_setting = _model(auto_wrap_policy=lambda path, m: isinstance(
        m, Block) and {"activation_checkpointing": "selective"})
    _, _, by_check_fn = _model(
        auto_wrap_policy=blocks,
        activation_checkpointing=lambda m: isinstance(m, Block) and
        "selective")
    for model in (by_setting, by_check_fn):
        assert {path: unit.activation_checkpointing
                for path, unit in model.named_units()} == {
            "transformer.h.0": "selective", "transformer.h.1": "selective"}
        assert model.text().count(
            "unit<activation_checkpointing = selective>") == 2
        assert _activations(whole) < _activations(model) < \
            _activations(plain)

    _train_bit_identical(tmp_path, module, data, by_check_fn, plain)


def test_activation_checkpointing_of_a_non_unit_is_an_error():
    with pytest.raises(UnsupportedModelError,
                       match="picks 'transformer.h.0.attn' .* not an FSDP "
                             "unit"):
        _model(auto_wrap_policy=wrap.ModuleWrapPolicy({Block}),
               activation_checkpointing=lambda m: type(m).__name__ ==
               "CausalSelfAttention")
    with pytest.raises(UnsupportedModelError,
                       match="activation_checkpointing='yes': a bool or "
                             "\"selective\""):
        _model(auto_wrap_policy=lambda path, m: isinstance(m, Block) and
               {"activation_checkpointing": "yes"})
    with pytest.raises(UnsupportedModelError,
                       match="check_fn gives 'transformer.h.0' "
                             "activation_checkpointing='selctive'"):
        _model(auto_wrap_policy=wrap.ModuleWrapPolicy({Block}),
               activation_checkpointing=lambda m: isinstance(m, Block) and
               "selctive")


def test_unknown_settings_and_policies_are_errors():
    with pytest.raises(UnsupportedModelError,
                       match="unit 'transformer.h.0' the setting "
                             "'use_orig_params'"):
        _model(auto_wrap_policy=lambda path, m: path == "transformer.h.0" and
               {"use_orig_params": True})
    with pytest.raises(UnsupportedModelError, match="HYBRID_SHARD"):
        _model(auto_wrap_policy=wrap.CustomPolicy(
            lambda m: isinstance(m, Block) and
            {"sharding_strategy": ShardingStrategy.HYBRID_SHARD}))
    with pytest.raises(TypeError, match="neither a torch FSDP policy"):
        _model(auto_wrap_policy=42)


def test_policy_units_train_like_torch(tmp_path):
    """CustomPolicy's units (one kept gathered after forward) compiled
    without any wrap option: 2 ranks, AdamW, torch's losses (1e-5: f32
    summation order)."""
    policy = wrap.CustomPolicy(
        lambda m: {"sharding_strategy": ShardingStrategy.SHARD_GRAD_OP}
        if isinstance(m, SpecialBlock) else isinstance(m, Block))
    module, data, model = _model(auto_wrap_policy=policy)
    got, _ = train_imported(tmp_path, module, model, data, 2, "adamw")
    want = torch_losses(module, data, 2, "adamw")
    assert max(abs(a - b) for a, b in zip(got, want)) <= 1e-5, (got, want)
    units = driver.program_info(tmp_path / "step.mlir")["units"]
    assert sorted(u["name"] for u in units) == \
        ["", "transformer.h.0", "transformer.h.1"]


def test_prefetch_lists_per_unit(tmp_path):
    """FSDP2's set_modules_to_forward_prefetch / _backward_prefetch as
    per-unit settings (torch modules or paths): each of 4 blocks prefetches
    the two after it in the forward and the two before it in the backward.
    With the default prefetching off, the schedule then issues two gathers
    ahead (the report's collectives, and a higher planned peak), and the
    step trains like torch (2 ranks, AdamW, 1e-5: f32 summation
    order)."""
    torch.manual_seed(0)
    module = GPT(layers=4)
    _, data, _ = gpt_case(np.random.default_rng(3))
    blocks = list(module.transformer.h)

    def policy(path, m):
        if m not in blocks:
            return False
        i = blocks.index(m)
        return {"modules_to_forward_prefetch": blocks[i + 1:i + 3],
                "modules_to_backward_prefetch": [
                    f"transformer.h.{j}" for j in (i - 1, i - 2) if j >= 0]}
    model = from_torch(module, [torch.from_numpy(d[:PER_RANK]) for d in data],
                       auto_wrap_policy=policy)
    assert ('unit<forward_prefetch = ["transformer.h.1", "transformer.h.2"]>'
            in model.text())
    assert ('unit<forward_prefetch = ["transformer.h.2", "transformer.h.3"], '
            'backward_prefetch = ["transformer.h.0"]>' in model.text())
    options = dict(world_size=2, optimizer="adamw", forward_prefetch=False,
                   backward_prefetch="none", limit_all_gathers=0,
                   **OPTIMIZERS["adamw"])
    report = driver.report(model, **options)
    backward = [(c["kind"], c["unit"]) for c in report["collectives"]
                if c["phase"] == "backward"]
    # The last block's gather done, the two before it are issued, before
    # its gradient's reduce-scatter (without the lists it comes first).
    assert backward[:4] == [("all_gather", "transformer.h.3"),
                            ("all_gather", "transformer.h.2"),
                            ("all_gather", "transformer.h.1"),
                            ("reduce_scatter", "transformer.h.3")], backward
    # Two units gathered ahead cost memory: the planned peak grows.
    plain = from_torch(module, [torch.from_numpy(d[:PER_RANK])
                                for d in data],
                       auto_wrap_policy=lambda path, m: m in blocks)
    assert report["peak_bytes"] > driver.report(
        plain, **options)["peak_bytes"]
    got, _ = train_imported(tmp_path, module, model, data, 2, "adamw",
                            forward_prefetch=False, backward_prefetch="none",
                            limit_all_gathers=0)
    want = torch_losses(module, data, 2, "adamw")
    assert max(abs(a - b) for a, b in zip(got, want)) <= 1e-5, (got, want)


def test_prefetch_of_a_non_unit_is_an_error():
    with pytest.raises(UnsupportedModelError,
                       match="unit 'transformer.h.0' a prefetch of "
                             "'transformer.wte', which is not an FSDP unit"):
        _model(auto_wrap_policy=lambda path, m: isinstance(m, Block) and {
            "modules_to_forward_prefetch": ["transformer.wte"]})
