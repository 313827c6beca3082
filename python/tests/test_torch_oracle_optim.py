"""Parameter groups and learning-rate schedules against torch.optim: the
MLP (every Linear a unit, so each flat parameter holds a weight and a bias
of different groups, split between the ranks at different places) and the
GPT-2 example trained 20 steps with AdamW in three groups — nanoGPT's "no
weight decay for biases and norm weights" (`no-decay-1d`), a name pattern
with half the learning rate, and the rest with weight decay 0.1 — under a
linear warmup then cosine decay to 10% of the peak; torch trains the same
module with torch.optim.AdamW given the same three groups and
torch.optim.lr_scheduler.LambdaLR with the schedule written out here.
Compared: the per-step losses, the lr reported in the metrics, and every
parameter and optimizer-state tensor after the last step.

The schedule is compiled in for most cases; one case compiles a constant
program and sets the schedule with fsdp-run's options instead.

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_torch_oracle_optim.py
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")

from fsdp_mlir import driver  # noqa: E402

from test_torch_oracle import (EXAMPLES, LOSS_RTOL, NUM_SAMPLES,  # noqa: E402
                               SEED, _gpt_data, _mlp_data, _noise_only,
                               assert_state_matches, seeded_initial_weights)
from torch_reference import GPT, MLP  # noqa: E402

STEPS = 20
LR = 3e-3
WEIGHT_DECAY = 0.1
WARMUP, DECAY, FLOOR = 5, 15, 0.1
HALF_LR_PATTERN = {"mlp": "fc2.*", "gpt2": "*.wpe.weight"}
MODELS = {"mlp": (EXAMPLES / "mlp.mlir", MLP, 8, _mlp_data,
                  dict(auto_wrap_policy="always")),
          "gpt2": (EXAMPLES / "gpt2.mlir", GPT, 4, _gpt_data,
                   dict(wrap_kinds=["Block"]))}


def lr_lambda(step):
    """nanoGPT's get_lr as a LambdaLR factor, written independently of
    runtime/runner/LrSchedule.cpp."""
    if step < WARMUP:
        return (step + 1) / (WARMUP + 1)
    progress = min(1.0, (step - WARMUP) / DECAY)
    return FLOOR + (1 - FLOOR) * 0.5 * (1 + math.cos(math.pi * progress))


def torch_groups(name, model):
    """The three groups, chosen as the compiler's first-match rules do."""
    half = HALF_LR_PATTERN[name].replace(".", r"\.").replace("*", ".*")
    import re
    no_decay, halved, rest = [], [], []
    for key, p in model.named_parameters():
        if p.dim() < 2:
            no_decay.append(p)
        elif re.fullmatch(half, key):
            halved.append(p)
        else:
            rest.append(p)
    assert no_decay and halved and rest
    return [{"params": no_decay, "weight_decay": 0.0},
            {"params": halved, "lr": LR * 0.5},
            {"params": rest}]


def train_in_torch(name, init, tensors, global_batch, betas=(0.9, 0.999),
                   eps=1e-8):
    _, cls, _, _, _ = MODELS[name]
    model = cls()
    model.load_state_dict({k: torch.from_numpy(v.copy())
                           for k, v in init.items()})
    opt = torch.optim.AdamW(torch_groups(name, model), lr=LR,
                            betas=betas, eps=eps,
                            weight_decay=WEIGHT_DECAY)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    inputs = [torch.from_numpy(tensors[f"input.{i}"])
              for i in range(len(tensors))]
    losses, lrs = [], []
    for step in range(STEPS):
        rows = torch.tensor([(step * global_batch + j) % NUM_SAMPLES
                             for j in range(global_batch)])
        lrs.append(opt.param_groups[2]["lr"])
        opt.zero_grad()
        loss = model(*(t[rows] for t in inputs))
        loss.backward()
        opt.step()
        schedule.step()
        losses.append(loss.item())
    params = dict(model.named_parameters())
    final = {k: v.detach().numpy().copy() for k, v in params.items()}
    for k, p in params.items():
        for key in ("exp_avg", "exp_avg_sq"):
            final[f"optim.{key}.{k}"] = opt.state[p][key].numpy().copy()
    return losses, lrs, final


CASES = [("mlp", 1, "full-shard", "compiled"),
         ("mlp", 2, "full-shard", "compiled"),
         ("mlp", 4, "hybrid-shard", "compiled"),
         ("mlp", 2, "shard-grad-op", "run-options"),
         ("gpt2", 2, "full-shard", "compiled")]


