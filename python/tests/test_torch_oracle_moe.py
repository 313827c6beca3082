"""PyTorch as an independent oracle for PyTorch's FSDP test model
MixtureOfExperts (fsdp_mlir.models.mixture_of_experts): a rank-local expert
unit (`unit<rank_local = true>`, PyTorch's `FSDP(expert,
process_group=new_group([rank]))`) between ordinarily sharded units.

PyTorch's reference for this model (test_fsdp_core.py's
test_mixture_of_experts) is DummyDDP: every rank runs its own copy, and after
loss.backward() every non-expert gradient is divided by the world size and
all-reduced (summed) while the expert's stays local. Here W ranks are W
torch models in one process: the non-expert weights of each come from our
full checkpoint (`--steps 0 --save`), rank r's expert from rank r's file of a
`--steps 0 --save-format sharded` checkpoint (each rank initialises its
expert from its own random stream). Rank r trains the samples fsdp-run gives
it from the `--data X.safetensors` dataset: its k-th sample of step s is row
(s*G + r + k*W) mod N (G = W*B; runtime/runner/Data.cpp). Each rank's loss is
output.sum() of its batch; fsdp-run's metrics report the mean over ranks.

Compared after 5 steps with SGD (momentum 0.9) or AdamW, with
test_torch_oracle.py's tolerances: the per-step losses; the full checkpoint
(non-expert parameters and rank 0's expert, optimizer state included); and a
sharded checkpoint of the same run, decoded with the flat layout its
metadata describes: every rank's own expert (`module.2/flat_param` and its
optimizer state, whole on every rank) and the other units reassembled from
the shards. Also: the initial experts differ between ranks while the
replicated parameters agree; resuming from a sharded checkpoint gives each
rank its expert back (the losses and weights of an uninterrupted run);
clip-grad-norm is a compile error; and PyTorch's own FSDP1 (the expert on a
world-1 process group) on 2 gloo processes gives the same losses and
weights.

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_torch_oracle_moe.py
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")
safetensors = pytest.importorskip("safetensors")

from fsdp_mlir import driver, models  # noqa: E402

import test_torch_oracle as base  # noqa: E402  (skips without the tools)
from torch_reference import (MixtureOfExperts, free_port,  # noqa: E402
                             oracle_cases, run_workers)

STEPS = base.STEPS
SEED = base.SEED
NUM_SAMPLES = base.NUM_SAMPLES
BATCH = 4          # per rank, the builder's default
EXPERT = "module.2"  # the rank-local unit (and its parameters' prefix)
# nested_wrapped's learning rates: the same kind of sum loss.
LR = {"sgd": 1e-3, "adamw": 1e-2}

# (ranks, strategy, optimizer): every world size, strategy and optimizer.
DEFAULT_CASES = [
    (1, "full-shard", "sgd"),
    (2, "full-shard", "sgd"),
    (2, "full-shard", "adamw"),
    (2, "shard-grad-op", "adamw"),
    (2, "no-shard", "sgd"),
    (4, "full-shard", "adamw"),
    (4, "shard-grad-op", "sgd"),
    (4, "no-shard", "adamw"),
    (4, "hybrid-shard", "sgd"),
]

# FSDP_ORACLE_FULL=1: every (ranks, strategy, optimizer), 20 cases.
CASES = oracle_cases(DEFAULT_CASES)


# -- checkpoints ---------------------------------------------------------------
def _is_expert(key):
    return key.split(".", 2)[-1].startswith(EXPERT + ".") if \
        key.startswith("optim.") else key.startswith(EXPERT + ".")


def read_sharded(directory, ranks):
    """Rank r's tensors and the unit layout (metadata "units") of a sharded
    checkpoint directory."""
    files, units = [], None
    for r in range(ranks):
        path = Path(directory) / f"rank-{r}-of-{ranks}.safetensors"
        with safetensors.safe_open(str(path), "np") as f:
            meta = f.metadata()
            files.append({k: f.get_tensor(k) for k in f.keys()})
        assert meta["format"] == "fsdp-mlir-sharded"
        assert int(meta["rank"]) == r and int(meta["world_size"]) == ranks
        if units is None:
            units = json.loads(meta["units"])
            shard = int(meta["shard"])
        assert json.loads(meta["units"]) == units
    return files, units, shard


def _unflatten(unit, flat, prefix=""):
    """{prefix + param name: tensor} of one unit's flat tensor."""
    out = {}
    for p in unit["params"]:
        n = int(np.prod(p["shape"], dtype=np.int64))
        out[prefix + p["name"]] = flat[p["flat_offset"]:p["flat_offset"] + n] \
            .reshape(p["shape"])
    return out


