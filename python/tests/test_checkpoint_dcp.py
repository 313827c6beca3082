"""fsdp_mlir.checkpoint against PyTorch's own FSDP2 and DCP: training state
moves both ways between our checkpoints and torch.distributed.checkpoint.

One run of ours (examples/gpt2.mlir, 2 ranks, AdamW, fsdprt-run on a step
library) trains K + 3 steps and saves a full checkpoint after step K. It
is converted to DCP (`python -m fsdp_mlir.checkpoint to-dcp`, both
layouts); a 2-process FSDP2 job on gloo (`fully_shard` per Block, then the
root; its AdamW built with another lr and weight decay, which the
checkpoint's param_groups replace) loads model + optimizer through
`dcp.load` / `set_state_dict` and trains steps K, K + 1, K + 2 on the
batches our runner feeds (rank r: rows (s*G + r + j*W) mod N), saving its
own DCP checkpoint after step K. Its losses equal ours: step K checks the
weights; K + 1 and K + 2 the optimizer state, its step count (AdamW's bias
correction) and the hyper-parameters. The way back: FSDP2's DCP checkpoint
(DTensor shards of 2 ranks) converted with `from-dcp` and resumed by
`fsdprt-run --load` gives torch's losses at K + 1 and K + 2.

Bound: LOSS_RTOL (1e-5, test_torch_oracle.py): the two sides reduce in
float32 in another order (per-rank means averaged over ranks, torch's
kernels against ours). Losses at step K come from bit-identical weights
(the conversion copies them); the later ones from one or two AdamW updates
of bit-identical state.

Also: conversions are lossless (ours -> DCP -> ours, both layouts, full and
sharded checkpoints, a program as template), and a DCP checkpoint of
another model gives one error listing every difference.

About 20 s on 2 cores, nearly all of it torch's process start-up.

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_checkpoint_dcp.py
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")
pytest.importorskip("torch.distributed.checkpoint")

from safetensors.torch import load_file  # noqa: E402

from fsdp_mlir import checkpoint, driver  # noqa: E402

from test_torch_oracle import (EXAMPLES, LOSS_RTOL,  # noqa: E402
                               NUM_SAMPLES, SEED, _gpt_data)
from torch_reference import GPT, free_port, run_workers  # noqa: E402

RANKS = 2
BATCH = 4   # per rank (examples/gpt2.mlir)
LR = 3e-3   # test_torch_oracle's GPT-2 AdamW lr; the other defaults
K = 2       # the step our checkpoint is saved at
STEPS = K + 3


def _tools_or_skip():
    try:
        for tool in ("fsdp-opt", "fsdp-compile", "fsdprt-run"):
            driver.find_tool(tool)
    except driver.ToolNotFoundError as e:
        pytest.skip(str(e), allow_module_level=True)


_tools_or_skip()


def _cli(*args):
    """python -m fsdp_mlir.checkpoint ARGS: (returncode, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "fsdp_mlir.checkpoint",
                           *map(str, args)], capture_output=True, text=True,
                          env={**os.environ,
                               "PYTHONPATH": str(driver.REPO_ROOT / "python")})
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Our run: the step library, the dataset, the losses of STEPS steps
    and the full checkpoint saved after step K (plus a sharded one)."""
    work = tmp_path_factory.mktemp("dcp")
    data = work / "data.safetensors"
    st_numpy.save_file(_gpt_data(np.random.default_rng(1234)), str(data))
    prog = driver.compile(EXAMPLES / "gpt2.mlir", work / "step.mlir",
                          world_size=RANKS, wrap_kinds=["Block"],
                          optimizer="adamw", lr=LR)
    lib = driver.compile_library(prog)
    runner = driver.find_tool("fsdprt-run")
    result = driver.run(lib, nproc=RANKS, steps=STEPS, seed=SEED, data=data,
                        save=work / "full", save_every=K, timeout=120,
                        fsdp_run=runner)
    driver.run(lib, nproc=RANKS, steps=K, seed=SEED, data=data,
               save=work / "sharded", save_format="sharded", timeout=120,
               fsdp_run=runner)
    return dict(work=work, data=data, prog=prog, lib=lib, runner=runner,
                losses=result.losses, ckpt=work / "full" / f"step-{K}.safetensors",
                sharded=work / "sharded" / f"step-{K}")


# -- the FSDP2 job -------------------------------------------------------------
_FSDP2_WORKER = r'''
import json
import sys
import torch

(TESTS, DCP_IN, DCP_TT, DCP_OUT, DATA, OUT, PORT, WORLD, BATCH, N,
 LR) = sys.argv[1:]
WORLD, BATCH, N, LR = int(WORLD), int(BATCH), int(N), float(LR)
sys.path.insert(0, TESTS)
from torch_reference import GPT, fed_rows, join_gloo, leave_gloo


def worker(rank):
    join_gloo(rank, WORLD, PORT)
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions, get_state_dict, set_state_dict)
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(rank)  # other initial weights: the load replaces them
    model = GPT()
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    # Not our hyper-parameters: the checkpoint's param_groups replace them.
    opt = torch.optim.AdamW(model.parameters(), lr=0.5, weight_decay=0.0)

    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd, "train_state": {"step": -1}}
    dcp.load(state, checkpoint_id=DCP_IN)
    set_state_dict(model, opt, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    step = state["train_state"]["step"]
    group = opt.param_groups[0]
    assert (group["lr"], group["betas"], group["eps"],
            group["weight_decay"]) == (LR, (0.9, 0.999), 1e-8, 0.01), group

    # torchtitan's layout of the same state: the model at the top level,
    # the optimizer flattened under "optimizer".
    local = lambda t: t.to_local() if hasattr(t, "to_local") else t
    model_tt, optim_tt = get_state_dict(
        model, opt, options=StateDictOptions(flatten_optimizer_state_dict=True))
    model_tt = {k: v.detach().clone() for k, v in model_tt.items()}
    optim_tt = {k: v.detach().clone() if torch.is_tensor(v) else v
                for k, v in optim_tt.items()}
    titan = dict(model_tt, optimizer=optim_tt, train_state={"step": -1})
    dcp.load(titan, checkpoint_id=DCP_TT)
    assert titan["train_state"]["step"] == step
    for k, v in model_sd.items():
        assert torch.equal(local(v), local(titan[k])), k
    for fqn, entry in optim_sd["state"].items():
        for name, v in entry.items():
            assert torch.equal(local(v), local(titan["optimizer"][
                f"state.{fqn}.{name}"])), (fqn, name)
    assert titan["optimizer"]["param_groups.transformer.wte.weight.lr"] == LR

    data = load_file(DATA)
    x, y = data["input.0"], data["input.1"]
    losses = []
    for s in range(step, step + 3):
        rows = fed_rows(s, rank, WORLD, BATCH, N)
        opt.zero_grad()
        loss = model(x[rows], y[rows])
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / WORLD)
        if s == step:
            model_sd, optim_sd = get_state_dict(model, opt)
            dcp.save({"model": model_sd, "optim": optim_sd,
                      "train_state": {"step": s + 1}}, checkpoint_id=DCP_OUT)
    if rank == 0:
        with open(OUT, "w") as f:
            json.dump({"step": step, "losses": losses}, f)
    leave_gloo()


if __name__ == "__main__":
    torch.multiprocessing.spawn(worker, nprocs=WORLD)
'''


@pytest.fixture(scope="module")
def fsdp2(ours):
    """Our step-K checkpoint through to-dcp (the command line, both
    layouts) into the FSDP2 job; its losses at K, K+1, K+2 and its own
    DCP checkpoint after step K."""
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if not hasattr(fsdp, "fully_shard") or not \
            torch.distributed.is_gloo_available():
        pytest.skip("no torch.distributed.fsdp.fully_shard or gloo")
    work = ours["work"]
    dcp_in, dcp_tt, dcp_out = work / "dcp-in", work / "dcp-tt", work / "dcp-out"
    code, out, err = _cli("to-dcp", ours["ckpt"], dcp_in, "--lr", repr(LR))
    assert code == 0, err
    assert "step 2" in out and "optimizer adamw" in out, out
    checkpoint.to_dcp(ours["ckpt"], dcp_tt, lr=LR, layout="torchtitan")
    result = work / "fsdp2.json"
    run_workers(work, "fsdp2_dcp_worker", _FSDP2_WORKER,
                [dcp_in, dcp_tt, dcp_out, ours["data"], result, free_port(),
                 RANKS, BATCH, NUM_SAMPLES, repr(LR)], timeout=120)
    got = json.loads(result.read_text())
    assert got["step"] == K
    return dict(losses=got["losses"], dcp=dcp_out)


def _assert_losses(ours, ref, first, what):
    worst = 0.0
    for i, (a, b) in enumerate(zip(ours, ref)):
        worst = max(worst, abs(a - b) / abs(b))
        assert math.isclose(a, b, rel_tol=LOSS_RTOL), \
            f"step {first + i}: loss {a!r} vs {what} {b!r}"
    return worst


def test_fsdp2_resumes_our_checkpoint(ours, fsdp2):
    """(1) ours -> DCP -> FSDP2: torch's next losses are ours."""
    ref = ours["losses"][K:K + 3]
    worst = _assert_losses(fsdp2["losses"], ref, K, "ours")
    print(f"\nFSDP2 from our step-{K} checkpoint: steps {K}..{K + 2} "
          f"losses {fsdp2['losses']} vs ours {ref}: worst relative "
          f"difference {worst:.2g}")


