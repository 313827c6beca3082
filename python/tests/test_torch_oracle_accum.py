"""Keeping units gathered across micro-batches against PyTorch FSDP2.

`reshard-after-backward=false` with `grad-accum-steps` is FSDP2's
`set_reshard_after_backward(False)` on the non-final micro-batches (with
`set_requires_gradient_sync(False)`: our `no-sync`): a unit gathered for
one micro-batch's backward stays gathered into the next micro-batch's
forward, so a unit kept from forward to backward is gathered once per step.
The schedule changes, the math does not: the same run as the default
schedule bit for bit, and FSDP2 on gloo with those setters at the oracle's
bounds. The report's counts say what it saves and what it costs.

Run: PYTHONPATH=python:python/tests python3 -m pytest -q python/tests/test_torch_oracle_accum.py
"""
from __future__ import annotations

import json
import re

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")

from fsdp_mlir import driver  # noqa: E402

from test_torch_oracle import (MODELS, NUM_SAMPLES, SEED, STEPS, LR,  # noqa: E402
                               _optimizer_options, assert_losses_match,
                               assert_state_matches, datasets,
                               initial_weights, workdir)
from torch_reference import free_port, run_workers  # noqa: E402

MICRO_BATCHES = 2

# FSDP2 on gloo: MLP units fc1..fc3 and the root, each fully_shard with
# RESHARD (True, False or an int); per micro-batch the setters under test.
# Rank r's micro-batch m reads rows (s*G + r + (m*B + j)*W) mod N, j < B,
# G = B*W*M (fsdp-run's sampler, runtime/runner/Data.cpp); the loss of a
# step is the mean over micro-batches (each backward of loss / M) and ranks.
_FSDP2_ACCUM_WORKER = r'''
import sys
import torch
from safetensors.numpy import load_file

(TESTS, INIT, DATA, OUT, PORT, WORLD, BATCH, MICRO, STEPS, N, LR, RESHARD,
 KEEP, NO_SYNC) = sys.argv[1:]
WORLD, BATCH, MICRO, STEPS, N = map(int, (WORLD, BATCH, MICRO, STEPS, N))
LR, RESHARD = float(LR), eval(RESHARD)
KEEP, NO_SYNC = KEEP == "1", NO_SYNC == "1"
sys.path.insert(0, TESTS)
from torch_reference import (MLP, finish_fsdp2, join_gloo, load_weights)


def worker(rank):
    import torch.distributed as dist
    join_gloo(rank, WORLD, PORT)
    from torch.distributed.fsdp import fully_shard
    model = MLP()
    load_weights(model, INIT)
    for m in (model.fc1, model.fc2, model.fc3):
        fully_shard(m, reshard_after_forward=RESHARD)
    fully_shard(model, reshard_after_forward=RESHARD)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.01)
    data = load_file(DATA)
    x, y = (torch.from_numpy(data[f"input.{i}"]) for i in range(2))
    G = BATCH * WORLD * MICRO

    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        total = torch.zeros(())
        for m in range(MICRO):
            last = m == MICRO - 1
            if KEEP:
                model.set_reshard_after_backward(last)
            if NO_SYNC:
                model.set_requires_gradient_sync(last)
            rows = torch.tensor([(s * G + rank + (m * BATCH + j) * WORLD) % N
                                 for j in range(BATCH)])
            loss = model(x[rows], y[rows])
            (loss / MICRO).backward()
            total += loss.detach() / MICRO
        opt.step()
        dist.all_reduce(total)
        losses.append(total.item() / WORLD)
    finish_fsdp2(OUT, model, losses)


if __name__ == "__main__":
    torch.multiprocessing.spawn(worker, nprocs=WORLD)
'''


def _skip_without_fsdp2():
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if not hasattr(fsdp, "fully_shard") or not \
            torch.distributed.is_gloo_available():
        pytest.skip("no torch.distributed.fsdp.fully_shard or gloo")


def fsdp2_accum(workdir, tag, init, data_path, ranks, reshard, keep=False,
                no_sync=False, micro_batches=MICRO_BATCHES):
    """FSDP2's (losses, final parameters) for the MLP under `reshard`
    (reshard_after_forward), `keep`: set_reshard_after_backward(False) and
    `no_sync`: set_requires_gradient_sync(False) on the non-final
    micro-batches."""
    init_path = workdir / f"{tag}-init.safetensors"
    st_numpy.save_file(init, str(init_path))
    out = workdir / f"{tag}-torch"
    run_workers(workdir, "fsdp2_accum_worker", _FSDP2_ACCUM_WORKER,
                [init_path, data_path, out, free_port(), ranks,
                 MODELS["mlp"][2], micro_batches, STEPS, NUM_SAMPLES,
                 repr(LR[("mlp", "adamw")]), repr(reshard), int(keep),
                 int(no_sync)],
                timeout=120)
    return (json.loads((workdir / f"{tag}-torch.json").read_text()),
            st_numpy.load_file(str(workdir / f"{tag}-torch.safetensors")))


