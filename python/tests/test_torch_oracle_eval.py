"""Forward-only (eval) programs against torch: `fsdp-pipeline mode=eval`
compiles the sharded forward alone, as model.eval() under torch.no_grad()
(dropout off, BatchNorm on its running statistics, no backward, optimizer or
gradient memory). fsdp-run loads a training checkpoint into it and
evaluates `--steps N` batches.

Cases: GPT-2 with dropout 0.1 trained 3 steps on 2 ranks, then evaluated on
a held-out set at 1, 2 and 4 ranks (any world size reads the checkpoint)
against torch's eval-mode loss on the same weights and rows; and
TransformerWithSharedParams in training mode (its BatchNorm updates running
statistics while training), whose eval program normalises with the saved
statistics as torch's model.eval() does.

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_torch_oracle_eval.py
"""
from __future__ import annotations

import math
import re
import subprocess

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")

from fsdp_mlir import driver, models  # noqa: E402

from test_torch_oracle import LOSS_RTOL, NUM_SAMPLES, SEED  # noqa: E402
from torch_reference import GPT, TransformerWithSharedParams  # noqa: E402

TRAIN_RANKS = 2
BATCH = 4  # per rank
EVAL_BATCHES = 3


def gpt_tensors(rng):
    return {"input.0": rng.integers(0, 64, (NUM_SAMPLES, 16), np.int64),
            "input.1": rng.integers(0, 64, (NUM_SAMPLES, 16), np.int64)}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """GPT-2 (dropout 0.1) after 3 AdamW steps on 2 ranks: the checkpoint,
    and a held-out dataset."""
    work = tmp_path_factory.mktemp("eval_oracle")
    rng = np.random.default_rng(11)
    train_data, held_out = work / "train.safetensors", work / "val.safetensors"
    st_numpy.save_file(gpt_tensors(rng), str(train_data))
    val = gpt_tensors(rng)
    st_numpy.save_file(val, str(held_out))
    model = models.build("gpt2", dropout=0.1)
    prog = driver.compile(model, work / "train.mlir", world_size=TRAIN_RANKS,
                          wrap_kinds=["Block"], optimizer="adamw", lr=3e-3)
    driver.run(prog, nproc=TRAIN_RANKS, steps=3, seed=SEED, data=train_data,
               save=work / "ckpt", timeout=120)
    return work, model, work / "ckpt" / "step-3.safetensors", held_out, val


def torch_eval_losses(state, tensors, global_batch):
    """torch: the checkpoint's weights, model.eval(), torch.no_grad(); batch
    s takes rows (s*G + j) mod N as fsdp-run's sampler does."""
    model = GPT()
    model.load_state_dict({k: torch.from_numpy(v.copy())
                           for k, v in state.items()
                           if not k.startswith("optim.")})
    model.eval()
    x, y = (torch.from_numpy(tensors[f"input.{i}"]) for i in range(2))
    losses = []
    with torch.no_grad():
        for s in range(EVAL_BATCHES):
            rows = torch.tensor([(s * global_batch + j) % NUM_SAMPLES
                                 for j in range(global_batch)])
            losses.append(model(x[rows], y[rows]).item())
    return losses


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_eval_matches_torch_no_grad(trained, ranks):
    work, model, ckpt, held_out, val = trained
    prog = driver.compile(model, work / f"eval-{ranks}.mlir", world_size=ranks,
                          wrap_kinds=["Block"], mode="eval")
    result = driver.run(prog, nproc=ranks, steps=EVAL_BATCHES, seed=SEED,
                        data=held_out, load=ckpt, timeout=120)
    ours = [m["loss"] for m in result.metrics]
    ref = torch_eval_losses(st_numpy.load_file(str(ckpt)), val,
                            BATCH * ranks)
    assert len(ours) == EVAL_BATCHES
    for a, b in zip(ours, ref):
        assert math.isclose(a, b, rel_tol=LOSS_RTOL), (ours, ref)
    mean = sum(ours) / len(ours)
    assert f"eval: mean loss {mean:.6g} over {EVAL_BATCHES} batches" \
        in result.stdout


def test_eval_program_has_no_backward(trained):
    work, model, *_ = trained
    prog = driver.compile(model, work / "eval-report.mlir", world_size=2,
                          wrap_kinds=["Block"], mode="eval", report=True,
                          lower=False)
    text = prog.read_text()
    assert "func.func @gpt2_eval_step" in text
    text = text[text.index("func.func @gpt2_eval_step"):]  # not the model
    assert "fsdp.reduce_grads" not in text and "adamw_step" not in text
    assert "nn.dropout" not in text
    assert "phase backward" not in text