def _decode_unit(unit, tensors):
    """Parameters and optimizer state of `unit` from its flat tensors."""
    key = unit["name"] or "_root"
    out = _unflatten(unit, tensors(f"{key}/flat_param"))
    for state in unit["state"]:
        out.update(_unflatten(unit, tensors(f"{key}/{state}"),
                              f"optim.{state}."))
    return out


def expert_of_rank(files, units, rank):
    """Rank r's own expert (parameters and optimizer state)."""
    unit = next(u for u in units if u["name"] == EXPERT)
    # Whole on every rank: the shard is the flat parameter.
    assert unit["shard_numel"] == unit["padded_numel"] == unit["flat_numel"]
    # Definition order: weight then bias, flattened.
    assert [p["name"] for p in unit["params"]] == \
        [EXPERT + ".weight", EXPERT + ".bias"]
    return _decode_unit(unit, lambda k: files[rank][k])


def replicated_state(files, units, shard):
    """The other units, their shards (ranks 0..shard-1, the first replicate
    group) concatenated and unpadded."""
    out = {}
    for unit in units:
        if unit["name"] == EXPERT:
            continue

        def whole(key, unit=unit):
            flat = np.concatenate([files[r][key] for r in range(shard)])
            assert flat.size == unit["padded_numel"]
            return flat[:unit["flat_numel"]]
        out.update(_decode_unit(unit, whole))
    return out


# -- the DummyDDP reference ----------------------------------------------------
def rows_of(step, rank, ranks):
    """fsdp-run's samples of `rank` at `step` (runtime/runner/Data.cpp)."""
    g = BATCH * ranks
    return torch.tensor([(step * g + rank + k * ranks) % NUM_SAMPLES
                         for k in range(BATCH)])


def train_dummy_ddp(ranks, optimizer, lr, init, experts, x, steps=STEPS,
                    expert_grad_scale=1.0):
    """W torch models trained as DummyDDP: non-expert gradients divided by W
    and summed over ranks, the expert's local. Returns the per-step losses
    (mean over ranks) and each rank's final parameters and optimizer state
    under our checkpoint's names. `expert_grad_scale` perturbs the reference
    (to see the test fail)."""
    torch.manual_seed(0)
    nets, opts = [], []
    for r in range(ranks):
        net = MixtureOfExperts()
        state = {k: v for k, v in init.items() if not _is_expert(k)}
        state.update({k: v for k, v in experts[r].items()
                      if not k.startswith("optim.")})
        assert sorted(net.state_dict()) == sorted(state)
        net.load_state_dict({k: torch.from_numpy(np.array(v, copy=True))
                             for k, v in state.items()})
        nets.append(net)
        opts.append(base.torch_optimizer(optimizer, list(net.parameters()),
                                         lr))
    names = [k for k, _ in nets[0].named_parameters()]
    losses = []
    for step in range(steps):
        total = 0.0
        for r, (net, opt) in enumerate(zip(nets, opts)):
            opt.zero_grad()
            loss = net(x[rows_of(step, r, ranks)])
            loss.backward()
            total += loss.item()
        losses.append(total / ranks)
        params = [dict(net.named_parameters()) for net in nets]
        for k in names:
            if _is_expert(k):
                for p in params:
                    p[k].grad.mul_(expert_grad_scale)
                continue
            # grad.div_(world_size); all_reduce(grad)
            mean = sum(p[k].grad / ranks for p in params)
            for p in params:
                p[k].grad.copy_(mean)
        for opt in opts:
            opt.step()
    finals = []
    for net, opt in zip(nets, opts):
        final = {}
        for k, p in net.named_parameters():
            final[k] = p.detach().numpy().copy()
            for key in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
                if key in opt.state[p]:
                    final[f"optim.{key}.{k}"] = \
                        opt.state[p][key].numpy().copy()
        finals.append(final)
    return losses, finals