@pytest.mark.parametrize("name,ranks,strategy,schedule", CASES,
                         ids=lambda v: str(v))
def test_groups_and_schedule_match_torch(name, ranks, strategy, schedule,
                                         tmp_path):
    _check_against_torch(name, ranks, strategy, schedule, tmp_path)


def test_betas_and_eps_match_torch(tmp_path):
    """GPT-style betas (0.9, 0.95) and another eps, given to fsdp-pipeline
    as beta1 / beta2 / eps: torch.optim.AdamW with the same."""
    _check_against_torch("mlp", 2, "full-shard", "compiled", tmp_path,
                         betas=(0.8, 0.95), eps=1e-6)


def _check_against_torch(name, ranks, strategy, schedule, tmp_path,
                         betas=(0.9, 0.999), eps=1e-8):
    example, _, batch, make_data, options = MODELS[name]
    tensors = make_data(np.random.default_rng(1234))
    data = tmp_path / "data.safetensors"
    st_numpy.save_file(tensors, str(data))
    init, _ = seeded_initial_weights(example, tmp_path / "init")

    scheduled = dict(lr_schedule="cosine", warmup_steps=WARMUP,
                     decay_steps=DECAY, min_lr_ratio=FLOOR)
    prog = driver.compile(
        example, tmp_path / "prog.mlir", world_size=ranks,
        sharding_strategy=strategy,
        shard_group_size=2 if strategy == "hybrid-shard" else None,
        optimizer="adamw", lr=LR, weight_decay=WEIGHT_DECAY,
        no_decay_1d=True,
        param_groups=[f"{HALF_LR_PATTERN[name]}:lr-scale=0.5"],
        beta1=betas[0], beta2=betas[1], eps=eps,
        **options, **(scheduled if schedule == "compiled" else {}))
    save = tmp_path / "ckpt"
    result = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED, data=data,
                        save=save, timeout=180,
                        **(scheduled if schedule == "run-options" else {}))
    ours = st_numpy.load_file(str(save / f"step-{STEPS}.safetensors"))

    ref_losses, ref_lrs, ref = train_in_torch(name, init, tensors,
                                              batch * ranks, betas, eps)
    for step, (row, loss, lr) in enumerate(zip(result.metrics, ref_losses,
                                               ref_lrs)):
        assert math.isclose(row["lr"], lr, rel_tol=1e-12), f"step {step}"
        assert math.isclose(row["loss"], loss, rel_tol=LOSS_RTOL), \
            f"step {step}: loss {row['loss']!r} vs torch {loss!r}"
    assert sorted(ours) == sorted(ref)
    # Parameters under AdamW's bounds (elements whose gradient is float
    # noise may drift by what AdamW lets them move), optimizer state by its
    # gradients' scale: see test_torch_oracle.
    assert_state_matches(ours, ref, adamw_lr=LR, steps=STEPS,
                         noise_mask=lambda key, shape: _noise_only(
                             name, key, shape))


def test_groups_change_the_update(tmp_path):
    """The groups are not a no-op: after one step, the weights of fc1 (in
    the default group either way) are the same, its bias (no decay) and fc2
    (half the lr) are not."""
    example = MODELS["mlp"][0]
    tensors = _mlp_data(np.random.default_rng(1234))
    data = tmp_path / "data.safetensors"
    st_numpy.save_file(tensors, str(data))
    finals = []
    for tag, groups in (("plain", {}),
                        ("grouped", dict(no_decay_1d=True,
                                         param_groups=["fc2.*:lr-scale=0.5"]))):
        prog = driver.compile(example, tmp_path / f"{tag}.mlir", world_size=2,
                              optimizer="adamw", lr=LR,
                              weight_decay=WEIGHT_DECAY,
                              auto_wrap_policy="always", **groups)
        driver.run(prog, nproc=2, steps=1, seed=SEED, data=data,
                   save=tmp_path / tag, timeout=120)
        finals.append(st_numpy.load_file(
            str(tmp_path / tag / "step-1.safetensors")))
    plain, grouped = finals
    assert np.array_equal(plain["fc1.weight"], grouped["fc1.weight"])
    assert not np.array_equal(plain["fc1.bias"], grouped["fc1.bias"])
    assert not np.array_equal(plain["fc2.weight"], grouped["fc2.weight"])


