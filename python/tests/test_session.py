"""fsdp_mlir.Session: a training loop in Python, one rank per process.

The session runs fsdprt-run's Trainer in process (libfsdp_session.so), so a
Python loop that feeds fsdprt-run's own batches trains bit for bit as
fsdprt-run: the same losses and the same final checkpoint, at 1 rank and
at 2 ranks under real torchrun. Batches of the wrong shape or dtype, or
options of fsdprt-run's own loop, are clear errors.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from fsdp_mlir import driver
from fsdp_mlir.session import Session, SessionError, _library_path

if not _library_path().exists():
    pytest.skip("libfsdp_session.so is not built", allow_module_level=True)

EXAMPLES = driver.REPO_ROOT / "examples"
STEPS = 4


def _library(tmp_path, ranks):
    """gpt2 (the example) compiled to a step library for `ranks` ranks."""
    step = driver.compile(EXAMPLES / "gpt2.mlir", tmp_path / "gpt2.mlir",
                          world_size=ranks, optimizer="adamw",
                          wrap_kinds=["Block"])
    return driver.compile_library(step)


def _eval_library(tmp_path):
    """The same model's eval program (mode=eval), 1 rank."""
    return driver.compile_library(driver.compile(
        EXAMPLES / "gpt2.mlir", tmp_path / "eval.mlir", world_size=1,
        wrap_kinds=["Block"], mode="eval"))


@pytest.fixture
def one_rank(monkeypatch):
    """An in-process session of one rank: no launch variables of an outer
    torchrun in the environment."""
    for var in driver._LAUNCH_VARS:
        monkeypatch.delenv(var, raising=False)


def _reference(library, ranks, tmp_path):
    run = driver.run(library, nproc=ranks, steps=STEPS, save=tmp_path / "ref",
                     fsdp_run=driver.find_tool("fsdprt-run"), timeout=300)
    return [m["loss"] for m in run.metrics], tmp_path / "ref" / \
        f"step-{STEPS}.safetensors"


def _clean_env():
    return {k: v for k, v in os.environ.items()
            if k not in driver._LAUNCH_VARS}


def _torchrun(script):
    """`torchrun --standalone --nproc-per-node 2 script`; its stdout."""
    env = _clean_env()
    env["PYTHONPATH"] = str(driver.REPO_ROOT / "python")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run",
                           "--standalone", "--nproc-per-node", "2",
                           str(script)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_python_loop_trains_as_fsdprt_run(tmp_path, one_rank):
    library = _library(tmp_path, 1)
    want, reference = _reference(library, 1, tmp_path)
    with Session(library, save=tmp_path / "ckpt") as s:
        assert [i.dtype for i in s.inputs] == ["i64", "i64"]
        assert "all_gather" in s.report or "arena plan" in s.report
        losses = []
        for step in range(STEPS):
            ids, targets = s.batch(step)           # fsdprt-run's batch,
            losses.append(s.step(ids.copy(), targets.copy())["loss"])
        assert s.step_count == STEPS
        s.save()
    assert losses == want
    assert (tmp_path / "ckpt" / f"step-{STEPS}.safetensors").read_bytes() == \
        reference.read_bytes()


def test_torch_tensors_and_the_lr_override(tmp_path, one_rank):
    """CPU torch tensors go in through DLPack; set_lr(0) freezes the
    weights (the loss of the same batch repeats), set_lr(None) restores
    the schedule."""
    torch = pytest.importorskip("torch")
    library = _library(tmp_path, 1)
    with Session(library) as s:
        batch = [torch.from_numpy(a) for a in s.batch(0)]
        s.set_lr(0.0)
        first = s.step(*batch)
        assert first["lr"] == 0.0
        assert s.step(*batch)["loss"] == first["loss"]
        s.set_lr(None)
        third = s.step(*batch)
        assert third["lr"] > 0
        assert s.step(*batch)["loss"] != third["loss"]


ONE_HOT_MODEL = """
fsdp.model @one_hot {
  fsdp.module @root kind "Net" unit {
    fsdp.param @w : tensor<3xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%x: tensor<8x3xf32>, %labels: tensor<8xi64>) -> tensor<f32> {
      %ids = nn.id_range %labels {count = 3 : i64} : tensor<8xi64> loc("net.py":12:0)
      %f = nn.cast %ids : tensor<8xi64> to tensor<8xf32>
      %col = nn.reshape %f : tensor<8xf32> to tensor<8x1xf32>
      %w = fsdp.get_param @w : tensor<3xf32>
      %h = nn.mul %x, %w : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
      %m = nn.mul %h, %col : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
      %loss = nn.reduce_mean %m {dims = array<i64: 0, 1>} : (tensor<8x3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
"""


