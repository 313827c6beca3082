"""FSDP's ignored modules / parameters (from_torch(ignored_modules=,
ignored_params=), `#fsdp.unit<ignored = local | all_reduce>`) against
PyTorch's own FSDP1 on gloo.

torch_reference's MLP with fc2 ignored, FSDP1's ModuleWrapPolicy({Linear})
picking units: torch wraps fc1 and fc3 and skips the ignored fc2; the
import marks the same units. The ranks train different samples, so fc2's
local gradients differ and its copies drift apart: torch's FSDP1
(`ignored_modules=[fc2]`, gradients not reduced) and ours are compared per
rank after STEPS steps (losses to 1e-5; every rank's fc2 from its own file
of a sharded checkpoint, rank 0's in the full one, at the suite's weight
bounds). With `ignored_grad_sync="all_reduce"` the reference all-reduces
fc2's gradients and divides by the world size after backward, as DDP; ours
all-reduces over the shard group, then across replicas (4 ranks,
hybrid-shard in groups of 2), or over the replicas alone (no-shard). With
clip_grad_norm_, FSDP1 adds the ignored gradients' local Σg² (max |g| for
the inf norm) to the all-reduced one of the sharded gradients, so each rank
clips with its own norm; ours does the same. With dynamic loss scaling
(FSDP1's ShardedGradScaler), the inf check covers every rank's ignored
gradients, so the ranks skip steps together.
"""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")
wrap = pytest.importorskip("torch.distributed.fsdp.wrap")

from fsdp_mlir import checkpoint, driver, from_torch, save_weights  # noqa: E402
from fsdp_mlir.torch_import import UnsupportedModelError  # noqa: E402

import test_torch_oracle as base  # noqa: E402  (skips without the tools)
from test_torch_oracle_moe import read_sharded, _unflatten  # noqa: E402
from torch_reference import MLP, free_port, run_workers  # noqa: E402

RANKS = 2  # all but the parity test's 4-rank cases
PER_RANK = 4
STEPS = base.STEPS
NUM_SAMPLES = 24
SGD = dict(lr=0.05, momentum=0.9)
IGNORED = "fc2"

_FSDP1_WORKER = r'''
import json
import sys
import torch
import torch.distributed as dist
from safetensors.numpy import load_file

(TESTS, INIT, DATA, OUT, PORT, WORLD, BATCH, STEPS, N, SYNC, CLIP,
 NORM, SCALE, RANK) = sys.argv[1:]
RANK, WORLD, BATCH, STEPS, N = (int(RANK), int(WORLD), int(BATCH),
                                int(STEPS), int(N))
sys.path.insert(0, TESTS)
from torch_reference import (MLP, fed_rows, join_gloo, leave_gloo,
                             load_weights, write_result)
from torch.distributed.fsdp import (FullyShardedDataParallel as FSDP,
                                    FullStateDictConfig, StateDictType)
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

join_gloo(RANK, WORLD, PORT)
model = MLP()
load_weights(model, INIT)
model = FSDP(model, ignored_modules=[model.fc2],
             auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}),
             device_id=torch.device("cpu"))
units = sorted(name.replace("_fsdp_wrapped_module.", "")
               for name, m in model.named_modules()
               if isinstance(m, FSDP) and name)
ignored = list(model.module.fc2.parameters())
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scaler = ShardedGradScaler(device="cpu", enabled=SCALE == "dynamic")
scales = []
data = load_file(DATA)
x, y = (torch.from_numpy(data[k]) for k in ("input.0", "input.1"))
losses = []
for s in range(STEPS):
    rows = fed_rows(s, RANK, WORLD, BATCH, N)
    opt.zero_grad()
    loss = model(x[rows], y[rows])
    scales.append(scaler.get_scale() if scaler.is_enabled() else None)
    scaler.scale(loss).backward()
    if SYNC == "all_reduce":  # DDP's average of the ignored gradients
        for p in ignored:
            dist.all_reduce(p.grad)
            p.grad /= WORLD
    if CLIP != "none":
        model.clip_grad_norm_(float(CLIP), float(NORM))
    scaler.step(opt)
    scaler.update()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    losses.append(mean.item() / WORLD)
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                          FullStateDictConfig(rank0_only=False)):
    state = {k: v.detach().numpy().copy()
             for k, v in model.state_dict().items()}
write_result(OUT.format(rank=RANK), state, losses)
with open(OUT.format(rank=RANK) + ".units", "w") as f:
    json.dump(units, f)
with open(OUT.format(rank=RANK) + ".scales", "w") as f:
    json.dump(scales, f)
leave_gloo()
'''


def _case():
    torch.manual_seed(0)
    module = MLP()
    rng = np.random.default_rng(3)
    data = [rng.standard_normal((NUM_SAMPLES, 16)).astype(np.float32),
            rng.standard_normal((NUM_SAMPLES, 4)).astype(np.float32)]
    example = [torch.from_numpy(d[:PER_RANK]) for d in data]
    return module, data, example


