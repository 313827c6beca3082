"""fsdp-pack-attention end to end: GPT-2's attention on its packed c_attn
output (no split, no concat) trains exactly as the split program: the same
losses and weights, bit for bit (on the CPU the attention kernels read
contiguous copies of the slices; the copies are the split's). The compiled
step holds no split or concat of q, k, v. Its backward reads the forward's
softmax statistics (fsdp-keep-attention-stats), as Llama's nn.attention
does, where the backward without them computes them again: the same bits,
on the CPU and through the CUDA backend's code (cuda_emu).
"""
import subprocess

import numpy as np
import pytest

from conftest import EXAMPLES
from fsdp_mlir import models
from test_cuda_emu import emu_run  # noqa: F401 (a fixture)
from test_parity import STEPS


def _step(fsdp_opt, tmp_path, options, name, source=EXAMPLES / "gpt2.mlir"):
    out = tmp_path / f"{name}.mlir"
    subprocess.run([str(fsdp_opt), str(source),
                    f"--fsdp-pipeline={options}", "-o", str(out)], check=True)
    return out


def _assert_trained_alike(run, reference):
    """The same losses and final weights, bit for bit."""
    assert run.losses == reference.losses
    want = reference.params(STEPS)
    for name, value in run.params(STEPS).items():
        assert np.array_equal(value, want[name]), name


@pytest.mark.parametrize("ranks,extra", [(1, "optimizer=adamw"),
                                         (2, "optimizer=sgd param-dtype=bf16")])
def test_packed_attention_trains_as_the_split_one(fsdp, fsdp_opt, tmp_path,
                                                  ranks, extra):
    base = (f"world-size={ranks} auto-wrap-policy=module-kind "
            f"wrap-kinds=Block {extra} lower=true")
    runs = []
    for pack in ("true", "false"):
        step = _step(fsdp_opt, tmp_path, f"{base} pack-attention={pack}", pack)
        runs.append(fsdp.run(step, nproc=ranks, steps=STEPS))
    _assert_trained_alike(*runs)


def test_packed_step_has_no_split_or_concat(fsdp_opt, tmp_path):
    options = "world-size=1 auto-wrap-policy=module-kind wrap-kinds=Block"

    def train_step(name, extra=""):
        text = _step(fsdp_opt, tmp_path, f"{options} {extra}", name)
        text = text.read_text()
        return text[text.index("func.func @gpt2_train_step"):]

    packed = train_step("packed")
    assert packed.count("nn.packed_attention ") == 2  # one per block
    assert packed.count("keep_stats") == 2
    assert packed.count("nn.packed_attention_grad") == 2
    assert packed.count(" saved %") == 2
    assert "nn.split" not in packed and "nn.concat" not in packed
    split = train_step("split", "pack-attention=false")
    assert split.count("nn.split") == 2 and split.count("nn.concat") == 2


@pytest.mark.parametrize("model,wrap", [("gpt2", "Block"),
                                        ("llama_tiny", "LlamaDecoderLayer")])
def test_kept_statistics_change_nothing_on_the_cuda_backend(
        fsdp, fsdp_opt, emu_run, tmp_path, model, wrap):  # noqa: F811
    """bf16 GPT-2 (packed attention) and Llama (nn.attention: rotated q, k,
    grouped heads) through the CUDA backend's code: the backward reading
    the forward's statistics trains as the one computing them again."""
    source = tmp_path / f"{model}.mlir"
    source.write_text(models.build(model).text())
    base = (f"world-size=1 auto-wrap-policy=module-kind wrap-kinds={wrap} "
            "optimizer=adamw param-dtype=bf16")
    step = _step(fsdp_opt, tmp_path, base, f"{model}-ir", source).read_text()
    assert step.count("keep_stats") == step.count(" saved %") == 2  # layers
    base += " lower=true"
    runs = [fsdp.run(fsdp.library(_step(fsdp_opt, tmp_path,
                                        f"{base} keep-attention-stats={keep}",
                                        f"{model}-keep-{keep}", source)),
                     steps=STEPS, tool=emu_run, backend="cuda_emu")
            for keep in ("true", "false")]
    _assert_trained_alike(*runs)
