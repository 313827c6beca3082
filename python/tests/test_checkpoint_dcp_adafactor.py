"""Adafactor's state goes to torch.optim.Adafactor through DCP: our GPT-2
(examples/gpt2.mlir, 2 ranks, Adafactor, weight decay 0.1) saves a full
and a sharded checkpoint after step K and trains on to K + 2; each,
converted with `to-dcp`, is loaded by a torch GPT and its
torch.optim.Adafactor (`dcp.load` then `set_state_dict`, one process), which
then trains steps K and K + 1 on the rows our runner fed both ranks.

Step K's loss checks the weights; the weights after step K the factored
state (row_var, col_var, variance), the step count (β2ₜ and ρₜ depend on
it) and the hyper-parameters, which param_groups carry; step K + 1's loss
the whole update. Bound: LOSS_RTOL for losses (float32 sums in another
order); weights to 1e-5 of each tensor's largest element (one Adafactor
update of identical state from gradients that differ by that order; a
tensor near zero, e.g. the attention key bias, on eps2's scale instead).

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_checkpoint_dcp_adafactor.py
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")
dcp = pytest.importorskip("torch.distributed.checkpoint")

from fsdp_mlir import checkpoint, driver  # noqa: E402

from test_torch_oracle import (EXAMPLES, LOSS_RTOL,  # noqa: E402
                               NUM_SAMPLES, SEED, _gpt_data)
from torch_reference import GPT, fed_rows  # noqa: E402

RANKS = 2
BATCH = 4   # per rank (examples/gpt2.mlir)
LR = 1e-2   # torch.optim.Adafactor's default
WEIGHT_DECAY = 0.1
K = 2


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    work = tmp_path_factory.mktemp("dcp_adafactor")
    data = work / "data.safetensors"
    st_numpy.save_file(_gpt_data(np.random.default_rng(1234)), str(data))
    prog = driver.compile(EXAMPLES / "gpt2.mlir", work / "step.mlir",
                          world_size=RANKS, wrap_kinds=["Block"],
                          optimizer="adafactor", lr=LR,
                          weight_decay=WEIGHT_DECAY)
    result = driver.run(prog, nproc=RANKS, steps=K + 2, seed=SEED, data=data,
                        save=work / "full", save_every=1, timeout=120)
    driver.run(prog, nproc=RANKS, steps=K, seed=SEED, data=data,
               save=work / "sharded", save_format="sharded", timeout=120)
    return dict(work=work, data=data, losses=result.losses,
                full=work / "full" / f"step-{K}.safetensors",
                sharded=work / "sharded" / f"step-{K}",
                after=st_numpy.load_file(
                    str(work / "full" / f"step-{K + 1}.safetensors")))


@pytest.mark.parametrize("source", ["full", "sharded"])
def test_torch_adafactor_resumes_our_checkpoint(ours, source, tmp_path):
    from torch.distributed.checkpoint.state_dict import (get_state_dict,
                                                         set_state_dict)
    checkpoint.to_dcp(ours[source], tmp_path / "dcp", lr=LR,
                      weight_decay=WEIGHT_DECAY)
    torch.manual_seed(1)  # other initial weights: the load replaces them
    model = GPT()
    # Other hyper-parameters: the checkpoint's param_groups replace them.
    opt = torch.optim.Adafactor(model.parameters(), lr=0.5, foreach=False)
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd, "train_state": {"step": 0}}
    checkpoint._quiet_dcp()
    dcp.load(state, checkpoint_id=str(tmp_path / "dcp"))
    set_state_dict(model, opt, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    assert state["train_state"]["step"] == K
    group = opt.param_groups[0]
    assert (group["lr"], group["weight_decay"]) == (LR, WEIGHT_DECAY)

    data = st_numpy.load_file(str(ours["data"]))
    x, y = (torch.from_numpy(data[f"input.{i}"]) for i in range(2))
    losses = []
    for step in (K, K + 1):
        rows = torch.cat([fed_rows(step, r, RANKS, BATCH, NUM_SAMPLES)
                          for r in range(RANKS)])
        opt.zero_grad()
        loss = model(x[rows], y[rows])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step == K:
            for name, p in model.named_parameters():
                want = ours["after"][name].astype(np.float64)
                diff = np.abs(p.detach().numpy() - want).max()
                # Adafactor moves a tensor on the scale max(eps2, RMS)·lr
                # at least, even one whose gradient is float noise (the
                # attention key bias, zero at init): eps2 floors the scale.
                scale = max(np.abs(want).max(), 1e-3)
                assert diff <= 1e-5 * scale, (name, diff)
    for got, want in zip(losses, ours["losses"][K:]):
        assert math.isclose(got, want, rel_tol=LOSS_RTOL), (losses, ours)