def test_labels_out_of_range_stop_the_step(tmp_path, one_rank):
    """A Session's batches meet no loader: labels an nn.id_range bounds
    (F.one_hot's, a weighted cross-entropy's) are checked by the step
    itself, which fails naming the op's source line, the id and where it
    is, instead of training on a zero one-hot row."""
    source = tmp_path / "one_hot.mlir"
    source.write_text(ONE_HOT_MODEL)
    library = driver.compile_library(driver.compile(
        source, tmp_path / "step.mlir", world_size=1, optimizer="sgd"))
    x = np.ones((8, 3), np.float32)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int64)
    with Session(library) as s:
        assert np.isfinite(s.step(x, labels)["loss"])
        labels[7] = 7
        with pytest.raises(SessionError, match=r"net\.py:12: nn\.id_range: "
                           r"index 7 at position 7 is outside \[0, 3\)"):
            s.step(x, labels)


def test_bad_batches_and_loop_options_are_clear_errors(tmp_path, one_rank):
    library = _library(tmp_path, 1)
    with Session(library) as s:
        ids, targets = s.batch(0)
        with pytest.raises(SessionError, match=r"takes 2 inputs .* given 1"):
            s.step(ids)
        with pytest.raises(SessionError, match=r"input 1 is int32 .* takes "
                                               r"i64 \[4, 16\]"):
            s.step(ids, targets.astype(np.int32))
        with pytest.raises(SessionError, match=r"input 0 is int64 \[2, 16\]"):
            s.step(ids[:2], targets)
        with pytest.raises(SessionError, match="without --save"):
            s.save()
    with pytest.raises(SessionError, match="--nproc is not a session option"):
        Session(library, nproc=2)
    with pytest.raises(SessionError, match="not a step library"):
        Session(tmp_path / "gpt2.mlir")