def test_training_options_are_refused(trained):
    work, model, ckpt, held_out, _ = trained
    prog = driver.compile(model, work / "eval-refuse.mlir", world_size=1,
                          wrap_kinds=["Block"], mode="eval")
    with pytest.raises(driver.RunError) as e:
        driver.run(prog, nproc=1, steps=1, data=held_out, load=ckpt,
                   save=work / "nothing", timeout=120)
    assert "is an eval program" in e.value.stderr


def test_batch_norm_uses_running_statistics(tmp_path):
    """TransformerWithSharedParams trained 2 steps in training mode (the
    BatchNorm's running statistics move), then its eval program: torch's
    model.eval() on the same checkpoint gives the same loss."""
    model = models.build("transformer_with_shared_params", training=True)
    src = np.arange(12, dtype=np.int64).reshape(6, 2).T.copy()
    tgt = np.arange(8, dtype=np.int64).reshape(4, 2).T.copy()
    data = tmp_path / "data.safetensors"
    st_numpy.save_file({"input.0": src, "input.1": tgt}, str(data))
    prog = driver.compile(model, tmp_path / "train.mlir", world_size=1,
                          optimizer="sgd", lr=2e-3, momentum=0.9)
    driver.run(prog, nproc=1, steps=2, seed=SEED, data=data,
               save=tmp_path / "ckpt", timeout=120)
    ckpt = tmp_path / "ckpt" / "step-2.safetensors"
    state = st_numpy.load_file(str(ckpt))
    assert not np.allclose(state["bn.running_var"], 1.0)
    evaluator = driver.compile(model, tmp_path / "eval.mlir", world_size=1,
                               mode="eval")
    ours = driver.run(evaluator, nproc=1, steps=1, data=data, load=ckpt,
                      timeout=120).metrics[0]["loss"]

    reference = TransformerWithSharedParams(batch=2)
    state["output_proj.weight"] = state["embed_tokens.weight"]
    reference.load_state_dict({k: torch.from_numpy(v.copy())
                               for k, v in state.items()
                               if not k.startswith("optim.")})
    reference.eval()
    with torch.no_grad():
        want = reference(torch.from_numpy(src), torch.from_numpy(tgt)).item()
        reference.train()
        training_mode = reference(torch.from_numpy(src),
                                  torch.from_numpy(tgt)).item()
    assert math.isclose(ours, want, rel_tol=LOSS_RTOL), (ours, want)
    assert not math.isclose(ours, training_mode, rel_tol=1e-3)


# -- generation (fsdp-run --generate) -------------------------------------
PROMPT = [5, 17, 3]
NEW_TOKENS = 20  # 3 + 20 > the context of 16: the window slides


def torch_greedy(state, prompt, new_tokens, window=16):
    """torch: greedy decoding, the logits of the last `window` tokens."""
    model = GPT()
    model.load_state_dict({k: torch.from_numpy(v.copy())
                           for k, v in state.items()
                           if not k.startswith("optim.")})
    model.eval()
    tr, ctx = model.transformer, list(prompt)
    with torch.no_grad():
        for _ in range(new_tokens):
            idx = torch.tensor([ctx[-window:]])
            x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
            for block in tr.h:
                x = block(x)
            logits = torch.nn.functional.linear(tr.ln_f(x), tr.wte.weight)
            ctx.append(int(logits[0, -1].argmax()))
    return ctx[len(prompt):]


def generate(work, model, ckpt, ranks, **options):
    prog = driver.compile(model, work / f"gen-{ranks}.mlir", world_size=ranks,
                          wrap_kinds=["Block"], mode="eval")
    result = driver.run(prog, nproc=ranks, load=ckpt, seed=SEED,
                        prompt_ids=",".join(map(str, PROMPT)),
                        timeout=120, **options)
    return result, [row["tokens"] for row in result.metrics]


@pytest.mark.parametrize("ranks", [1, 2])
def test_greedy_generation_matches_torch(trained, ranks):
    work, model, ckpt, *_ = trained
    result, samples = generate(work, model, ckpt, ranks,
                               generate=NEW_TOKENS, temperature=0)
    want = torch_greedy(st_numpy.load_file(str(ckpt)), PROMPT, NEW_TOKENS)
    assert samples == [want]
    assert result.stdout.startswith("sample 1/1:\n5 17 3 ")


def test_sampling_does_not_depend_on_the_world_size(trained):
    work, model, ckpt, *_ = trained
    options = dict(generate=NEW_TOKENS, temperature=0.9, top_k=10,
                   num_samples=2)
    _, one = generate(work, model, ckpt, 1, **options)
    _, two = generate(work, model, ckpt, 2, **options)
    assert one == two
    assert one[0] != one[1]  # each sample draws its own tokens
    assert all(len(s) == NEW_TOKENS and all(0 <= t < 64 for t in s)
               for s in one)


