"""Activation checkpointing (`activation-checkpointing=KINDS|all`,
PyTorch's checkpoint_wrapper around the wrapped modules): the backward
recomputes each checkpointed unit's forward instead of keeping its
activations. The recompute runs the same kernels on the same values, and
dropout masks are a function of the site and the step, so training is
bit-identical to the plain run (losses and every weight), while the
report's activation memory and the measured peak drop.

GPT-2 with dropout 0.1, every Block a unit, under full-shard (the recompute
gathers the Block again), shard-grad-op with 2 micro-batches and hybrid
sharding on 4 ranks.

Selective checkpointing (`activation-checkpointing-policy=selective`)
recomputes only the cheap ops from the kept matmul and attention results:
the same kernels again, so also bit-identical, keeping fewer activations
than the plain run and more than whole-unit checkpointing; on GPT-2 with
dropout, the demo's char_gpt (no dropout) and Llama (RoPE recomputed
before the kept attention, whose gradient reads the forward's softmax
statistics), 2 ranks."""
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import EXAMPLES, REPO_ROOT, program_info

sys.path.insert(0, str(REPO_ROOT / "python"))
from fsdp_mlir import models  # noqa: E402

STEPS = 4
CONFIGS = [("full-shard", 2, 1, "Block"),
           ("shard-grad-op", 2, 2, "Block"),
           ("hybrid-shard", 4, 1, "all")]


def _activations(program):
    report = program_info(program)["report"]
    return int(re.search(r"activations for backward\s+(\d+)", report).group(1))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("checkpointing") / "gpt2_dropout.mlir"
    path.write_text(models.build("gpt2", dropout=0.1).text())
    return path


def compile(fsdp_opt, model, strategy, ranks, accum, checkpointing,
            policy=None, out_dir=None, kind="Block"):
    out = (out_dir or model.parent) / (
        f"{model.stem}-{strategy}-{ranks}-{accum}-{checkpointing}-{policy}"
        ".mlir")
    options = (f"world-size={ranks} sharding-strategy={strategy} "
               f"grad-accum-steps={accum} auto-wrap-policy=module-kind "
               f"wrap-kinds={kind} optimizer=adamw lr=3e-3 lower=true")
    if strategy == "hybrid-shard":
        options += " shard-group-size=2"
    if checkpointing:
        options += f" activation-checkpointing={checkpointing}"
    if policy:
        options += f" activation-checkpointing-policy={policy}"
    proc = subprocess.run([str(fsdp_opt), str(model),
                           f"--fsdp-pipeline={options}", "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def assert_same_training(runs):
    """Both runs' losses and final weights are equal, bit for bit."""
    assert runs[0].losses == runs[1].losses
    want, got = runs[0].params(STEPS), runs[1].params(STEPS)
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def peak(run):
    """The highest arena peak any rank measured over the run's steps."""
    return max(m["peak_bytes"] for m in run.metrics)


@pytest.mark.parametrize("config", CONFIGS,
                         ids=["-".join(map(str, c)) for c in CONFIGS])
def test_bit_identical_with_less_memory(fsdp, fsdp_opt, model, config):
    strategy, ranks, accum, kinds = config
    plain = compile(fsdp_opt, model, strategy, ranks, accum, None)
    checkpointed = compile(fsdp_opt, model, strategy, ranks, accum, kinds)
    assert _activations(checkpointed) < _activations(plain) / 4

    runs = [fsdp.run(p, nproc=ranks, steps=STEPS, seed=2)
            for p in (plain, checkpointed)]
    assert_same_training(runs)
    peaks = [peak(run) for run in runs]
    assert peaks[1] < peaks[0], peaks


SELECTIVE = [("full-shard", 1), ("shard-grad-op", 2)]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("checkpointing") / "llama.mlir"
    path.write_text(models.build("llama").text())
    return path


@pytest.mark.parametrize("name", ["gpt2_dropout", "char_gpt", "llama"])
@pytest.mark.parametrize("config", SELECTIVE,
                         ids=["-".join(map(str, c)) for c in SELECTIVE])
def test_selective_bit_identical_between_plain_and_whole_unit(
        fsdp, fsdp_opt, model, llama, tmp_path, name, config):
    strategy, accum = config
    source, kind = {"gpt2_dropout": (model, "Block"),
                    "char_gpt": (EXAMPLES / "char_gpt.mlir", "Block"),
                    "llama": (llama, "LlamaDecoderLayer")}[name]
    plain, selective, whole = (
        compile(fsdp_opt, source, strategy, 2, accum, kinds, policy,
                out_dir=tmp_path, kind=kind)
        for kinds, policy in ((None, None), (kind, "selective"),
                              (kind, None)))
    kept = [_activations(p) for p in (plain, selective, whole)]
    assert kept[0] > kept[1] > kept[2], kept

    runs = [fsdp.run(p, nproc=2, steps=STEPS, seed=2)
            for p in (plain, selective)]
    assert_same_training(runs)
    peaks = [peak(run) for run in runs]
    print(f"{name} {strategy}: activations plain / selective / unit {kept}, "
          f"measured peak plain / selective {peaks}")
    assert peaks[1] < peaks[0], peaks
