"""Activation checkpointing (`activation-checkpointing=KINDS|all`,
PyTorch's checkpoint_wrapper around the wrapped modules): the backward
recomputes each checkpointed unit's forward instead of keeping its
activations. The recompute runs the same kernels on the same values, and
dropout masks are a function of the site and the step, so training is
bit-identical to the plain run (losses and every weight), while the
report's activation memory and the measured peak drop.

GPT-2 with dropout 0.1, every Block a unit, under full-shard (the recompute
gathers the Block again), shard-grad-op with 2 micro-batches and hybrid
sharding on 4 ranks."""
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT, program_info

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


def compile(fsdp_opt, model, strategy, ranks, accum, checkpointing):
    out = model.with_name(f"{strategy}-{ranks}-{accum}-{checkpointing}.mlir")
    options = (f"world-size={ranks} sharding-strategy={strategy} "
               f"grad-accum-steps={accum} auto-wrap-policy=module-kind "
               "wrap-kinds=Block optimizer=adamw lr=3e-3 lower=true")
    if strategy == "hybrid-shard":
        options += " shard-group-size=2"
    if checkpointing:
        options += f" activation-checkpointing={checkpointing}"
    proc = subprocess.run([str(fsdp_opt), str(model),
                           f"--fsdp-pipeline={options}", "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("config", CONFIGS,
                         ids=["-".join(map(str, c)) for c in CONFIGS])
def test_bit_identical_with_less_memory(fsdp, fsdp_opt, model, config):
    strategy, ranks, accum, kinds = config
    plain = compile(fsdp_opt, model, strategy, ranks, accum, None)
    checkpointed = compile(fsdp_opt, model, strategy, ranks, accum, kinds)
    assert _activations(checkpointed) < _activations(plain) / 4

    runs = [fsdp.run(p, nproc=ranks, steps=STEPS, seed=2)
            for p in (plain, checkpointed)]
    assert runs[0].losses == runs[1].losses
    want, got = runs[0].params(STEPS), runs[1].params(STEPS)
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    peaks = [max(m["peak_bytes"] for m in run.metrics) for run in runs]
    assert peaks[1] < peaks[0], peaks