@pytest.mark.parametrize("beta1,beta2", [(0.91, 0.999), (0.9, 0.998)])
def test_state_bound_catches_a_wrong_beta(beta1, beta2, tmp_path):
    """The optimizer-state bound (relative to the gradients' scale) is not
    vacuous: GPT-2 trained STEPS steps by torch with beta1 0.91 or beta2
    0.998 instead of 0.9 / 0.999 fails it against the right run, in the
    optimizer state alone (the weights move by less than AdamW's bounds in
    the first steps, so they are left out)."""
    init, _ = seeded_initial_weights(EXAMPLES / "gpt2.mlir", tmp_path / "init")
    tensors = _gpt_data(np.random.default_rng(1234))

    def state(betas):
        model = GPT()
        model.load_state_dict({k: torch.from_numpy(v.copy())
                               for k, v in init.items()})
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=betas)
        inputs = [torch.from_numpy(tensors[f"input.{i}"]) for i in range(2)]
        for step in range(STEPS):
            rows = torch.tensor([(step * 8 + j) % NUM_SAMPLES
                                 for j in range(8)])
            opt.zero_grad()
            model(*(t[rows] for t in inputs)).backward()
            opt.step()
        return {f"optim.{key}.{k}": opt.state[p][key].numpy().copy()
                for k, p in model.named_parameters()
                for key in ("exp_avg", "exp_avg_sq")}

    right, wrong = state((0.9, 0.999)), state((beta1, beta2))
    assert_state_matches(right, right, adamw_lr=LR, steps=STEPS)
    with pytest.raises(AssertionError, match="max.diff"):
        assert_state_matches(wrong, right, adamw_lr=LR, steps=STEPS)


# -- Adam, clipping norms (issue 42, item 6) -----------------------------------
# The MLP (every Linear a unit) at 1, 2 and 4 ranks (4: hybrid-shard, shard
# groups of 2) against torch training the unsharded module on the same rows.
OPT_STEPS = 10
OPT_LR = 1e-2
RANK_CASES = [(1, "full-shard"), (2, "full-shard"), (4, "hybrid-shard")]


def _train_ours(tmp_path, ranks, strategy, steps=OPT_STEPS, **options):
    """Our MLP trained `steps` steps with fsdp-pipeline `options`: (data
    tensors, initial weights, per-step metrics, final checkpoint)."""
    example, _, _, make_data, wrap = MODELS["mlp"]
    tensors = make_data(np.random.default_rng(1234))
    data = tmp_path / "data.safetensors"
    st_numpy.save_file(tensors, str(data))
    init, _ = seeded_initial_weights(example, tmp_path / "init")
    prog = driver.compile(
        example, tmp_path / "prog.mlir", world_size=ranks,
        sharding_strategy=strategy,
        shard_group_size=2 if strategy == "hybrid-shard" else None,
        **wrap, **options)
    save = tmp_path / "ckpt"
    result = driver.run(prog, nproc=ranks, steps=steps, seed=SEED, data=data,
                        save=save, timeout=180)
    ours = st_numpy.load_file(str(save / f"step-{steps}.safetensors"))
    return tensors, init, result.metrics, ours


def _train_reference(init, tensors, global_batch, make_optimizer,
                     state_names, steps=OPT_STEPS, clip=None):
    """torch: the MLP trained by make_optimizer(module), with
    clip_grad_norm_(parameters, *clip) before each step when `clip`: (losses,
    total norms, final parameters and optimizer state by our names)."""
    _, cls, _, _, _ = MODELS["mlp"]
    model = cls()
    model.load_state_dict({k: torch.from_numpy(v.copy())
                           for k, v in init.items()})
    opt = make_optimizer(model)
    inputs = [torch.from_numpy(tensors[f"input.{i}"])
              for i in range(len(tensors))]
    losses, norms = [], []
    for step in range(steps):
        rows = torch.tensor([(step * global_batch + j) % NUM_SAMPLES
                             for j in range(global_batch)])
        opt.zero_grad()
        loss = model(*(t[rows] for t in inputs))
        loss.backward()
        if clip:
            norms.append(float(torch.nn.utils.clip_grad_norm_(
                model.parameters(), *clip)))
        opt.step()
        losses.append(loss.item())
    params = dict(model.named_parameters())
    final = {k: v.detach().numpy().copy() for k, v in params.items()}
    for k, p in params.items():
        for name in state_names:  # those the parameter has (Adafactor's vary)
            if opt.state[p].get(name) is not None:
                final[f"optim.{name}.{k}"] = opt.state[p][name].numpy().copy()
    return losses, norms, final