def _units(model):
    """{unit path below the root: its ignored setting (None: sharded)}."""
    return {path: unit.ignored for path, unit in model.named_units()}


def test_wrap_policy_skips_ignored_modules_and_params_mark_modules():
    module, _, example = _case()
    policy = wrap.ModuleWrapPolicy({torch.nn.Linear})
    model = from_torch(module, example, auto_wrap_policy=policy,
                       ignored_modules=[module.fc2])
    assert _units(model) == {"fc1": None, IGNORED: "local", "fc3": None}
    assert "fsdp.module @fc2 kind \"Linear\" unit<ignored = local>" in \
        model.text()
    # FSDP2's ignored_params: a module whose parameters are all ignored.
    model = from_torch(module, example, ignored_params=list(
        module.fc2.parameters()), ignored_grad_sync="all_reduce")
    assert _units(model) == {IGNORED: "all_reduce"}


def test_ignored_errors_name_the_setting():
    module, _, example = _case()
    with pytest.raises(UnsupportedModelError,
                       match="ignored parameter 'fc2.bias': module 'fc2' "
                             "also has parameters that are not ignored"):
        from_torch(module, example, ignored_params=[module.fc2.bias])
    with pytest.raises(ValueError, match="mutually exclusive"):
        from_torch(module, example, ignored_modules=[module.fc1],
                   ignored_params=[module.fc2.bias])
    with pytest.raises(ValueError, match="ignored_grad_sync='avg'"):
        from_torch(module, example, ignored_modules=[module.fc2],
                   ignored_grad_sync="avg")
    with pytest.raises(ValueError, match="not a submodule of MLP"):
        from_torch(module, example, ignored_modules=[torch.nn.Linear(2, 2)])


def _ours(tmp_path, module, data, example, sync, ranks, strategy, clip,
          scale=None):
    """Our run: losses, the full checkpoint, and every rank's fc2 from a
    sharded checkpoint of the same run."""
    model = from_torch(module, example, ignored_modules=[module.fc2],
                       ignored_grad_sync=sync,
                       auto_wrap_policy=wrap.ModuleWrapPolicy(
                           {torch.nn.Linear}))
    weights = tmp_path / "init.safetensors"
    save_weights(module, model, weights)
    dataset = tmp_path / "data.safetensors"
    st_numpy.save_file({f"input.{i}": d for i, d in enumerate(data)},
                       str(dataset))
    prog = driver.compile(model, tmp_path / "step.mlir", world_size=ranks,
                          sharding_strategy=strategy,
                          shard_group_size=2 if strategy == "hybrid-shard"
                          else None, optimizer="sgd",
                          **(dict(clip_grad_norm=clip[0],
                                  clip_norm_type=clip[1]) if clip else {}),
                          **(dict(loss_scale=scale) if scale else {}),
                          **SGD)
    runs = {}
    for fmt in ("full", "sharded"):
        runs[fmt] = driver.run(prog, nproc=ranks, steps=STEPS, data=dataset,
                               load=weights, save=tmp_path / fmt,
                               save_format=fmt, timeout=180)
    losses = [m["loss"] for m in runs["full"].metrics]
    assert losses == [m["loss"] for m in runs["sharded"].metrics]
    scales = [m.get("loss_scale") for m in runs["full"].metrics]
    full = st_numpy.load_file(str(tmp_path / "full" /
                                  f"step-{STEPS}.safetensors"))
    files, units, _ = read_sharded(tmp_path / "sharded" / f"step-{STEPS}",
                                   ranks)
    unit = next(u for u in units if u["name"] == IGNORED)
    assert unit["rank_local"] and unit["ignored"]
    per_rank = [_unflatten(unit, f[f"{IGNORED}/flat_param"]) for f in files]
    # The DCP converter reads the sharded checkpoint as the full one: fc2
    # as rank 0's copy, as torch's state dict holds ignored parameters.
    read = checkpoint.read_checkpoint(tmp_path / "sharded" / f"step-{STEPS}")
    for name, value in read.tensors.items():
        np.testing.assert_array_equal(value.numpy(), full[name])
    return prog, weights, dataset, losses, full, per_rank, scales


@pytest.mark.parametrize("sync,ranks,strategy,clip,scale", [
    ("local", 2, "full-shard", None, None),
    ("all_reduce", 2, "full-shard", None, None),
    ("all_reduce", 4, "hybrid-shard", None, None),
    ("all_reduce", 2, "no-shard", None, None),
    # max_norm below every step's norm (rank 0's: 0.52 to 0.98 for the L2
    # norm, 0.11 to 0.35 for inf): every step clips.
    ("local", 2, "full-shard", (0.3, 2.0), None),
    ("local", 2, "full-shard", (0.1, float("inf")), None),
    ("all_reduce", 4, "hybrid-shard", (0.3, 2.0), None),
    # ShardedGradScaler; the local gradients differ between replicas.
    ("local", 4, "hybrid-shard", None, "dynamic"),
    ("local", 2, "no-shard", None, "dynamic")])
