"""Checkpoints: exact resume, the full format's interoperability, resharding
a sharded checkpoint to other world sizes, and clear errors for bad ones.
"""
import shutil

import numpy as np
import pytest

from conftest import MODELS, load_full, model_parameters

RANKS = 2


def _gpt2(fsdp, ranks=RANKS, grad_accum=1, optimizer="adamw", **kw):
    return fsdp.compile("gpt2", world_size=ranks, strategy="full-shard",
                        optimizer=optimizer, grad_accum=grad_accum, **kw)


@pytest.mark.parametrize("model,optimizer,fmt", [
    ("gpt2", "adamw", "full"),
    ("gpt2", "adamw", "sharded"),
    ("nested_wrapped", "sgd", "sharded"),
    ("gpt2", "lion", "sharded"),
    ("nested_wrapped", "adam", "full"),
    ("gpt2", "adafactor", "sharded"),
    ("nested_wrapped", "adafactor", "full"),
])
def test_resume_is_bit_identical(fsdp, model, optimizer, fmt):
    program = fsdp.compile(model, world_size=RANKS, strategy="full-shard",
                           optimizer=optimizer)
    whole = fsdp.run(program, nproc=RANKS, steps=6, save_every=3,
                     save_format=fmt)
    assert [m["step"] for m in whole.metrics] == [1, 2, 3, 4, 5, 6]
    step3 = whole.save_dir / ("step-3.safetensors" if fmt == "full" else "step-3")
    assert step3.exists()
    resumed = fsdp.run(program, nproc=RANKS, steps=6, load=step3,
                       save_format=fmt)
    assert [m["step"] for m in resumed.metrics] == [4, 5, 6]
    assert resumed.losses == whole.losses[3:]
    if fmt == "full":
        a, b = load_full(resumed.checkpoint(6)), load_full(whole.checkpoint(6))
        assert sorted(a) == sorted(b)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    else:
        for shard in sorted((whole.save_dir / "step-6").iterdir()):
            other = resumed.save_dir / "step-6" / shard.name
            a, b = load_full(other), load_full(shard)
            assert sorted(a) == sorted(b)
            for name in a:
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("model", MODELS)
def test_full_checkpoint_in_safetensors(fsdp, model):
    from safetensors import safe_open
    program = fsdp.compile(model, world_size=RANKS, strategy="full-shard",
                           optimizer="adamw")
    run = fsdp.run(program, nproc=RANKS, steps=1)
    expected = model_parameters(model)
    if model == "gpt2":
        assert expected["transformer.wte.weight"] == (64, 32)
    tensors = load_full(run.checkpoint(1))
    params = {k: v for k, v in tensors.items() if not k.startswith("optim.")}
    assert {k: v.shape for k, v in params.items()} == expected
    assert all(v.dtype == np.float32 for v in tensors.values())
    for state in ("exp_avg", "exp_avg_sq"):
        assert {k[len(f"optim.{state}."):]: v.shape for k, v in tensors.items()
                if k.startswith(f"optim.{state}.")} == expected
    assert len(tensors) == 3 * len(expected)
    with safe_open(str(run.checkpoint(1)), framework="numpy") as f:
        meta = f.metadata()
    assert meta["model"] == model and meta["step_count"] == "1"
    assert meta["optimizer"] == "adamw"


def test_adafactor_state_is_torchs_and_reshards(fsdp):
    """Adafactor's whole (replicated) state is saved per parameter under
    torch.optim.Adafactor's names and shapes, in the full file and in every
    rank file of a sharded checkpoint; a 2-rank sharded checkpoint resumes
    on 1 rank (2 micro-batches: the same global batch), continuing the
    uninterrupted run."""
    program = _gpt2(fsdp, optimizer="adafactor")
    whole = fsdp.run(program, nproc=RANKS, steps=4, save_every=2,
                     save_format="sharded")
    full = fsdp.run(program, nproc=RANKS, steps=2, save_format="full")
    assert full.losses == whole.losses[:2]
    tensors = load_full(full.checkpoint(2))
    assert tensors["optim.row_var.transformer.wte.weight"].shape == (64, 1)
    assert tensors["optim.col_var.transformer.wte.weight"].shape == (1, 32)
    assert tensors["optim.variance.transformer.ln_f.bias"].shape == (32,)
    assert not any(".second_moment." in k or "exp_avg" in k for k in tensors)
    for rank_file in sorted((whole.save_dir / "step-2").iterdir()):
        saved = load_full(rank_file)
        for name, value in tensors.items():
            if name.startswith("optim."):
                np.testing.assert_array_equal(saved[name], value,
                                              err_msg=f"{rank_file}: {name}")
    one = fsdp.run(_gpt2(fsdp, ranks=1, grad_accum=2, optimizer="adafactor"),
                   steps=4, load=whole.save_dir / "step-2")
    assert [m["step"] for m in one.metrics] == [3, 4]
    # One rank sums the micro-batches' gradients in another order: float
    # noise of a few ulps in the losses.
    for got, want in zip(one.losses, whole.losses[2:]):
        assert abs(got - want) <= 1e-5 * abs(want), (one.losses, whole.losses)


@pytest.fixture(scope="module")
def sharded_2rank(fsdp):
    """gpt2 on 2 ranks for 6 steps, sharded checkpoints at 3 and 6, plus the
    full checkpoint of an independent 3-step run (the same state)."""
    whole = fsdp.run(_gpt2(fsdp), nproc=RANKS, steps=6, save_every=3,
                     save_format="sharded")
    files = sorted(p.name for p in (whole.save_dir / "step-3").iterdir())
    assert files == ["rank-0-of-2.safetensors", "rank-1-of-2.safetensors"]
    full3 = fsdp.run(_gpt2(fsdp), nproc=RANKS, steps=3, save_format="full")
    assert full3.losses == whole.losses[:3]
    return whole, full3