def train_ours(workdir, tag, data_path, ranks, example=None,
               micro_batches=MICRO_BATCHES, **options):
    """Our (losses, final checkpoint, report) for the MLP (or `example`,
    its IR with units marked) with `options`."""
    model_options = {} if example else MODELS["mlp"][4]
    prog = driver.compile(example or MODELS["mlp"][0], workdir / f"{tag}.mlir",
                          world_size=ranks, grad_accum_steps=micro_batches,
                          **model_options,
                          **_optimizer_options("mlp", "adamw"), **options)
    save = workdir / tag
    result = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED,
                        data=data_path, save=save, timeout=120)
    return ([row["loss"] for row in result.metrics],
            st_numpy.load_file(str(save / f"step-{STEPS}.safetensors")),
            driver.program_info(prog)["report"])


def collectives(report):
    """{(kind, phase): count} and the bytes per step of the report."""
    line = re.search(r"collectives per step: \d+, (\d+) bytes;(.*)", report)
    counts = {(kind, phase): int(n) for kind, phase, n in
              re.findall(r"(\w+) (\w+) (\d+)", line.group(2))}
    return counts, int(line.group(1))


def peak(report):
    """The report's peak of the step's tensors per rank, and the unsharded
    parameters held there."""
    at = report.index("step tensors at their peak")
    return (int(re.search(r"\(before lowering\): (\d+) bytes",
                          report[at:]).group(1)),
            int(re.search(r"unsharded parameters +(\d+)",
                          report[at:]).group(1)))


# The MLP's full flat parameters (fc1 544, fc2 1056, fc3 132 f32 elements):
# an all-gather moves the full size, whatever the world size.
MLP_FULL_BYTES = {"fc1": 2176, "fc2": 4224, "fc3": 528}
WHOLE_MODEL = sum(MLP_FULL_BYTES.values())

# (strategy, FSDP2's reshard_after_forward, no_sync, forward all-gathers
# kept / default, unsharded parameters at the peak kept / default, the
# peak's growth in bytes).
# shard-grad-op keeps units from forward to backward, so keeping them across
# micro-batches gathers each once per step (FSDP1's no_sync() under
# SHARD_GRAD_OP). With no_sync the peak is the last micro-batch's backward,
# which holds the same either way; reducing every micro-batch, the peak
# moves to micro-batch 0's backward, which now holds the whole model.
# full-shard (reshard_after_forward=True) saves the next micro-batch's
# forward gathers of fc2 and fc3, whose backward gather serves it (FSDP2
# skips the all-gather of a unit still gathered); fc1's backward reads no
# weight, so it is freed after each forward and gathered for each.
CASES = [("shard-grad-op", False, True, (3, 6), (4224, 4224), 0),
         ("shard-grad-op", False, False, (3, 6), (WHOLE_MODEL, 4224), 1412),
         ("full-shard", True, False, (4, 6), (4224, 4224), 0)]


@pytest.mark.parametrize(
    "strategy,reshard,no_sync,gathers,unsharded,growth", CASES,
    ids=[f"{c[0]}-no_sync={c[2]}" for c in CASES])
def test_keep_gathered_matches_default_and_fsdp2(
        strategy, reshard, no_sync, gathers, unsharded, growth, workdir,
        datasets, initial_weights):
    _skip_without_fsdp2()
    ranks = 2
    data_path, _ = datasets["mlp"]
    tag = f"accum-{strategy}-{no_sync}"
    runs = {keep: train_ours(workdir, f"{tag}-{keep}", data_path, ranks,
                             sharding_strategy=strategy, no_sync=no_sync,
                             reshard_after_backward=not keep, report=True)
            for keep in (True, False)}

    # The report: the gathers it saves (counts, bytes) and what it holds.
    (kept, kept_bytes), (default, default_bytes) = (
        collectives(runs[keep][2]) for keep in (True, False))
    assert (kept[("all_gather", "forward")],
            default[("all_gather", "forward")]) == gathers
    assert kept.get(("all_gather", "backward")) == \
        default.get(("all_gather", "backward"))
    saved = MLP_FULL_BYTES["fc2"] + MLP_FULL_BYTES["fc3"] + (
        MLP_FULL_BYTES["fc1"] if strategy == "shard-grad-op" else 0)
    assert default_bytes - kept_bytes == saved
    reduced = 3 if no_sync else 3 * MICRO_BATCHES
    assert kept[("reduce_scatter", "backward")] == reduced
    (kept_peak, kept_unsharded), (default_peak, default_unsharded) = (
        peak(runs[keep][2]) for keep in (True, False))
    assert (kept_unsharded, default_unsharded) == unsharded
    assert kept_peak - default_peak == growth

    # Same math as the default schedule: bit for bit.
    assert runs[True][0] == runs[False][0]
    assert sorted(runs[True][1]) == sorted(runs[False][1])
    for name, value in runs[False][1].items():
        np.testing.assert_array_equal(runs[True][1][name], value, name)

    ref_losses, ref_state = fsdp2_accum(
        workdir, tag, initial_weights("mlp"), data_path,
        ranks, reshard, keep=True, no_sync=no_sync)
    assert_losses_match(runs[True][0], ref_losses, what="FSDP2")
    assert_state_matches(runs[True][1], ref_state)  # the oracle's plain bounds