def test_ignored_module_trains_like_fsdp1(tmp_path, sync, ranks, strategy,
                                          clip, scale):
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if not hasattr(fsdp, "FullyShardedDataParallel") or not \
            torch.distributed.is_gloo_available():
        pytest.skip("no FSDP1 or gloo")
    module, data, example = _case()
    prog, weights, dataset, losses, full, per_rank, scales = _ours(
        tmp_path, module, data, example, sync, ranks, strategy, clip, scale)
    out = str(tmp_path / "fsdp1-{rank}")
    run_workers(tmp_path, "fsdp1_worker", _FSDP1_WORKER,
                [weights, dataset, out, free_port(), ranks, PER_RANK, STEPS,
                 NUM_SAMPLES, sync, *(clip or ("none", "none")),
                 scale or "none"],
                nproc=ranks, timeout=120)
    refs = [st_numpy.load_file(out.format(rank=r) + ".safetensors")
            for r in range(ranks)]
    ref_losses = json.loads((tmp_path / "fsdp1-0.json").read_text())
    # FSDP1 wrapped what the import marked: fc1 and fc3, not fc2.
    assert json.loads((tmp_path / "fsdp1-0.units").read_text()) == \
        ["fc1", "fc3"]
    # Each step's loss scale is ShardedGradScaler's.
    assert scales == json.loads((tmp_path / "fsdp1-0.scales").read_text())
    base.assert_losses_match(losses, ref_losses, what="FSDP1",
                             abs_tol=base.LOSS_ATOL)
    # The full checkpoint: every parameter under its FQN, fc2 rank 0's copy.
    base.assert_state_matches({k: v for k, v in full.items()
                               if not k.startswith("optim.")}, refs[0])
    for r in range(ranks):
        base.assert_state_matches(
            per_rank[r], {k: refs[r][k] for k in per_rank[r]})
    drift = max(float(np.abs(per_rank[0][k] - per_rank[r][k]).max())
                for r in range(1, ranks) for k in per_rank[0])
    if sync == "local":  # different data, different local gradients
        assert drift > 1e-4, drift
    else:  # averaged gradients: the copies stay identical
        assert drift == 0.0, drift
    worst_loss = max(abs(a - b) for a, b in zip(losses, ref_losses))
    worst_fc2 = max(float(np.abs(per_rank[r][k] - refs[r][k]).max())
                    for r in range(ranks) for k in per_rank[r])
    print(f"\nignored {sync} {ranks} {strategy} clip {clip}: loss diff {worst_loss:.3g}, fc2 diff "
          f"{worst_fc2:.3g}, fc2 drift between ranks {drift:.3g}")


def test_ignored_copies_start_identical(tmp_path):
    """Without weights to load, every rank initialises the ignored module
    from the same stream (a rank-local unit's differ)."""
    module, data, example = _case()
    model = from_torch(module, example, ignored_modules=[module.fc2])
    prog = driver.compile(model, tmp_path / "step.mlir", world_size=RANKS,
                          optimizer="sgd", **SGD)
    driver.run(prog, nproc=RANKS, steps=0, save=tmp_path / "ckpt",
               save_format="sharded", timeout=120)
    files, units, _ = read_sharded(tmp_path / "ckpt" / "step-0", RANKS)
    key = f"{IGNORED}/flat_param"
    assert np.any(files[0][key] != 0)
    np.testing.assert_array_equal(files[0][key], files[1][key])


def test_resume_from_sharded_gives_every_rank_its_copy(tmp_path):
    """2 steps, a sharded checkpoint, then a run loading it to step STEPS:
    every rank resumes its own (drifted) fc2, so the losses of steps
    3..STEPS and every rank's final file are the uninterrupted run's."""
    module, data, example = _case()
    prog, weights, dataset, losses, _, _, _ = _ours(
        tmp_path, module, data, example, "local", RANKS, "full-shard", None)
    first, second = tmp_path / "first", tmp_path / "second"
    driver.run(prog, nproc=RANKS, steps=2, data=dataset, load=weights,
               save=first, save_format="sharded", timeout=120)
    result = driver.run(prog, nproc=RANKS, steps=STEPS, data=dataset,
                        load=first / "step-2", save=second,
                        save_format="sharded", timeout=120)
    assert [row["loss"] for row in result.metrics] == losses[2:]
    whole, _, _ = read_sharded(tmp_path / "sharded" / f"step-{STEPS}", RANKS)
    resumed, _, _ = read_sharded(second / f"step-{STEPS}", RANKS)
    for r in range(RANKS):
        for key in whole[r]:
            np.testing.assert_array_equal(resumed[r][key], whole[r][key],
                                          f"rank {r} {key}")
