"""fsdp-pipeline's fuse-bias-gelu end to end: GPT-2 with each block's c_fc
and its tanh GELU as one nn.linear_gelu, and c_proj's input gradient and
the GELU's gradient as one nn.linear_gelu_grad. On 2 CPU ranks the fused
step trains exactly as the unfused one (the CPU backend runs the unfused
kernels); through the CUDA backend's code (cuda_emu), where cuBLASLt's
epilogues apply the GELU (or its derivative) to the f32 GEMM result before
its one rounding, f32 is bit for bit and bf16 within one bf16 rounding.
"""
import numpy as np
import pytest

from test_cuda_emu import emu_run  # noqa: F401 (a fixture)
from test_fuse_add_layer_norm import (BASE, TWO_RANK_SETTINGS, _step,
                                      assert_two_rank_runs_alike,
                                      run_on_cuda_emu)
from test_pack_attention import _assert_trained_alike
from test_parity import STEPS, compare_losses


def test_fused_step_has_one_fusion_per_block(fsdp_opt, tmp_path):
    """GPT-2's two blocks: each MLP's GELU and its gradient fuse."""
    def train_step(name, fuse):
        text = _step(fsdp_opt, tmp_path,
                     f"world-size=1 {BASE} fuse-bias-gelu={fuse}",
                     name).read_text()
        return text[text.index("func.func @gpt2_train_step"):]

    fused, plain = train_step("fused", "true"), train_step("plain", "false")
    assert fused.count("nn.linear_gelu ") == 2
    assert fused.count("nn.linear_gelu_grad ") == 2
    assert "nn.gelu " not in fused and "nn.gelu_grad " not in fused
    assert plain.count("nn.gelu ") == 2 and plain.count("nn.gelu_grad ") == 2
    assert "nn.linear_gelu" not in plain


def _lowered(fsdp_opt, tmp_path, base, name):
    """The fused and the unfused lowered programs, the first calling the
    fused kernels (the forward twice per block when it is recomputed)."""
    steps = [_step(fsdp_opt, tmp_path, f"{base} fuse-bias-gelu={fuse}",
                   f"{name}-{fuse}") for fuse in ("true", "false")]
    texts = [s.read_text() for s in steps]
    forward = [t.count("llvm.call @fsdprt_linear_gelu_forward(")
               for t in texts]
    backward = [t.count("llvm.call @fsdprt_linear_gelu_backward(")
                for t in texts]
    assert forward[0] in (2, 4) and backward[0] == 2, (forward, backward)
    assert forward[1] == 0 and backward[1] == 0
    return steps


@pytest.mark.parametrize("extra", TWO_RANK_SETTINGS)
def test_fused_step_trains_as_the_unfused_one(fsdp, fsdp_opt, tmp_path,
                                              extra):
    base = f"world-size=2 {BASE} {extra} lower=true"
    assert_two_rank_runs_alike(fsdp,
                               _lowered(fsdp_opt, tmp_path, base, "cpu"))


def _on_emu(fsdp, fsdp_opt, emu_run, tmp_path, extra):  # noqa: F811
    base = f"world-size=1 {BASE} {extra} lower=true"
    return run_on_cuda_emu(fsdp, emu_run,
                           _lowered(fsdp_opt, tmp_path, base, "emu"))


def test_fused_f32_step_trains_as_the_unfused_one_on_cuda_emu(
        fsdp, fsdp_opt, emu_run, tmp_path):  # noqa: F811
    """In f32 the epilogue's unrounded GEMM result is the stored one."""
    runs = _on_emu(fsdp, fsdp_opt, emu_run, tmp_path, "optimizer=adamw")
    assert len(runs[0].losses) == STEPS
    _assert_trained_alike(*runs)


def test_fused_bf16_step_trains_within_one_rounding_on_cuda_emu(
        fsdp, fsdp_opt, emu_run, tmp_path):  # noqa: F811
    """bf16: the epilogue rounds the GELU (and its gradient) of the f32 GEMM
    result once where the unfused kernels round the GEMM result first, so
    an activation or gradient element may be one bf16 step apart
    (LinearGeluTest's bound). Under SGD (linear in the gradients) the
    losses and each weight matrix stay within bf16's unit roundoff u of the
    tensor's largest element, as test_cuda_emu's 16-bit comparison of two
    backends (measured: 0.004 u). A 1-D tensor (a bias or a norm's
    parameter, zero- or one-initialised) moves by lr times gradients that
    sum over every token, so the one-step differences of many tokens add up
    against a small sum: 2 u of its largest element (measured: 1.39 u, the
    first block's c_fc bias)."""
    runs = _on_emu(fsdp, fsdp_opt, emu_run, tmp_path,
                   "optimizer=sgd param-dtype=bf16")
    roundoff = 2.0 ** -8
    assert not compare_losses(runs[0].losses, runs[1].losses, rtol=roundoff)
    fused, unfused = runs[0].params(STEPS), runs[1].params(STEPS)
    assert sorted(fused) == sorted(unfused)
    for name, want in unfused.items():
        bound = (2 if want.ndim == 1 else 1) * roundoff * np.abs(want).max()
        diff = np.abs(fused[name] - want).max()
        assert diff <= bound, f"{name}: max|diff| {diff:.3g} > {bound:.3g}"


def test_both_fusions_together_train_as_the_unfused_step(fsdp, fsdp_opt,
                                                         tmp_path):
    """The GPU kit's fused step: fuse-add-layer-norm and fuse-bias-gelu on
    together (their patterns do not overlap) still train bit for bit as the
    unfused step on 2 CPU ranks."""
    base = f"world-size=2 {BASE} optimizer=adamw lower=true"
    both = _step(fsdp_opt, tmp_path,
                 f"{base} fuse-bias-gelu=true fuse-add-layer-norm=true",
                 "both")
    plain = _step(fsdp_opt, tmp_path, base, "plain")
    text = both.read_text()
    for kernel in ("linear_gelu_forward", "linear_gelu_backward",
                   "add_layer_norm_forward", "add_layer_norm_backward"):
        assert text.count(f"llvm.call @fsdprt_{kernel}(") >= 2, kernel
    assert_two_rank_runs_alike(fsdp, (both, plain))
