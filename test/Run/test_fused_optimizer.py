"""fsdp-pipeline's fused-optimizer end to end (torch.optim's fused=True):
GPT-2's updates, one per unit and parameter-group segment, become one
multi-tensor call per set of equal hyperparameters, and the step trains
exactly as with a call per update: the same losses and weights, bit for
bit, on 2 CPU ranks and through the CUDA backend's code (cuda_emu), whose
kernel updates all of a call's tensors in one launch with the per-element
arithmetic of the separate launches.
"""
import pytest

from test_cuda_emu import emu_run  # noqa: F401 (a fixture)
from test_fuse_add_layer_norm import (BASE, TWO_RANK_SETTINGS, _step,
                                      assert_two_rank_runs_alike,
                                      run_on_cuda_emu)
from test_pack_attention import _assert_trained_alike
from test_parity import STEPS

# GPT-2's example has three units (two blocks and the root) and 1-D
# parameters in each: with no-decay-1d every unit's flat parameter has
# runs of both groups.
GROUPS = "weight-decay=0.1 no-decay-1d=true"


def _lowered(fsdp_opt, tmp_path, base, name):
    return [_step(fsdp_opt, tmp_path, f"{base} fused-optimizer={fused}",
                  f"{name}-{fused}") for fused in ("true", "false")]


def _calls(step, optimizer):
    text = step.read_text()
    return (text.count(f"llvm.call @fsdprt_{optimizer}_multi_step("),
            text.count(f"llvm.call @fsdprt_{optimizer}_step("))


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "lion"])
def test_one_call_per_set_of_equal_hyperparameters(fsdp_opt, tmp_path,
                                                   optimizer):
    """Three units, one update each: one multi-tensor call instead of
    three; with no-decay-1d, one per group (decay, no decay) instead of a
    call per segment."""
    base = f"world-size=2 {BASE} optimizer={optimizer} lower=true"
    fused, plain = _lowered(fsdp_opt, tmp_path, base, optimizer)
    assert _calls(fused, optimizer) == (1, 0)
    assert _calls(plain, optimizer) == (0, 3)
    fused, plain = _lowered(fsdp_opt, tmp_path, f"{base} {GROUPS}",
                            f"{optimizer}-groups")
    assert _calls(fused, optimizer) == (2, 0)
    multi, single = _calls(plain, optimizer)
    assert multi == 0 and single > 3, single


@pytest.mark.parametrize("extra", TWO_RANK_SETTINGS + [
    f"optimizer=adamw {GROUPS}", "optimizer=lion param-dtype=bf16",
    "optimizer=adamw param-dtype=bf16 loss-scale=dynamic",
    "optimizer=adamw clip-grad-norm=0.5", "optimizer=adamw cpu-offload=true"])
def test_fused_updates_train_as_separate_ones(fsdp, fsdp_opt, tmp_path,
                                              extra):
    base = f"world-size=2 {BASE} {extra} lower=true"
    assert_two_rank_runs_alike(fsdp,
                               _lowered(fsdp_opt, tmp_path, base, "cpu"))


@pytest.mark.parametrize("extra", [
    "optimizer=adamw", f"optimizer=adamw {GROUPS} param-dtype=bf16",
    "optimizer=sgd momentum=0.9 param-dtype=bf16", "optimizer=lion"])
def test_fused_updates_train_as_separate_ones_on_cuda_emu(
        fsdp, fsdp_opt, emu_run, tmp_path, extra):  # noqa: F811
    base = f"world-size=1 {BASE} {extra} lower=true"
    runs = run_on_cuda_emu(fsdp, emu_run,
                           _lowered(fsdp_opt, tmp_path, base, "emu"))
    assert len(runs[0].losses) == STEPS
    _assert_trained_alike(*runs)