def test_a_torchrun_script_trains_as_fsdprt_run(tmp_path):
    """`torchrun --nproc-per-node 2 train.py`, where train.py is a Session
    loop: rank 0's losses and the final checkpoint are fsdprt-run --nproc
    2's."""
    pytest.importorskip("torch.distributed.run")
    library = _library(tmp_path, 2)
    want, reference = _reference(library, 2, tmp_path)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import json, os
        from fsdp_mlir import Session
        with Session({str(library)!r}, save={str(tmp_path / 'ckpt')!r}) as s:
            losses = [s.step(*s.batch(step))["loss"] for step in range({STEPS})]
            s.save()
        if os.environ["RANK"] == "0":
            print(json.dumps(losses))
    """))
    stdout = _torchrun(script)
    import json
    assert json.loads(stdout.strip().splitlines()[-1]) == want
    assert (tmp_path / "ckpt" / f"step-{STEPS}.safetensors").read_bytes() == \
        reference.read_bytes()


def test_evaluate_is_fsdprt_runs_eval_loss(tmp_path, one_rank):
    """evaluate() on the eval program (mode=eval) of the same model, on the
    batch fsdprt-run's --eval-program would take (its first eval batch,
    synthetic): the loss fsdprt-run reports at --eval-every 1 after one
    step, bit for bit; training is untouched by it."""
    library = _library(tmp_path, 1)
    evaluation = _eval_library(tmp_path)
    run = driver.run(library, nproc=1, steps=2,
                     fsdp_run=driver.find_tool("fsdprt-run"),
                     eval_program=evaluation, eval_every=1, eval_batches=1,
                     eval_data="synthetic", timeout=300)
    with Session(library, eval_program=evaluation) as s:
        assert [i.dtype for i in s.eval_inputs] == ["i64", "i64"]
        with Session(evaluation) as reader:  # the eval program's batch 0
            eval_batch = reader.batch(0)
        for step in range(2):
            s.step(*s.batch(step))
            assert s.evaluate(*eval_batch) == run.metrics[step]["val_loss"]
        with pytest.raises(SessionError, match="takes 2 inputs"):
            s.evaluate(eval_batch[0])
    assert [m["loss"] for m in run.metrics] == \
        [m["loss"] for m in driver.run(library, nproc=1, steps=2,
                                        fsdp_run=driver.find_tool(
                                            "fsdprt-run")).metrics]


def test_generate_draws_fsdprt_runs_tokens(tmp_path, one_rank):
    """generate() after training two steps, against fsdprt-run --generate
    on the eval program loading the checkpoint of those two steps: the same
    tokens, greedy and sampled (top-k, temperature, seed), two samples."""
    library = _library(tmp_path, 1)
    evaluation = _eval_library(tmp_path)
    prompt = [3, 17, 5]
    with Session(library, eval_program=evaluation,
                 save=tmp_path / "ckpt") as s:
        for step in range(2):
            s.step(*s.batch(step))
        s.save()
        greedy = s.generate(prompt, 6, temperature=0)
        sampled = s.generate(prompt, 6, num_samples=2, temperature=0.8,
                             top_k=5, seed=7)
        with pytest.raises(SessionError, match="outside the vocabulary"):
            s.generate([10**6], 1)
    fsdprt = driver.find_tool("fsdprt-run")
    for tokens, options in ((greedy, dict(temperature=0)),
                            (sampled, dict(num_samples=2, temperature=0.8,
                                           top_k=5, seed=7))):
        run = driver.run(evaluation, nproc=1, fsdp_run=fsdprt, generate=6,
                         prompt_ids=",".join(map(str, prompt)),
                         load=tmp_path / "ckpt" / "step-2.safetensors",
                         timeout=300, **options)
        assert [row["tokens"] for row in run.metrics] == tokens


def test_generate_with_a_kv_cache(tmp_path, one_rank):
    """generate() through the model's decode step (gpt2(kv_cache=True)) as
    the eval program: the greedy tokens fsdprt-run --generate draws with
    the recompute path (the eval program) from the checkpoint of the same
    two steps; more new tokens than the cache holds is an error."""
    from fsdp_mlir.models import gpt2
    library = _library(tmp_path, 1)
    decode = driver.compile_library(driver.compile(
        gpt2(kv_cache=True), tmp_path / "decode.mlir", world_size=1,
        wrap_kinds=["Block"], mode="eval"))
    prompt = [3, 17, 5]
    with Session(library, eval_program=decode,
                 save=tmp_path / "ckpt") as s:
        for step in range(2):
            s.step(*s.batch(step))
        s.save()
        cached = s.generate(prompt, 6, temperature=0)
        with pytest.raises(SessionError, match="the KV cache holds 16; at "
                                               "most 14 new tokens fit"):
            s.generate(prompt, 15)
    run = driver.run(_eval_library(tmp_path), nproc=1, temperature=0,
                     fsdp_run=driver.find_tool("fsdprt-run"), generate=6,
                     prompt_ids=",".join(map(str, prompt)),
                     load=tmp_path / "ckpt" / "step-2.safetensors",
                     timeout=300)
    assert [row["tokens"] for row in run.metrics] == cached


def test_a_decode_step_kept_whole_draws_the_sharded_ones_tokens(tmp_path,
                                                                capsys):
    """A decode step compiled with memory-budget (mode=eval) keeps its
    weights whole when they fit: no collective per token, the training
    shards all-gathered into it once per generate() call. Under torchrun at
    2 ranks, beside a full-shard training program, it draws the greedy and
    the sampled tokens of the decode step that gathers every unit at every
    token, on both ranks."""
    pytest.importorskip("torch.distributed.run")
    from fsdp_mlir.models import gpt2
    library = _library(tmp_path, 2)
    decodes = {}
    for name, options in (("gathered", {}), ("whole", {
            "memory_budget": "1GiB", "report": True})):
        capsys.readouterr()
        decodes[name] = driver.compile_library(driver.compile(
            gpt2(kv_cache=True), tmp_path / f"{name}.mlir", world_size=2,
            wrap_kinds=["Block"], mode="eval", **options))
    report = capsys.readouterr().out
    assert "weights kept whole across steps" in report
    assert "collectives per step: 0, 0 bytes" in report
    units = driver.program_info(tmp_path / "whole.mlir")["units"]
    assert units and all(u["shard_numel"] == u["padded_numel"]
                         for u in units)
    tokens = {}
    for name, decode in decodes.items():
        script = tmp_path / f"{name}.py"
        script.write_text(textwrap.dedent(f"""
            import json, os
            from fsdp_mlir import Session
            with Session({str(library)!r}, eval_program={str(decode)!r}) as s:
                for step in range(2):
                    s.step(*s.batch(step))
                drawn = [s.generate([3, 17, 5], 6, temperature=0),
                         s.generate([3, 17, 5], 6, num_samples=1,
                                    temperature=0.8, top_k=5, seed=7)]
            with open({str(tmp_path)!r} + f"/{name}-{{os.environ['RANK']}}.json",
                      "w") as out:
                json.dump(drawn, out)
        """))
        _torchrun(script)
        import json
        ranks = [json.loads((tmp_path / f"{name}-{r}.json").read_text())
                 for r in range(2)]
        assert ranks[0] == ranks[1]
        tokens[name] = ranks[0]
    assert tokens["whole"] == tokens["gathered"]