def _assert_losses(metrics, ref_losses):
    assert len(metrics) == len(ref_losses)
    for step, (row, loss) in enumerate(zip(metrics, ref_losses)):
        assert math.isclose(row["loss"], loss, rel_tol=LOSS_RTOL), \
            f"step {step}: loss {row['loss']!r} vs torch {loss!r}"


@pytest.mark.parametrize("ranks,strategy", RANK_CASES, ids=str)
def test_adam_matches_torch(ranks, strategy, tmp_path):
    """optimizer=adam is torch.optim.Adam: weight decay 0.1 as an L2 term
    of the gradient (AdamW would decay the weights instead)."""
    batch = MODELS["mlp"][2]
    tensors, init, metrics, ours = _train_ours(
        tmp_path, ranks, strategy, optimizer="adam", lr=OPT_LR,
        weight_decay=WEIGHT_DECAY)
    ref_losses, _, ref = _train_reference(
        init, tensors, batch * ranks,
        lambda m: torch.optim.Adam(m.parameters(), lr=OPT_LR,
                                   weight_decay=WEIGHT_DECAY),
        ("exp_avg", "exp_avg_sq"))
    _assert_losses(metrics, ref_losses)
    assert sorted(ours) == sorted(ref)
    # Adam normalises float noise as AdamW does: AdamW's bounds.
    assert_state_matches(ours, ref, adamw_lr=OPT_LR, steps=OPT_STEPS)


CLIP_MAX_NORM = 0.02


@pytest.mark.parametrize("norm_type", [math.inf, 1.0, 3.0], ids=str)
@pytest.mark.parametrize("ranks,strategy", RANK_CASES, ids=str)
def test_clip_norm_types_match_torch(ranks, strategy, norm_type, tmp_path):
    """clip-norm-type is clip_grad_norm_(max_norm, norm_type) on the
    unsharded gradients: the same total norm each step (inf: the largest
    |element| of any shard, MAX-reduced over the shard group; p: Σ|g|^p
    summed) and the same clipped SGD trajectory."""
    batch = MODELS["mlp"][2]
    tensors, init, metrics, ours = _train_ours(
        tmp_path, ranks, strategy, optimizer="sgd", lr=0.1, momentum=0.9,
        clip_grad_norm=CLIP_MAX_NORM, clip_norm_type=norm_type)
    ref_losses, ref_norms, ref = _train_reference(
        init, tensors, batch * ranks,
        lambda m: torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
        ("momentum_buffer",), clip=(CLIP_MAX_NORM, norm_type))
    _assert_losses(metrics, ref_losses)
    # The norm is a reduction in another order (per shard, then across
    # ranks): float noise of a few ulps, as the losses.
    for step, (row, norm) in enumerate(zip(metrics, ref_norms)):
        assert math.isclose(row["grad_norm"], norm, rel_tol=LOSS_RTOL), \
            f"step {step}: norm {row['grad_norm']!r} vs torch {norm!r}"
    # Clipping acted on every step, so a wrong norm would show.
    assert min(ref_norms) > CLIP_MAX_NORM
    assert sorted(ours) == sorted(ref)
    assert_state_matches(ours, ref, steps=OPT_STEPS)


def _mlp_groups(model, override):
    """torch param groups: fc2's parameters with `override`, the rest with
    the optimizer's settings."""
    fc2 = [p for k, p in model.named_parameters() if k.startswith("fc2.")]
    rest = [p for k, p in model.named_parameters() if not k.startswith("fc2.")]
    return [dict(params=fc2, **override), dict(params=rest)]


