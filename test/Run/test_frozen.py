"""Frozen parameters (requires_grad = false) lower and train: examples/mlp.mlir
with fc1's weight frozen, in the root unit beside trainable parameters, with
gradient clipping. The unit's frozen parameters form a second flat
parameter, sharded and gathered like the first but never reduced or updated;
a frozen parameter is initialised as a trainable one would be and saved in
the checkpoint under its name (sharded checkpoints: the unit's
`frozen_flat_param`). 3 ranks (full-shard, hybrid is not possible at 3,
shard-grad-op) match one rank accumulating 3 micro-batches (the same rows:
fsdp-run's sampler interleaves ranks as micro-batches), and a sharded
checkpoint of the 3-rank run resumes on one rank."""
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import EXAMPLES

STEPS = 5
RANKS = 3


@pytest.fixture(scope="module")
def frozen(fsdp, fsdp_opt, tmp_path_factory):
    d = tmp_path_factory.mktemp("frozen")
    source = (EXAMPLES / "mlp.mlir").read_text()
    marked = source.replace(
        "init <kaiming_uniform(2.23606797749979)>",
        "init <kaiming_uniform(2.23606797749979)> {requires_grad = false}", 1)
    assert marked != source
    (d / "model.mlir").write_text(marked)
    rng = np.random.default_rng(0)
    rows = 8 * RANKS * STEPS
    save_file({"input.0": rng.standard_normal((rows, 16)).astype(np.float32),
               "input.1": rng.standard_normal((rows, 4)).astype(np.float32)},
              str(d / "data.safetensors"))

    def compile(name, options):
        out = d / f"{name}.mlir"
        cmd = [str(fsdp_opt), str(d / "model.mlir"),
               "--fsdp-pipeline=optimizer=adamw lr=0.01 clip-grad-norm=0.5 "
               f"lower=true {options}", "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return out

    return {"one": compile("one", f"world-size=1 grad-accum-steps={RANKS}"),
            "full": compile("full", f"world-size={RANKS}"),
            "zero2": compile("zero2", f"world-size={RANKS} "
                                      "sharding-strategy=shard-grad-op"),
            "data": str(d / "data.safetensors")}


def train(fsdp, frozen, name, steps, nproc=1):
    run = fsdp.run(frozen[name], nproc=nproc, steps=steps, seed=3,
                   extra_args=["--data", frozen["data"]])
    return run, load_file(str(run.save_dir / f"step-{steps}.safetensors"))


def test_frozen_weight_is_described_and_never_updated(fsdp, frozen):
    _, initial = train(fsdp, frozen, "one", 0)
    _, trained = train(fsdp, frozen, "one", STEPS)
    assert "fc1.weight" in trained, "the checkpoint holds the frozen weight"
    np.testing.assert_array_equal(trained["fc1.weight"], initial["fc1.weight"])
    for name in ("fc1.bias", "fc2.weight", "fc3.weight"):
        assert not np.array_equal(trained[name], initial[name]), name
    # Initialised as a trainable weight is: nn.Linear's kaiming bound.
    bound = 1 / np.sqrt(16)
    weight = initial["fc1.weight"]
    assert weight.std() > bound / 4 and np.abs(weight).max() <= bound


@pytest.mark.parametrize("strategy", ["full", "zero2"])
def test_sharded_matches_one_rank(fsdp, frozen, strategy):
    one, ref = train(fsdp, frozen, "one", STEPS)
    run, got = train(fsdp, frozen, strategy, STEPS, nproc=RANKS)
    np.testing.assert_allclose([m["loss"] for m in run.metrics],
                               [m["loss"] for m in one.metrics], rtol=1e-5)
    assert got.keys() == ref.keys()
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5,
                                   atol=1e-5, err_msg=name)


def test_sharded_checkpoint_resumes_on_one_rank(fsdp, frozen):
    whole = fsdp.run(frozen["full"], nproc=RANKS, steps=STEPS, seed=3,
                     save_every=2, save_format="sharded",
                     extra_args=["--data", frozen["data"]])
    names = set()
    for part in (whole.save_dir / "step-2").iterdir():
        names |= set(load_file(str(part)))
    # The frozen flat parameter has no optimizer state.
    assert {n for n in names if n.startswith("_root/")} == {
        "_root/flat_param", "_root/frozen_flat_param", "_root/exp_avg",
        "_root/exp_avg_sq"}
    resumed = fsdp.run(frozen["one"], steps=STEPS, seed=3,
                       load=whole.save_dir / "step-2",
                       extra_args=["--data", frozen["data"]])
    assert [m["step"] for m in resumed.metrics] == list(range(3, STEPS + 1))
    np.testing.assert_allclose(resumed.losses, whole.losses[2:], rtol=1e-5)
    got = load_file(str(resumed.save_dir / f"step-{STEPS}.safetensors"))
    _, want = train(fsdp, frozen, "one", STEPS)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5,
                                   atol=1e-5, err_msg=name)