def test_sharded_2_to_1(fsdp, sharded_2rank):
    """1 rank x 2 micro-batches sees the 2-rank global batch: the resumed run
    continues the uninterrupted one."""
    whole, _ = sharded_2rank
    one = fsdp.run(_gpt2(fsdp, ranks=1, grad_accum=2), steps=6,
                   load=whole.save_dir / "step-3")
    assert [m["step"] for m in one.metrics] == [4, 5, 6]
    for got, want in zip(one.losses, whole.losses[3:]):
        assert abs(got - want) <= 1e-5 * abs(want), (one.losses, whole.losses)


def test_sharded_2_to_4(fsdp, sharded_2rank):
    """4 ranks see a global batch twice as large, so nothing is comparable
    with the 2-rank run after a step. Instead: with lr=0 a step leaves the
    loaded weights as they were, and the re-saved full checkpoint equals the
    2-rank state exactly; and a normal step on 4 ranks matches one on 1 rank
    with 4 micro-batches from the same checkpoint (loss, weights and
    optimizer state), which checks the resharded optimizer state too."""
    whole, full3 = sharded_2rank
    ckpt = whole.save_dir / "step-3"
    frozen = fsdp.run(_gpt2(fsdp, ranks=4, lr=0.0), nproc=4, steps=4,
                      load=ckpt)
    saved, original = frozen.params(4), full3.params(3)
    assert sorted(saved) == sorted(original)
    for name in original:
        np.testing.assert_array_equal(saved[name], original[name], err_msg=name)

    four = fsdp.run(_gpt2(fsdp, ranks=4), nproc=4, steps=4, load=ckpt)
    one = fsdp.run(_gpt2(fsdp, ranks=1, grad_accum=4), steps=4, load=ckpt)
    assert frozen.losses == four.losses  # the same weights, the same batch
    assert abs(four.losses[0] - one.losses[0]) <= 1e-5 * abs(one.losses[0])
    a, b = load_full(four.checkpoint(4)), load_full(one.checkpoint(4))
    for name in b:
        scale = float(np.max(np.abs(b[name]))) or 1.0
        # exp_avg_sq holds squares: compare it on its own scale too.
        assert float(np.max(np.abs(a[name] - b[name]))) <= 1e-5 * scale + 1e-6, name


def _assert_fails(run, *words):
    assert run.returncode != 0, f"{run.command} succeeded"
    text = run.stderr.lower()
    for w in words:
        assert w.lower() in text, f"{w!r} not in stderr:\n{run.stderr}"


def test_missing_checkpoint(fsdp, tmp_path):
    run = fsdp.run(_gpt2(fsdp), nproc=RANKS, steps=2, save=False,
                   load=tmp_path / "nothing-here.safetensors", check=False)
    _assert_fails(run, "nothing-here.safetensors", "does not exist")


def test_truncated_checkpoint(fsdp, sharded_2rank, tmp_path):
    _, full3 = sharded_2rank
    bad = tmp_path / "truncated.safetensors"
    shutil.copy(full3.checkpoint(3), bad)
    with open(bad, "r+b") as f:
        f.truncate(bad.stat().st_size // 2)
    run = fsdp.run(_gpt2(fsdp), nproc=RANKS, steps=4, save=False, load=bad,
                   check=False)
    _assert_fails(run, "truncated.safetensors", "truncated")


def test_truncated_sharded_checkpoint(fsdp, sharded_2rank, tmp_path):
    whole, _ = sharded_2rank
    bad = tmp_path / "step-3"
    shutil.copytree(whole.save_dir / "step-3", bad)
    victim = bad / "rank-1-of-2.safetensors"
    with open(victim, "r+b") as f:
        f.truncate(victim.stat().st_size - 100)
    run = fsdp.run(_gpt2(fsdp), nproc=RANKS, steps=4, save=False, load=bad,
                   check=False)
    _assert_fails(run, "rank-1-of-2.safetensors", "truncated")


def test_checkpoint_of_another_model(fsdp):
    mlp = fsdp.run(fsdp.compile("mlp", world_size=1, strategy="no-shard",
                                optimizer="adamw"), steps=1)
    run = fsdp.run(_gpt2(fsdp), nproc=RANKS, steps=2, save=False,
                   load=mlp.checkpoint(1), check=False)
    _assert_fails(run, "model 'mlp'", "not 'gpt2'")


@pytest.mark.parametrize("model", MODELS)
def test_seeded_init_is_identical_at_every_world_size(fsdp, model):
    """--steps 0 --save writes the initial weights: the same seed gives
    bit-identical parameters on 1, 2, 3 and 4 ranks (and a new seed others)."""
    def initial(ranks, seed):
        program = fsdp.compile(model, world_size=ranks, strategy="full-shard",
                               optimizer="adamw")
        run = fsdp.run(program, nproc=ranks, steps=0, seed=seed)
        assert run.metrics == []
        return run.params(0)

    ref = initial(1, 7)
    assert sorted(ref) == sorted(model_parameters(model))
    for ranks in (2, 3, 4):
        got = initial(ranks, 7)
        for name in ref:
            np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
    other = initial(2, 8)
    assert any(not np.array_equal(other[n], ref[n]) for n in ref)