def _worst(ours, ref):
    """max over tensors of max|diff| / max|ref| (for the report)."""
    worst = 0.0
    for k, r in ref.items():
        r = r.astype(np.float64)
        d = float(np.max(np.abs(ours[k].astype(np.float64) - r)))
        worst = max(worst, d / (float(np.max(np.abs(r))) or 1.0))
    return worst


def _loss_worst(ours, ref):
    return max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(ours, ref))


# -- fixtures ------------------------------------------------------------------
@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("torch_oracle_moe")


@pytest.fixture(scope="module")
def dataset(workdir):
    x = np.random.default_rng(4321).standard_normal((NUM_SAMPLES, 8),
                                                    np.float32)
    path = workdir / "moe.safetensors"
    st_numpy.save_file({"input.0": x}, str(path))
    return path, torch.from_numpy(x)


@pytest.fixture(scope="module")
def program(workdir):
    cache = {}

    def get(ranks, strategy, optimizer, **extra):
        key = (ranks, strategy, optimizer)
        if key not in cache:
            options = dict(optimizer="sgd", lr=LR["sgd"], momentum=0.9) \
                if optimizer == "sgd" else dict(optimizer="adamw",
                                                lr=LR["adamw"])
            cache[key] = driver.compile(
                models.build("mixture_of_experts", batch=BATCH),
                workdir / f"moe-{ranks}-{strategy}-{optimizer}.mlir",
                world_size=ranks, sharding_strategy=strategy,
                shard_group_size=2 if strategy == "hybrid-shard" else None,
                **options)
        return cache[key]
    return get


class Initial:
    """Our initial weights: `full()` the world-size independent parameters
    of a full step-0 checkpoint; `sharded(ranks, strategy)` the (files,
    units, shard) of a sharded step-0 checkpoint of a `ranks`-rank run;
    `__call__(ranks)` (full, [rank r's expert])."""

    def __init__(self, workdir, data, program):
        self.workdir, self.data, self.program = workdir, data, program
        self.cache = {}

    def full(self):
        if "full" not in self.cache:
            save = self.workdir / "init-full"
            driver.run(self.program(1, "full-shard", "sgd"), nproc=1, steps=0,
                       seed=SEED, data=self.data, save=save, timeout=120)
            state = st_numpy.load_file(str(save / "step-0.safetensors"))
            self.cache["full"] = {k: v for k, v in state.items()
                                  if not k.startswith("optim.")}
        return self.cache["full"]

    def sharded(self, ranks, strategy="full-shard"):
        if (ranks, strategy) not in self.cache:
            save = self.workdir / f"init-{ranks}-{strategy}"
            driver.run(self.program(ranks, strategy, "sgd"), nproc=ranks,
                       steps=0, seed=SEED, data=self.data, save=save,
                       save_format="sharded", timeout=120)
            self.cache[(ranks, strategy)] = read_sharded(save / "step-0",
                                                         ranks)
        return self.cache[(ranks, strategy)]

    def __call__(self, ranks, strategy="full-shard"):
        files, units, _ = self.sharded(ranks, strategy)
        return self.full(), [expert_of_rank(files, units, r)
                             for r in range(ranks)]


