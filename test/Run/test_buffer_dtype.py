"""MixedPrecision's buffer_dtype: TransformerWithSharedParams in training mode
(BatchNorm updates its running statistics every step) compiled with
param-dtype=bf16 buffer-dtype=bf16 lowers and trains on 2 ranks. Its
floating-point buffers are held in bf16 for the whole run, as FSDP keeps
them once cast: the checkpoint stores them in bf16, the statistics move,
and the losses stay within bf16's reach of the f32 run's."""
import json
import struct
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file

from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "python"))
from fsdp_mlir import models  # noqa: E402

STEPS = 4


def safetensors_header(path):
    """The header of a safetensors file and where its data starts (numpy
    cannot read bf16)."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return header, 8 + size


def safetensors_dtypes(path):
    return {k: v["dtype"] for k, v in safetensors_header(path)[0].items()}


def bf16_tensor(path, name):
    header, start = safetensors_header(path)
    begin, end = header[name]["data_offsets"]
    raw = np.frombuffer(open(path, "rb").read()[start + begin:start + end],
                        np.uint16)
    return (raw.astype(np.uint32) << 16).view(np.float32)


@pytest.fixture(scope="module")
def runs(fsdp, fsdp_opt, tmp_path_factory):
    d = tmp_path_factory.mktemp("buffer_dtype")
    (d / "model.mlir").write_text(
        models.transformer_with_shared_params(training=True).text())
    rng = np.random.default_rng(0)
    save_file({"input.0": rng.integers(0, 23, (16, 6)).astype(np.int64),
               "input.1": rng.integers(0, 23, (16, 4)).astype(np.int64)},
              str(d / "data.safetensors"))
    out = {}
    for name, policy in (("f32", None),
                         ("bf16", "param-dtype=bf16 buffer-dtype=bf16")):
        program = d / f"{name}.mlir"
        cmd = [str(fsdp_opt), str(d / "model.mlir")]
        if policy:
            cmd.append(f"--fsdp-mixed-precision={policy}")
        cmd += ["--fsdp-pipeline=world-size=2 auto-wrap-policy=none "
                "lower=true", "-o", str(program)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        out[name] = fsdp.run(program, nproc=2, steps=STEPS, seed=1,
                             extra_args=["--data", str(d / "data.safetensors")])
    return out


def test_buffers_are_held_in_bf16(runs):
    run = runs["bf16"]
    dtypes = safetensors_dtypes(run.save_dir / f"step-{STEPS}.safetensors")
    assert dtypes["bn.running_mean"] == "BF16"
    assert dtypes["bn.running_var"] == "BF16"
    assert dtypes["vocab_bias"] == "BF16"
    assert dtypes["long_buffer"] == "I64"  # integers keep their dtype
    f32 = safetensors_dtypes(runs["f32"].save_dir / f"step-{STEPS}.safetensors")
    assert f32["bn.running_mean"] == "F32"


def test_running_statistics_move_in_bf16(runs):
    from safetensors.numpy import load_file
    path = runs["bf16"].save_dir / f"step-{STEPS}.safetensors"
    mean = bf16_tensor(path, "bn.running_mean")  # initialised to zeros
    assert np.any(mean != 0)
    ref = load_file(str(runs["f32"].save_dir / f"step-{STEPS}.safetensors"))
    np.testing.assert_allclose(mean, ref["bn.running_mean"], rtol=0.05,
                               atol=0.02)


def test_trains_close_to_f32(runs):
    bf16 = [m["loss"] for m in runs["bf16"].metrics]
    f32 = [m["loss"] for m in runs["f32"].metrics]
    assert len(bf16) == STEPS and all(np.isfinite(bf16))
    np.testing.assert_allclose(bf16, f32, rtol=0.02)
