"""fsdp-pad-vocab end to end: a GPT-2 whose vocabulary (4099) is not a
multiple of 64 trains with its head padded to 4160 columns exactly as with
the head unpadded (pad-vocab=0): the padding columns take no part in the
loss, get a zero gradient, and the tied embedding's gradient is sliced back
to the vocabulary. The compiled step holds the padded logits, the fused
cross-entropy told num_classes, and nothing else of the head unpadded.
test_torch_import's gpt_vocab case checks the padded program against
PyTorch; test_cuda_emu trains it through the CUDA backend's kernels.
"""
import re
import subprocess

import pytest

from fsdp_mlir import driver, models
from test_parity import STEPS, PARAM_ATOL, compare_losses, compare_params

VOCAB, PADDED = 4099, 4160


def _compile(fsdp_opt, tmp_path, options):
    source = tmp_path / "gpt2_vocab.mlir"
    if not source.exists():
        source.write_text(models.build("gpt2", vocab=VOCAB).text())
    out = tmp_path / f"step-{abs(hash(options))}.mlir"
    subprocess.run([str(fsdp_opt), str(source),
                    f"--fsdp-pipeline={options}", "-o", str(out)], check=True)
    return out


def test_padded_step_holds_the_padded_logits(fsdp_opt, tmp_path):
    step = _compile(fsdp_opt, tmp_path, "world-size=2 auto-wrap-policy="
                    "module-kind wrap-kinds=Block param-dtype=bf16").read_text()
    assert re.search(rf"nn\.pad .*-> tensor<{PADDED}x32xbf16>", step)
    assert re.search(rf"nn\.linear .*-> tensor<4x16x{PADDED}xbf16>", step)
    fused = re.findall(r"nn\.cross_entropy_with_grad .*", step)
    assert len(fused) == 1 and f"num_classes = {VOCAB}" in fused[0], fused
    assert f"x{PADDED}xbf16>" in fused[0]
    # The tied weight's gradient is the padded one sliced back.
    assert re.search(rf"nn\.slice .*tensor<{PADDED}x32xbf16>\) -> "
                     rf"tensor<{VOCAB}x32xbf16>", step)
    unpadded = _compile(fsdp_opt, tmp_path, "world-size=2 auto-wrap-policy="
                        "module-kind wrap-kinds=Block pad-vocab=0").read_text()
    assert "num_classes" not in unpadded and f"x{PADDED}x" not in unpadded


@pytest.mark.parametrize("ranks", [1, 2])
def test_padded_head_trains_as_the_unpadded_one(fsdp, fsdp_opt, tmp_path,
                                                ranks):
    """SGD, linear in the gradients: AdamW would turn the attention key
    bias's exactly-zero gradient (float noise, summed in another order
    over the padded head) into lr-sized steps."""
    optimizer = "sgd"
    base = (f"world-size={ranks} auto-wrap-policy=module-kind "
            f"wrap-kinds=Block optimizer={optimizer} momentum=0.9 lr=1e-2 "
            "lower=true")
    runs = [fsdp.run(_compile(fsdp_opt, tmp_path, f"{base} pad-vocab={pad}"),
                     nproc=ranks, steps=STEPS) for pad in (64, 0)]
    padded, unpadded = runs
    assert not compare_losses(padded.losses, unpadded.losses, rtol=1e-6)
    params = padded.params(STEPS)
    assert params["transformer.wte.weight"].shape == (VOCAB, 32)
    assert not compare_params(params, unpadded.params(STEPS),
                              PARAM_ATOL[optimizer])


def test_eval_program_returns_the_vocabulary_s_logits(fsdp_opt, tmp_path):
    """An eval program returns the logits sliced back to the vocabulary:
    greedy generation (argmax over the returned logits) picks the tokens
    of the unpadded program, from the same initial weights."""
    samples = []
    for pad in (64, 0):
        step = _compile(fsdp_opt, tmp_path, "world-size=1 mode=eval "
                        f"pad-vocab={pad} lower=true")
        result = driver.run(step, nproc=1, seed=3, prompt_ids="5,4098,17",
                            generate=12, temperature=0, timeout=120)
        samples.append([row["tokens"] for row in result.metrics])
    assert samples[0] == samples[1] and len(samples[0][0]) == 12, samples