@pytest.fixture(scope="module")
def initial(workdir, dataset, program):
    return Initial(workdir, dataset[0], program)


@pytest.fixture(scope="module")
def trained(workdir, dataset, program):
    """A case trained STEPS steps twice, saving a full and a sharded
    checkpoint: (losses, full state, sharded (files, units, shard))."""
    cache = {}

    def get(ranks, strategy, optimizer):
        key = (ranks, strategy, optimizer)
        if key not in cache:
            prog = program(*key)
            tag = f"{ranks}-{strategy}-{optimizer}"
            full = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED,
                              data=dataset[0], save=workdir / f"full-{tag}",
                              timeout=120)
            sharded = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED,
                                 data=dataset[0], save_format="sharded",
                                 save=workdir / f"sharded-{tag}", timeout=120)
            losses = [row["loss"] for row in full.metrics]
            # The two runs are the same computation.
            assert [row["loss"] for row in sharded.metrics] == losses
            state = st_numpy.load_file(
                str(workdir / f"full-{tag}" / f"step-{STEPS}.safetensors"))
            cache[key] = (losses, state, read_sharded(
                workdir / f"sharded-{tag}" / f"step-{STEPS}", ranks))
        return cache[key]
    return get


# -- the cases -----------------------------------------------------------------
def check_against_reference(ranks, strategy, optimizer, initial, trained, x,
                            expert_grad_scale=1.0):
    init, experts = initial(ranks)
    lr = LR[optimizer]
    ref_losses, ref = train_dummy_ddp(ranks, optimizer, lr, init, experts, x,
                                      expert_grad_scale=expert_grad_scale)
    losses, full, (files, units, shard) = trained(ranks, strategy, optimizer)
    adamw_lr = lr if optimizer == "adamw" else None
    worst = {"loss": _loss_worst(losses, ref_losses)}

    base.assert_losses_match(losses, ref_losses, what="DummyDDP",
                             abs_tol=base.LOSS_ATOL)
    # The full checkpoint: the replicated units and rank 0's expert.
    assert sorted(full) == sorted(ref[0]), "checkpoint keys differ"
    base.assert_state_matches(full, ref[0], adamw_lr=adamw_lr)
    worst["full"] = _worst(full, ref[0])
    # The sharded one: every rank's own expert, and the other units.
    for r in range(ranks):
        mine = expert_of_rank(files, units, r)
        want = {k: v for k, v in ref[r].items() if _is_expert(k)}
        assert sorted(mine) == sorted(want)
        base.assert_state_matches(mine, want, adamw_lr=adamw_lr)
        worst["expert"] = max(worst.get("expert", 0.0), _worst(mine, want))
    rest = replicated_state(files, units, shard)
    want = {k: v for k, v in ref[0].items() if not _is_expert(k)}
    assert sorted(rest) == sorted(want)
    base.assert_state_matches(rest, want, adamw_lr=adamw_lr)
    worst["sharded"] = _worst(rest, want)
    return worst


@pytest.mark.parametrize("ranks,strategy,optimizer", CASES,
                         ids=lambda v: str(v))
def test_matches_dummy_ddp(ranks, strategy, optimizer, initial, trained,
                           dataset):
    worst = check_against_reference(ranks, strategy, optimizer, initial,
                                    trained, dataset[1])
    print(f"\nmoe {ranks} {strategy} {optimizer}: " +
          ", ".join(f"{k} {v:.3g}" for k, v in worst.items()))


def test_perturbed_reference_fails(initial, trained, dataset):
    """The comparison can fail: a reference whose expert gradient is 1%
    smaller (or that averages it over the ranks) is caught."""
    for scale in (0.99, 0.5):
        with pytest.raises(AssertionError):
            check_against_reference(2, "full-shard", "sgd", initial, trained,
                                    dataset[1], expert_grad_scale=scale)


