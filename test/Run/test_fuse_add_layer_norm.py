"""fsdp-pipeline's fuse-add-layer-norm end to end: GPT-2 with each block's
residual add and the layer_norm of its sum as one nn.add_layer_norm, and
each block norm's input gradient and the residual gradient as one
nn.add_layer_norm_grad, trains exactly as the unfused program: the same
losses and weights, bit for bit, on 2 CPU ranks (f32 and bf16 parameters)
and through the CUDA backend's code (cuda_emu). The fused kernels round as
the unfused pairs do: the forward computes the sum with the add kernel's
rounding and normalises the stored sum with the layer_norm code; the
backward rounds the norm's input gradient to storage, then adds as the add
kernel does.
"""
import subprocess

import pytest

from conftest import EXAMPLES
from test_cuda_emu import emu_run  # noqa: F401 (a fixture)
from test_pack_attention import _assert_trained_alike
from test_parity import STEPS

BASE = "auto-wrap-policy=module-kind wrap-kinds=Block"


def _step(fsdp_opt, tmp_path, options, name):
    out = tmp_path / f"{name}.mlir"
    subprocess.run([str(fsdp_opt), str(EXAMPLES / "gpt2.mlir"),
                    f"--fsdp-pipeline={options}", "-o", str(out)], check=True)
    return out


def test_fused_step_has_one_fusion_per_block(fsdp_opt, tmp_path):
    """Within a block, the attention's residual sum feeds ln_2; the block's
    last sum feeds the next unit's ln_1 (or ln_f) and stays apart. In the
    backward both of a block's norms add their input gradient to the
    residual gradient; ln_f's also feeds the LM head and stays apart."""
    def train_step(name, fuse):
        text = _step(fsdp_opt, tmp_path,
                     f"world-size=1 {BASE} fuse-add-layer-norm={fuse}",
                     name).read_text()
        return text[text.index("func.func @gpt2_train_step"):]

    fused, plain = train_step("fused", "true"), train_step("plain", "false")
    assert fused.count("nn.add_layer_norm ") == 2
    assert plain.count("nn.add_layer_norm ") == 0
    assert (plain.count("nn.layer_norm ") - fused.count("nn.layer_norm ")
            == 2)
    assert fused.count("nn.add_layer_norm_grad ") == 4
    assert plain.count("nn.add_layer_norm_grad ") == 0
    assert (plain.count("nn.layer_norm_grad ")
            - fused.count("nn.layer_norm_grad ") == 4)


def _lowered(fsdp_opt, tmp_path, base, name):
    """The fused and the unfused lowered programs, the first calling the
    fused forward kernel (twice per block when the block is recomputed) and
    the fused backward kernel (twice per block)."""
    steps = [_step(fsdp_opt, tmp_path, f"{base} fuse-add-layer-norm={fuse}",
                   f"{name}-{fuse}") for fuse in ("true", "false")]
    texts = [s.read_text() for s in steps]
    calls = [text.count("llvm.call @fsdprt_add_layer_norm_forward(")
             for text in texts]
    assert calls[0] in (2, 4) and calls[1] == 0, calls
    calls = [text.count("llvm.call @fsdprt_add_layer_norm_backward(")
             for text in texts]
    assert calls == [4, 0], calls
    return steps


# The settings under which a fusion must train bit for bit as the unfused
# step on 2 CPU ranks: AdamW, bf16 SGD, recomputed blocks.
TWO_RANK_SETTINGS = ["optimizer=adamw", "optimizer=sgd param-dtype=bf16",
                     "optimizer=sgd activation-checkpointing=Block"]


def run_on_cuda_emu(fsdp, emu_run, steps):
    """Each lowered one-rank step trained through the CUDA backend's code
    (the host emulation)."""
    return [fsdp.run(fsdp.library(step), steps=STEPS, tool=emu_run,
                     backend="cuda_emu") for step in steps]


def assert_two_rank_runs_alike(fsdp, steps):
    """The lowered steps train alike on 2 CPU ranks, bit for bit."""
    runs = [fsdp.run(step, nproc=2, steps=STEPS) for step in steps]
    assert len(runs[0].losses) == STEPS
    _assert_trained_alike(*runs)


@pytest.mark.parametrize("extra", TWO_RANK_SETTINGS)
def test_fused_step_trains_as_the_unfused_one(fsdp, fsdp_opt, tmp_path,
                                              extra):
    base = f"world-size=2 {BASE} {extra} lower=true"
    assert_two_rank_runs_alike(fsdp,
                               _lowered(fsdp_opt, tmp_path, base, "cpu"))


def test_fused_step_trains_as_the_unfused_one_on_cuda_emu(
        fsdp, fsdp_opt, emu_run, tmp_path):  # noqa: F811
    base = f"world-size=1 {BASE} optimizer=adamw param-dtype=bf16 lower=true"
    runs = run_on_cuda_emu(fsdp, emu_run,
                           _lowered(fsdp_opt, tmp_path, base, "emu"))
    assert len(runs[0].losses) == STEPS
    _assert_trained_alike(*runs)
