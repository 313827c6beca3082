"""Frozen parameters (requires_grad = False) against torch: a model with a
frozen subset, each frozen parameter in a unit beside trainable ones,
trained by fsdp-run on N ranks and by plain torch.nn with the same
parameters frozen (torch.optim skips a parameter without a gradient: no
update, no weight decay, no state).

A unit's frozen parameters are a second flat parameter, sharded and
gathered with the unit but never reduced nor updated. Compared: per-step
losses, every parameter after the last step (a frozen one bit-equal to its
initial value), and the optimizer state, which exists for the trainable
parameters only (the checkpoint has the same keys as torch's state).

Cases: the MLP, GPT-2 and NestedWrappedModule at 1, 2 and 4 ranks over
every strategy (a representative slice by default; FSDP_ORACLE_FULL=1 runs
all), and the issue's model: a wrapped layer called three times, a frozen
per-feature scale between the calls, a head whose bias is frozen, and
gradient clipping, at 3 ranks against torch and against one rank.

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_torch_oracle_frozen.py
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")

from fsdp_mlir import driver, models  # noqa: E402
from fsdp_mlir.ir import Init, Model, Module, tensor  # noqa: E402
from fsdp_mlir.models.layers import linear  # noqa: E402

# The oracle's fixtures: its datasets, and its seeded initial weights, which
# freezing does not change (initialisation depends on the parameter's name
# and the seed only).
from test_torch_oracle import (LOSS_ATOL, MODELS, NUM_SAMPLES, SEED,  # noqa: E402
                               STEPS, LR, _optimizer_options,
                               assert_losses_match, assert_state_matches,
                               datasets, initial_weights,
                               seeded_initial_weights, train_in_torch,
                               workdir)
from torch_reference import NestedWrapped, oracle_cases  # noqa: E402

# Per model: the builder and the frozen parameters (globs), each in a unit
# with trainable parameters.
FROZEN = {
    "mlp": ("mlp", ["fc1.weight", "fc3.bias"]),
    "gpt2": ("gpt2", ["transformer.wpe.weight", "transformer.h.0.attn.*",
                      "transformer.h.1.ln_2.weight"]),
    "nested_wrapped": ("nested_wrapped", ["module.1.0.weight", "module.3.*"]),
}

DEFAULT_CASES = [
    ("mlp", 1, "full-shard", "adamw"),
    ("mlp", 2, "full-shard", "adamw"),
    ("mlp", 2, "shard-grad-op", "sgd"),
    ("mlp", 2, "no-shard", "adamw"),
    ("mlp", 4, "hybrid-shard", "adamw"),
    ("gpt2", 2, "full-shard", "adamw"),
    ("gpt2", 4, "full-shard", "sgd"),
    ("nested_wrapped", 2, "full-shard", "sgd"),
    ("nested_wrapped", 4, "hybrid-shard", "adamw"),
]
CASES = oracle_cases(DEFAULT_CASES, *((name,) for name in FROZEN))


def frozen_model(name):
    builder, patterns = FROZEN[name]
    model = models.build(builder)
    return model, model.freeze(patterns)


@pytest.mark.parametrize("name,ranks,strategy,optimizer", CASES,
                         ids=lambda v: str(v))
def test_frozen_subset_matches_torch(name, ranks, strategy, optimizer,
                                     workdir, datasets, initial_weights):
    model, frozen = frozen_model(name)
    _, cls, batch, _, options = MODELS[name]
    data_path, tensors = datasets[name]
    tag = f"{name}-{ranks}-{strategy}-{optimizer}"
    init = initial_weights(name)
    prog = driver.compile(
        model, workdir / f"{tag}.mlir", world_size=ranks,
        sharding_strategy=strategy,
        shard_group_size=2 if strategy == "hybrid-shard" else None,
        **options, **_optimizer_options(name, optimizer))
    result = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED,
                        data=data_path, save=workdir / tag, timeout=120)
    ours = st_numpy.load_file(str(workdir / tag / f"step-{STEPS}.safetensors"))

    reference = cls(ranks) if cls is NestedWrapped else cls()
    for pname, p in reference.named_parameters():
        p.requires_grad_(pname not in frozen)
    lr = LR[(name, optimizer)]
    ref_losses, ref_state = train_in_torch(reference, optimizer, lr, init,
                                           tensors, batch * ranks)

    assert_losses_match([r["loss"] for r in result.metrics], ref_losses,
                        abs_tol=LOSS_ATOL)
    assert sorted(ours) == sorted(ref_state), \
        "checkpoint keys differ (no optimizer state for frozen parameters)"
    for pname in frozen:
        np.testing.assert_array_equal(ours[pname], init[pname], pname)
    assert_state_matches(ours, ref_state,
                         adamw_lr=lr if optimizer == "adamw" else None)


# -- a wrapped layer called three times, a frozen scale, clipping --------------
SHARED_CALLS = 3
SHARED_BATCH = 4
SHARED_LR = 0.05
SHARED_CLIP = 0.1
SHARED_RANKS = 3


def shared_layer_model():
    """root: x -> 3 x (relu(layer(x)) * scale) -> head -> MSE; `layer` and
    `head` are units, the root's `scale` and head's bias are frozen."""
    act = [SHARED_BATCH]
    root = Module("root", "SharedLayerNet", unit=True)
    scale = root.param("scale", [8], Init.uniform(0.5, 1.5),
                       requires_grad=False)
    layer = root.add(linear("layer", 8, 8, act, unit=True))
    head = root.add(linear("head", 8, 4, act, unit=True))
    head.params["bias"].requires_grad = False
    f = root.forward(tensor(SHARED_BATCH, 8), tensor(SHARED_BATCH, 4))
    h = f.args[0]
    s = f.get_param(scale, "s")
    for i in range(SHARED_CALLS):
        h = f.mul(f.relu(f.call(layer, h, name=f"l{i}")), s, name=f"h{i}")
    out = f.call(head, h, name="out")
    f.ret(f.mse_loss(out, f.args[1], name="loss"))
    return Model("shared_layer", root)


class SharedLayerNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.empty(8), requires_grad=False)
        self.layer = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)
        self.head.bias.requires_grad_(False)

    def forward(self, x, target):
        for _ in range(SHARED_CALLS):
            x = torch.relu(self.layer(x)) * self.scale
        return torch.nn.functional.mse_loss(self.head(x), target)


@pytest.fixture(scope="module")
def shared(workdir):
    rng = np.random.default_rng(5)
    tensors = {"input.0": rng.standard_normal((NUM_SAMPLES, 8), np.float32),
               "input.1": rng.standard_normal((NUM_SAMPLES, 4), np.float32)}
    data = workdir / "shared.safetensors"
    st_numpy.save_file(tensors, str(data))
    model = shared_layer_model()
    init, _ = seeded_initial_weights(model, workdir / "shared.init")

    def train(ranks, strategy="full-shard", accumulate=1):
        tag = f"shared-{ranks}-{strategy}-{accumulate}"
        prog = driver.compile(model, workdir / f"{tag}.mlir", world_size=ranks,
                              sharding_strategy=strategy, optimizer="sgd",
                              lr=SHARED_LR, momentum=0.9,
                              clip_grad_norm=SHARED_CLIP,
                              grad_accum_steps=accumulate)
        run = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED, data=data,
                         save=workdir / tag, timeout=120)
        return (run.metrics,
                st_numpy.load_file(str(workdir / tag /
                                       f"step-{STEPS}.safetensors")))
    return tensors, init, train


def torch_shared(tensors, init, global_batch):
    """torch: SGD with momentum and clip_grad_norm_ over the trainable
    parameters, on rows (s*G + j) mod N."""
    model = SharedLayerNet()
    model.load_state_dict({k: torch.from_numpy(v.copy())
                           for k, v in init.items()})
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=SHARED_LR, momentum=0.9)
    x, y = (torch.from_numpy(tensors[f"input.{i}"]) for i in range(2))
    losses = []
    for step in range(STEPS):
        rows = torch.tensor([(step * global_batch + j) % NUM_SAMPLES
                             for j in range(global_batch)])
        opt.zero_grad()
        loss = model(x[rows], y[rows])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, SHARED_CLIP)
        opt.step()
        losses.append(loss.item())
    state = {k: v.detach().numpy().copy()
             for k, v in model.named_parameters()}
    for k, p in model.named_parameters():
        if p.requires_grad:
            state[f"optim.momentum_buffer.{k}"] = \
                opt.state[p]["momentum_buffer"].numpy().copy()
    return losses, state


@pytest.mark.parametrize("strategy", ["full-shard", "shard-grad-op"])
def test_shared_layer_matches_one_rank_and_torch(shared, strategy):
    tensors, init, train = shared
    metrics, state = train(SHARED_RANKS, strategy)
    one_metrics, one_state = train(1, accumulate=SHARED_RANKS)
    losses = [m["loss"] for m in metrics]
    one_losses = [m["loss"] for m in one_metrics]
    ref_losses, ref_state = torch_shared(tensors, init,
                                         SHARED_BATCH * SHARED_RANKS)
    # The bound: the unsharded run's losses and weights within 1e-5.
    np.testing.assert_allclose(losses, one_losses, rtol=1e-5)
    assert sorted(state) == sorted(one_state) == sorted(ref_state)
    for key in one_state:
        np.testing.assert_allclose(state[key], one_state[key], rtol=1e-5,
                                   atol=1e-5, err_msg=key)
    for key in ("scale", "head.bias"):
        np.testing.assert_array_equal(state[key], init[key], key)
    assert_losses_match(losses, ref_losses)
    assert_state_matches(state, ref_state)
    # Clipping acted: the norm (of the trainable gradients) exceeds the bound.
    assert metrics[0]["grad_norm"] > SHARED_CLIP
    assert math.isclose(metrics[0]["grad_norm"], one_metrics[0]["grad_norm"],
                        rel_tol=1e-5)