def test_we_resume_fsdp2_checkpoint(ours, fsdp2):
    """(2) FSDP2's DCP checkpoint (after step K) -> ours -> fsdprt-run
    --load: our next losses are torch's."""
    back = ours["work"] / "from-fsdp2.safetensors"
    done = checkpoint.from_dcp(fsdp2["dcp"], back, like=ours["ckpt"])
    assert done == dict(model="gpt2", step=K + 1, entries=28,
                        optimizer_state=True)
    result = driver.run(ours["lib"], nproc=RANKS, steps=K + 3, seed=SEED,
                        data=ours["data"], load=back, timeout=120,
                        fsdp_run=ours["runner"])
    ref = fsdp2["losses"][1:]
    worst = _assert_losses(result.losses, ref, K + 1, "FSDP2")
    print(f"\nours from FSDP2's step-{K + 1} DCP checkpoint: steps "
          f"{K + 1}..{K + 2} losses {result.losses} vs FSDP2 {ref}: worst "
          f"relative difference {worst:.2g}")


def _assert_same_tensors(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("layout", checkpoint.LAYOUTS)
def test_round_trip_is_lossless(layout, ours, tmp_path):
    """ours (full, and sharded at 2 ranks) -> DCP -> ours is bit-identical,
    with a checkpoint or the program as template; the step count and
    model name survive."""
    full = load_file(str(ours["ckpt"]))
    for i, (source, like) in enumerate(((ours["ckpt"], ours["ckpt"]),
                                        (ours["sharded"], ours["prog"]),
                                        (ours["ckpt"], ours["sharded"]))):
        tag = f"case{i}"
        checkpoint.to_dcp(source, tmp_path / tag, lr=LR, layout=layout)
        out = tmp_path / f"{tag}.safetensors"
        checkpoint.from_dcp(tmp_path / tag, out, like=like)
        _assert_same_tensors(load_file(str(out)), full)
        meta = checkpoint._read_metadata(out)
        assert (meta["format"], meta["model"], meta["step_count"],
                meta["optimizer"]) == ("fsdp-mlir-full", "gpt2", str(K),
                                       "adamw")


def test_model_only(ours, fsdp2, tmp_path):
    """--model-only: the weights alone (our runner starts the optimizer
    state at zero), e.g. into a program of another optimizer."""
    out = tmp_path / "weights.safetensors"
    done = checkpoint.from_dcp(fsdp2["dcp"], out, like=ours["ckpt"],
                               model_only=True)
    assert done["optimizer_state"] is False and done["step"] == K + 1
    weights = load_file(str(out))
    assert sorted(weights) == sorted(
        k for k in load_file(str(ours["ckpt"])) if not k.startswith("optim."))
    assert checkpoint._read_metadata(out)["optimizer"] == "none"


def test_to_dcp_needs_the_lr(ours, tmp_path):
    with pytest.raises(ValueError, match="--lr"):
        checkpoint.to_dcp(ours["ckpt"], tmp_path / "x")


def _other_model_dcp(path):
    """A DCP checkpoint of another GPT (vocab 50, one block, an untied
    lm_head), as a single torch process saves it."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model = GPT(vocab=50, layers=1)
    model.lm_head = torch.nn.Linear(32, 50, bias=False)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    model_sd, optim_sd = get_state_dict(model, opt)
    checkpoint._quiet_dcp()
    dcp.save({"model": model_sd, "optim": optim_sd,
              "train_state": {"step": 1}}, checkpoint_id=str(path),
             no_dist=True)


def test_another_models_dcp_is_refused(ours, tmp_path):
    """(3) One error listing every difference (missing, extra, other
    shape), from the command line; nothing is written."""
    other = tmp_path / "other"
    _other_model_dcp(other)
    out = tmp_path / "out.safetensors"
    code, _, err = _cli("from-dcp", other, out, "--like", ours["ckpt"])
    assert code == 1 and not out.exists()
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"error: DCP checkpoint {other} does not "
                               "match model 'gpt2'"), err
    block1 = [n for n in load_file(str(ours["ckpt"]))
              if n.startswith("transformer.h.1.")]
    # A missing, extra or reshaped parameter is named once, not again for
    # its optimizer state.
    expected = ([f"missing: {n}" for n in block1] +
                ["extra: lm_head.weight [50, 32]",
                 "shape: transformer.wte.weight is [50, 32] in the DCP "
                 "checkpoint, [64, 32] in the model"])
    body = [line.strip() for line in lines[1:]]
    assert f"{len(expected)} difference(s)" in lines[0]
    for want in expected:
        assert any(line.startswith(want) for line in body), (want, err)
    assert len(body) == len(expected), err