@pytest.mark.parametrize("case, message", [
    ("training program", "this is a training program; compile the model "
                         "with mode=eval"),
    ("id outside the vocabulary", "token 1 of the prompt ids is 64, outside "
                                  "the model's vocabulary of 64 tokens"),
    ("too many samples", "--num-samples 5 is more than the 4 rows the "
                         "program takes per rank"),
    ("no logits", 'the program returns no "logits"'),
])
def test_generation_errors(trained, case, message):
    work, model, ckpt, *_ = trained
    mode, prompt, samples = "eval", "5,64", 1
    if case == "training program":
        mode = "train"
    if case != "id outside the vocabulary":
        prompt = "5,6"
    if case == "too many samples":
        samples = 5
    if case == "no logits":
        model = models.build("mlp")
        ckpt = None
    prog = driver.compile(model, work / "gen-error.mlir", world_size=1,
                          mode=mode)
    with pytest.raises(driver.RunError) as e:
        driver.run(prog, nproc=1, load=ckpt, generate=3, prompt_ids=prompt,
                   num_samples=samples, timeout=120)
    assert message in e.value.stderr


# -- evaluation beside training (--eval-program / --eval-every) -----------
def test_eval_every_equals_evaluating_the_checkpoints(trained):
    """GPT-2 (dropout 0.1) trained 4 steps on 2 ranks, evaluated every 2
    steps in the same job: the validation losses equal the eval program's
    on the saved checkpoints and torch's no_grad loss, and training is
    bit-identical to the run without evaluation."""
    work, model, _, held_out, val = trained
    train = driver.compile(model, work / "train-ee.mlir",
                           world_size=TRAIN_RANKS, wrap_kinds=["Block"],
                           optimizer="adamw", lr=3e-3)
    evaluator = driver.compile(model, work / "eval-ee.mlir",
                               world_size=TRAIN_RANKS, wrap_kinds=["Block"],
                               mode="eval")
    common = dict(nproc=TRAIN_RANKS, steps=4, seed=SEED,
                  data=work / "train.safetensors", timeout=120)
    plain = driver.run(train, **common)
    both = driver.run(train, save=work / "ckpt-ee", save_every=2,
                      eval_program=evaluator, eval_every=2,
                      eval_data=held_out, eval_batches=EVAL_BATCHES, **common)
    assert [m["loss"] for m in both.metrics] == \
        [m["loss"] for m in plain.metrics]
    val_losses = {m["step"]: m["val_loss"] for m in both.metrics
                  if "val_loss" in m}
    assert sorted(val_losses) == [2, 4]
    for step, ours in val_losses.items():
        ckpt = work / "ckpt-ee" / f"step-{step}.safetensors"
        alone = driver.run(evaluator, nproc=TRAIN_RANKS, steps=EVAL_BATCHES,
                           data=held_out, load=ckpt, timeout=120).metrics
        assert math.isclose(ours, sum(m["loss"] for m in alone) / len(alone),
                            rel_tol=1e-6)
        ref = torch_eval_losses(st_numpy.load_file(str(ckpt)), val,
                                BATCH * TRAIN_RANKS)
        assert math.isclose(ours, sum(ref) / len(ref), rel_tol=LOSS_RTOL)
    # The progress line shows it.
    verbose = driver.run(train, quiet=False, eval_program=evaluator,
                         eval_every=4, eval_data=held_out, eval_batches=1,
                         **common)
    progress = [line for line in verbose.stdout.splitlines()
                if re.match(r"step +\d+/4 ", line)]
    assert ["val loss" in line for line in progress] == [False] * 3 + [True]


@pytest.mark.parametrize("case, message", [
    ("eval program trained", "the program to train is an eval program"),
    ("training program evaluated", "--eval-program: it is a training "
                                   "program; compile the model with "
                                   "mode=eval"),
    ("another model", "--eval-program: it evaluates model 'mlp', the run "
                      "trains 'gpt2'"),
    ("another mesh", "--eval-program: it was compiled for a mesh of 1 x 1 "
                     "ranks, the training program for 1 x 2"),
])
def test_eval_program_mismatches(trained, case, message):
    work, model, _, held_out, _ = trained
    train = driver.compile(model, work / "mm-train.mlir", world_size=2,
                           wrap_kinds=["Block"])
    evaluator = driver.compile(model, work / "mm-eval.mlir", world_size=2,
                               wrap_kinds=["Block"], mode="eval")
    if case == "eval program trained":
        train = evaluator
    elif case == "training program evaluated":
        evaluator = train
    elif case == "another model":
        evaluator = driver.compile(models.build("mlp"), work / "mm-mlp.mlir",
                                   world_size=2, mode="eval")
    else:
        evaluator = driver.compile(model, work / "mm-eval1.mlir",
                                   world_size=1, mode="eval")
    with pytest.raises(driver.RunError) as e:
        driver.run(train, nproc=2, steps=1, data=work / "train.safetensors",
                   eval_program=evaluator, eval_every=1, eval_data=held_out,
                   timeout=120)
    assert message in e.value.stderr
