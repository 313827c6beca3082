"""Dropout in compiled steps (nn.dropout lowered to the runtime's Philox
masks): the backward applies the forward's mask, masks change with the step
and the seed, and N ranks drop what one rank with N micro-batches drops.

The model is loss = sum(dropout(x * w)) with x = 1, so after one SGD step
with lr = 1 the weight change w0 - w1 is the mask scaled by 1/(1 - p): the
forward's loss must be sum((w0 - w1) * w0)."""
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

P = 0.25
N = 1024

MODEL = f"""
fsdp.model @dropout_net {{
  fsdp.module @root kind "Net" unit {{
    fsdp.param @w : tensor<{N}xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%x: tensor<1x{N}xf32>) -> tensor<f32> {{
      %w = fsdp.get_param @w : tensor<{N}xf32>
      %y = nn.mul %x, %w : (tensor<1x{N}xf32>, tensor<{N}xf32>) -> tensor<1x{N}xf32>
      %d = nn.dropout %y {{p = {P} : f64, rng_id = 7 : i64}} : tensor<1x{N}xf32>
      %l = nn.reduce_sum %d {{dims = array<i64: 0, 1>}} : (tensor<1x{N}xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }}
  }}
}}
"""


@pytest.fixture(scope="module")
def programs(fsdp, fsdp_opt, tmp_path_factory):
    d = tmp_path_factory.mktemp("dropout")
    (d / "model.mlir").write_text(MODEL)
    save_file({"input.0": np.ones((4, N), np.float32)}, str(d / "ones.safetensors"))

    def compile(name, options):
        out = d / f"{name}.mlir"
        cmd = [str(fsdp_opt), str(d / "model.mlir"),
               f"--fsdp-pipeline=optimizer=sgd lr=1.0 lower=true {options}",
               "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return out

    return {"one": compile("one", "world-size=1"),
            "accum": compile("accum", "world-size=1 grad-accum-steps=2"),
            "two": compile("two", "world-size=2"),
            "data": str(d / "ones.safetensors")}


def train(fsdp, programs, name, steps, nproc=1, seed=None):
    run = fsdp.run(programs[name], nproc=nproc, steps=steps, seed=seed,
                   extra_args=["--data", programs["data"]])
    weights = load_file(str(run.save_dir / f"step-{steps}.safetensors"))["w"]
    return run, weights


def initial(fsdp, programs, seed=None):
    return train(fsdp, programs, "one", 0, seed=seed)[1]


def test_backward_applies_the_forward_mask(fsdp, programs):
    w0 = initial(fsdp, programs)
    run, w1 = train(fsdp, programs, "one", 1)
    delta = w0 - w1
    scale = 1 / (1 - P)
    kept = np.abs(delta - scale) < 1e-5
    dropped = np.abs(delta) < 1e-6
    assert np.all(kept | dropped), "every element is kept and scaled or zeroed"
    assert abs(kept.mean() - (1 - P)) < 0.06  # 4.4 sigma at N = 1024
    loss = run.metrics[0]["loss"]
    assert loss == pytest.approx(float(np.sum(delta * w0)), rel=1e-5)


def test_masks_change_with_the_step_and_the_seed(fsdp, programs):
    w0 = initial(fsdp, programs)
    _, w1 = train(fsdp, programs, "one", 1)
    _, w2 = train(fsdp, programs, "one", 2)
    first, second = (w0 - w1) > 1e-3, (w1 - w2) > 1e-3
    assert 0.1 < np.mean(first != second) < 0.6, "step 2 draws a new mask"
    _, again = train(fsdp, programs, "one", 1)
    assert np.array_equal(w1, again), "same seed and step: same mask"
    other0 = initial(fsdp, programs, seed=7)
    _, other1 = train(fsdp, programs, "one", 1, seed=7)
    assert np.mean(((other0 - other1) > 1e-3) != first) > 0.1


def test_ranks_drop_like_micro_batches(fsdp, programs):
    accum_run, accum = train(fsdp, programs, "accum", 2)
    two_run, two = train(fsdp, programs, "two", 2, nproc=2)
    for a, b in zip(accum_run.metrics, two_run.metrics):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-6)
    np.testing.assert_allclose(two, accum, rtol=0, atol=1e-5)
    # Each rank has its own mask: the averaged update is 0, scale/2 or scale.
    w0 = initial(fsdp, programs)
    _, one_step = train(fsdp, programs, "two", 1, nproc=2)
    halves = np.abs((w0 - one_step) - 0.5 / (1 - P)) < 1e-5
    assert 0.2 < halves.mean() < 0.55