def test_initial_experts_are_per_rank(initial):
    """At 2 ranks the experts differ, everything else agrees: no-shard keeps
    whole replicas on both ranks, and they are bit-identical (and equal to
    the full checkpoint, rank 0's expert included)."""
    init, experts = initial(2, "no-shard")
    files, units, shard = initial.sharded(2, "no-shard")
    assert shard == 1
    w0, w1 = (experts[r][EXPERT + ".weight"] for r in range(2))
    assert np.abs(w0 - w1).max() > 1e-2
    for key in files[0]:
        if not key.startswith(EXPERT + "/"):
            np.testing.assert_array_equal(files[0][key], files[1][key], key)
    for k, v in replicated_state(files, units, shard).items():
        if not k.startswith("optim."):
            np.testing.assert_array_equal(v, init[k], k)
    for k in (EXPERT + ".weight", EXPERT + ".bias"):
        np.testing.assert_array_equal(experts[0][k], init[k], k)
    # Rank r's stream does not depend on the sharding strategy.
    for mine, theirs in zip(experts, initial(2, "full-shard")[1]):
        for k in mine:
            np.testing.assert_array_equal(mine[k], theirs[k], k)


def test_trained_replicas_agree(trained):
    """After training (no-shard, 2 ranks) the replicated units are still
    identical on both ranks, the experts still differ."""
    _, _, (files, _, _) = trained(2, "no-shard", "sgd")
    for key in files[0]:
        if key.startswith(EXPERT + "/"):
            assert np.abs(files[0][key] - files[1][key]).max() > 1e-3, key
        else:
            np.testing.assert_array_equal(files[0][key], files[1][key], key)


def test_resume_from_sharded(workdir, dataset, program, trained):
    """2 steps, a sharded checkpoint, then a run loading it to step STEPS:
    the losses of steps 3..STEPS and every rank's final state are those of
    the uninterrupted run (AdamW: its step count and moments too)."""
    ranks, strategy, optimizer = 2, "full-shard", "adamw"
    prog = program(ranks, strategy, optimizer)
    first = workdir / "resume-first"
    driver.run(prog, nproc=ranks, steps=2, seed=SEED, data=dataset[0],
               save=first, save_format="sharded", timeout=120)
    second = workdir / "resume-second"
    result = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED,
                        data=dataset[0], load=first / "step-2",
                        save=second, save_format="sharded", timeout=120)
    losses, _, (files, units, _) = trained(ranks, strategy, optimizer)
    assert [row["step"] for row in result.metrics] == list(range(3, STEPS + 1))
    assert [row["loss"] for row in result.metrics] == losses[2:]
    resumed, _, _ = read_sharded(second / f"step-{STEPS}", ranks)
    for r in range(ranks):
        assert sorted(resumed[r]) == sorted(files[r])
        for key in files[r]:
            np.testing.assert_array_equal(resumed[r][key], files[r][key],
                                          f"rank {r} {key}")


def test_clip_grad_norm_is_rejected(workdir):
    with pytest.raises(driver.CompileError, match="is a rank-local unit"):
        driver.compile(models.build("mixture_of_experts"),
                       workdir / "clip.mlir", world_size=2, optimizer="sgd",
                       lr=0.1, clip_grad_norm=1.0)