@pytest.mark.parametrize("ranks,strategy", RANK_CASES, ids=str)
def test_group_betas_and_eps_match_torch(ranks, strategy, tmp_path):
    """param-groups fc2.*:beta1=0.8:beta2=0.95:eps=1e-6 under AdamW is a
    torch param group with its own betas and eps (each Linear is a unit, so
    a flat parameter holds one group)."""
    batch = MODELS["mlp"][2]
    tensors, init, metrics, ours = _train_ours(
        tmp_path, ranks, strategy, optimizer="adamw", lr=OPT_LR,
        param_groups=["fc2.*:beta1=0.8:beta2=0.95:eps=1e-6"])
    ref_losses, _, ref = _train_reference(
        init, tensors, batch * ranks,
        lambda m: torch.optim.AdamW(
            _mlp_groups(m, dict(betas=(0.8, 0.95), eps=1e-6)),
            lr=OPT_LR),
        ("exp_avg", "exp_avg_sq"))
    _assert_losses(metrics, ref_losses)
    assert sorted(ours) == sorted(ref)
    # The state bound reads the gradient scale off exp_avg_sq with beta2
    # 0.999; for fc2 (beta2 0.95) that overestimates it, a looser bound
    # there: the losses and weights keep theirs.
    assert_state_matches(ours, ref, adamw_lr=OPT_LR, steps=OPT_STEPS)
    # The group's settings took effect: fc2's state is not the default's.
    _, _, plain = _train_reference(
        init, tensors, batch * ranks,
        lambda m: torch.optim.AdamW(m.parameters(), lr=OPT_LR),
        ("exp_avg",))
    assert not np.allclose(ours["optim.exp_avg.fc2.weight"],
                           plain["optim.exp_avg.fc2.weight"], rtol=1e-3)


def test_group_momentum_and_dampening_match_torch(tmp_path):
    """param-groups fc2.*:momentum=0.5:dampening=0.1 under SGD (momentum
    0.9) is a torch param group with its own momentum and dampening."""
    batch = MODELS["mlp"][2]
    tensors, init, metrics, ours = _train_ours(
        tmp_path, 2, "full-shard", optimizer="sgd", lr=0.1, momentum=0.9,
        param_groups=["fc2.*:momentum=0.5:dampening=0.1"])
    ref_losses, _, ref = _train_reference(
        init, tensors, batch * 2,
        lambda m: torch.optim.SGD(
            _mlp_groups(m, dict(momentum=0.5, dampening=0.1)),
            lr=0.1, momentum=0.9),
        ("momentum_buffer",))
    _assert_losses(metrics, ref_losses)
    assert sorted(ours) == sorted(ref)
    assert_state_matches(ours, ref, steps=OPT_STEPS)


class ReferenceLion(torch.optim.Optimizer):
    """Lion as Chen et al. 2023 publish it (torch.optim has none), written
    here independently of the runtime: c = b1 m + (1 - b1) g;
    p *= 1 - lr wd; p -= lr sign(c); m = b2 m + (1 - b2) g."""

    def __init__(self, params, lr, betas, weight_decay):
        super().__init__(params, dict(lr=lr, betas=betas,
                                      weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                c = m.mul(beta1).add(p.grad, alpha=1 - beta1)
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(c), alpha=-group["lr"])
                m.mul_(beta2).add_(p.grad, alpha=1 - beta2)


LION_LR = 1e-3


@pytest.mark.parametrize("ranks,strategy", RANK_CASES, ids=str)
def test_lion_matches_the_published_rule(ranks, strategy, tmp_path):
    """optimizer=lion with betas (0.95, 0.98) and weight decay 0.1 against
    ReferenceLion on the unsharded torch module."""
    batch = MODELS["mlp"][2]
    tensors, init, metrics, ours = _train_ours(
        tmp_path, ranks, strategy, optimizer="lion", lr=LION_LR, beta1=0.95,
        beta2=0.98, weight_decay=WEIGHT_DECAY)
    ref_losses, _, ref = _train_reference(
        init, tensors, batch * ranks,
        lambda m: ReferenceLion(m.parameters(), lr=LION_LR,
                                betas=(0.95, 0.98),
                                weight_decay=WEIGHT_DECAY),
        ("exp_avg",))
    _assert_losses(metrics, ref_losses)
    assert sorted(ours) == sorted(ref)
    # Every update is lr·sign(c): float noise in c only matters where c is
    # ~0, where it may flip one step's sign (2·lr). exp_avg is a sum of
    # gradients like SGD's momentum buffer: the default bounds.
    for key, want in ref.items():
        diff = np.abs(ours[key].astype(np.float64) - want)
        bound = 1e-4 * np.abs(want).max() + 1e-12
        if not key.startswith("optim."):
            flips = diff > bound
            assert flips.sum() <= max(1, flips.size // 1000), key
            assert diff.max() <= 2 * LION_LR, key
        else:
            assert diff.max() <= bound, key