# -- PyTorch FSDP1 on CPU / gloo -----------------------------------------------
# PyTorch's own test_mixture_of_experts setup: FullyShardedDataParallel
# (FSDP1, FULL_SHARD) on the shared Linear and the root, the expert on a
# process group of its own rank (FSDP falls back to NO_SHARD there, so its
# gradient is not reduced), on 2 gloo processes started directly (one torch
# import each). Same initial weights (rank r's expert its own), data and SGD
# (momentum 0.9); compared: the losses (mean over ranks) and each rank's
# final parameters (its full state dict: the replicated units and its own
# expert). About 10 s, nearly all of it importing torch.
_FSDP1_WORKER = r'''
import sys
import torch
import torch.distributed as dist
from safetensors.numpy import load_file

TESTS, INIT, DATA, OUT, PORT, WORLD, BATCH, STEPS, N, LR, RANK = sys.argv[1:]
RANK, WORLD, BATCH, STEPS, N, LR = (int(RANK), int(WORLD), int(BATCH),
                                    int(STEPS), int(N), float(LR))
sys.path.insert(0, TESTS)
from torch_reference import (MixtureOfExperts, fed_rows, join_gloo,
                             leave_gloo, load_weights, train_steps,
                             write_result)
from torch.distributed.fsdp import (FullyShardedDataParallel as FSDP,
                                    FullStateDictConfig, StateDictType)

join_gloo(RANK, WORLD, PORT)
groups = [dist.new_group([r]) for r in range(WORLD)]  # every rank makes all
model = MixtureOfExperts()
load_weights(model, INIT.format(rank=RANK))
cpu = torch.device("cpu")
model.module[2] = FSDP(model.module[2], process_group=groups[RANK],
                       device_id=cpu)
model.module[1] = FSDP(model.module[1], device_id=cpu)
model = FSDP(model, device_id=cpu)
opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
x = torch.from_numpy(load_file(DATA)["input.0"])


def batch(s):
    return (x[fed_rows(s, RANK, WORLD, BATCH, N)],)


losses = train_steps(model, opt, STEPS, batch)
with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                          FullStateDictConfig(rank0_only=False)):
    state = {k: v.detach().numpy().copy()
             for k, v in model.state_dict().items()}
write_result(OUT.format(rank=RANK), state, losses)
leave_gloo()
'''


def test_matches_fsdp1(workdir, dataset, initial, trained):
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if not hasattr(fsdp, "FullyShardedDataParallel") or not \
            torch.distributed.is_gloo_available():
        pytest.skip("no torch.distributed.fsdp.FullyShardedDataParallel "
                    "or gloo")
    ranks, strategy, optimizer = 2, "full-shard", "sgd"
    init, experts = initial(ranks)
    for r in range(ranks):
        state = {k: v for k, v in init.items() if not _is_expert(k)}
        state.update({k: v for k, v in experts[r].items()
                      if not k.startswith("optim.")})
        st_numpy.save_file(state, str(workdir / f"fsdp1-init-{r}.safetensors"))
    out = str(workdir / "fsdp1-{rank}")
    run_workers(workdir, "fsdp1_worker", _FSDP1_WORKER,
                [workdir / "fsdp1-init-{rank}.safetensors", dataset[0], out,
                 free_port(), ranks, BATCH, STEPS, NUM_SAMPLES,
                 repr(LR[optimizer])], nproc=ranks, timeout=120)

    losses, full, (files, units, _) = trained(ranks, strategy, optimizer)
    ref_losses = json.loads(Path(out.format(rank=0) + ".json").read_text())
    assert json.loads(Path(out.format(rank=1) + ".json").read_text()) == \
        ref_losses
    base.assert_losses_match(losses, ref_losses, what="FSDP1",
                             abs_tol=base.LOSS_ATOL)
    worst = {"loss": _loss_worst(losses, ref_losses), "weights": 0.0}
    for r in range(ranks):
        ref = st_numpy.load_file(out.format(rank=r) + ".safetensors")
        assert sorted(ref) == sorted(k for k in full
                                     if not k.startswith("optim."))
        mine = expert_of_rank(files, units, r)
        if r == 0:
            base.assert_state_matches(full, ref)
            worst["weights"] = _worst(full, ref)
        for k in (EXPERT + ".weight", EXPERT + ".bias"):
            base.assert_state_matches(mine, {k: ref[k]})
            worst["weights"] = max(worst["weights"],
                                   _worst(mine, {k: ref[k]}))
    print("\nmoe FSDP1 2 full-shard sgd: " +
          ", ".join(f"{k} {v:.3g}" for k, v in worst.items()))
