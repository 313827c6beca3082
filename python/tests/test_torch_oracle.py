"""PyTorch as an independent oracle: the models of examples/ trained by
fsdp-run on N ranks against the same models trained by plain single-process
torch.nn, step by step.

For each case fsdp-run writes its seeded initial weights (`--steps 0 --save`,
identical whatever the world size), torch loads them into an equivalent
nn.Module (same state_dict names), and both train 5 steps on the same
tensor dataset (`--data FILE.safetensors`: tensors `input.<i>`, step s uses
rows (s*G + j) mod N, j < G, G the global batch) with the same optimizer.
Compared: the per-step losses (metrics "loss") and, after the last step,
every parameter and optimizer-state tensor of the full checkpoint.

The default run is a representative slice (every MLP configuration, a few
of each other model); FSDP_ORACLE_FULL=1 runs every model x ranks {1, 2, 4}
x strategy (hybrid-shard 2 x 2 at 4 ranks) x {SGD, AdamW} (80 cases).
Each case prints its worst differences (visible with -s or -rA).

Run: PYTHONPATH=python python3 -m pytest -q python/tests/test_torch_oracle.py
The tools come from FSDP_OPT / FSDP_RUN (default build/bin); the module skips
without torch, numpy, safetensors or the tools.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
st_numpy = pytest.importorskip("safetensors.numpy")

from fsdp_mlir import driver, models  # noqa: E402

from torch_reference import (GPT, MLP, NestedWrapped,  # noqa: E402
                             all_oracle_cases, oracle_cases)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
STEPS = 5
SEED = 7
# Dataset rows; not a multiple of any global batch, so the steps wrap around
# the dataset (row index mod N) at different places for 1, 2 and 4 ranks.
NUM_SAMPLES = 37

# Losses: fp32 reductions in a different order (per-rank means averaged over
# ranks vs one mean over the global batch) differ by a few ulps.
LOSS_RTOL = 1e-5
# nested_wrapped's loss is a sum that crosses zero during training, where a
# relative bound alone would ask for bit equality.
LOSS_ATOL = 1e-6
# Weights and optimizer state: per tensor, max|ours - torch| <=
# WEIGHT_RTOL * max|torch| + WEIGHT_ATOL. Measured: <= 1.5e-6 relative for the
# MLP and nested_wrapped, <= 1.2e-5 for GPT-2, outside the two AdamW cases
# below. WEIGHT_ATOL only keeps an all-zero tensor from needing bit equality.
WEIGHT_RTOL = 1e-4
WEIGHT_ATOL = 1e-12
# AdamW amplifies float noise where a gradient is ~eps: GPT-2 (2 ranks)
# h.0.mlp.c_fc.weight[19, 25] has a step-1 gradient of 1.9e-8 (float64), so
# its first update lr * g / (|g| + 1e-8) depends on the gradient's last
# digits, which the fp32 reductions (ranks, reduce-scatter order) change. The
# element ends 1.14e-5 = 3.8e-3 * lr apart (1.4e-4 of the tensor's max), and
# torch fp32 is the farther of the two from a float64 torch run (8.2e-6 vs
# 3.2e-6). AdamW parameters therefore get an atol of 5e-3 * lr; their
# optimizer state (m, v) keeps the bounds above. Such an element can land
# farther: test_torch_import's gpt_vocab on 2 ranks has
# h.0.attn.c_attn.weight[2, 16], step-1 gradient 2.3e-8 (float64; the query
# rows' median is 3.4e-3), 1.1e-2 * lr apart, 18x the tensor's next element
# (since the attention backward computes its probabilities as
# exp(S - lse)). So under AdamW one element in a thousand of a parameter
# (one at least) may exceed the bound, by no more than both runs can move
# (2 * lr * STEPS); a wrong gradient moves many.
ADAMW_WEIGHT_ATOL_PER_LR = 5e-3
ADAMW_OUTLIERS_PER_ELEMENT = 1e-3
# The exception: GPT-2's key bias (c_attn.bias[width:2*width]) has a gradient
# that is zero in exact arithmetic (softmax is invariant to the per-query
# constant q.b_k it adds), so both sides compute float noise (~1e-12) there,
# and AdamW's update lr * m / (sqrt(v) + eps) normalises the noise to O(lr)
# per step: the two runs drift apart by ~1e-5 (0.08% of the tensor's max)
# where neither has a real gradient. Under AdamW those elements may differ by
# the most both can move, 2 * lr * STEPS; every other element of the tensor
# keeps the bound above, and SGD (update lr * noise) keeps it everywhere.
#
# AdamW's optimizer state is bounded by the gradients it is made of, not by
# its own largest value. exp_avg m = sum_k (1 - b1) b1^(t-k) g_k weighs the
# step gradients by 1 - b1^t <= 1 in all, so |dm| <= max_k |dg_k|; and the
# gradients carry the noise of their own scale: fp32 reductions in another
# order, and the weight divergence the AdamW bound above admits (GPT-2, 2
# ranks, 20 steps in test_torch_oracle_optim: h.1.mlp.c_fc.weight[98, 2]'s
# step-1 gradient is -3.8e-9 in float64, below eps, so its first update is
# 0.27 lr or 0.31 lr by the gradient's last digits; the weight ends 5.4e-3 lr
# apart, and the output column 98 of h.1.mlp.c_proj.weight, which reads that
# neuron, gets gradients ~1e-4 of the tensor's largest apart from step 2 on).
# m averages gradients of either sign and ends 2-14x smaller than them there,
# so a bound relative to max|m| failed on torch 2.15 (1.01e-4 * max|m|). The
# gradient scale is read off the reference's own second moment: exp_avg_sq
# v = sum_k (1 - b2) b2^(t-k) g_k^2, so G = sqrt(max v / (1 - b2^t)) is the
# largest per-element RMS gradient over the t steps, and |dm| <=
# WEIGHT_RTOL * G. For v, dv = sum_k (1 - b2) b2^(t-k) 2 g_k dg_k, which by
# Cauchy-Schwarz is at most 2 max|dg| sqrt((1 - b2^t) v) <=
# 2 * WEIGHT_RTOL * max v. Measured there, torch fp32 against torch fp64 (the
# same noise, amplified the same way): |dm| <= 2.6e-5 G, |dv| <= 4.1e-5
# max v; ours against torch fp32 on torch 2.15 (the CI failure): 3.5e-5 G.
# SGD's momentum buffer (no amplification: its update is lr * noise) keeps
# the bound relative to its largest value.
ADAMW_BETA2 = 0.999


def state_bound(key, ref, ref_state, steps=STEPS):
    """The bound on max|ours - torch| of tensor `key` (parameter, buffer or
    optimizer state) before the AdamW parameter terms: see above."""
    kind, _, name = key.partition(".")[2].partition(".")
    if key.startswith("optim.") and kind in ("exp_avg", "exp_avg_sq"):
        v_max = float(np.max(ref_state[f"optim.exp_avg_sq.{name}"]))
        if kind == "exp_avg_sq":
            return 2 * WEIGHT_RTOL * v_max + WEIGHT_ATOL
        grad_scale = math.sqrt(v_max / (1 - ADAMW_BETA2 ** steps))
        return WEIGHT_RTOL * grad_scale + WEIGHT_ATOL
    return WEIGHT_RTOL * float(np.max(np.abs(ref), initial=0.0)) + WEIGHT_ATOL


def _noise_only(name, key, shape):
    """Mask of the elements whose gradient is zero in exact arithmetic."""
    mask = np.zeros(shape, bool)
    # The key third of a fused q/k/v projection's bias (GPT-2's c_attn,
    # test_torch_import.MaskedBlock's qkv).
    fused_qkv = {"gpt2": "attn.c_attn.bias",
                 "alternating_masks": "block.qkv.bias"}
    if name in fused_qkv and key.endswith(fused_qkv[name]):
        width = shape[0] // 3
        mask[width:2 * width] = True
    # A key bias shifts every score of a query's row alike: softmax ignores
    # it (test_torch_import.Attended's k/v projections, keys first).
    if name == "attended" and key in ("kv.bias", "mem.bias"):
        mask[:shape[0] // 2] = True
    return mask


def _tools_or_skip():
    try:
        return driver.find_tool("fsdp-opt"), driver.find_tool("fsdp-run")
    except driver.ToolNotFoundError as e:
        pytest.skip(str(e), allow_module_level=True)


_tools_or_skip()


# -- the models under test -----------------------------------------------------
# name: (example or fsdp_mlir.models Model, torch class, per-rank batch,
#        dataset maker, compile options)
def _mlp_data(rng):
    return {"input.0": rng.standard_normal((NUM_SAMPLES, 16), np.float32),
            "input.1": rng.standard_normal((NUM_SAMPLES, 4), np.float32)}


def _gpt_data(rng):
    # Any valid ids: tokens and independent random targets (< vocab 64).
    return {"input.0": rng.integers(0, 64, (NUM_SAMPLES, 16), np.int64),
            "input.1": rng.integers(0, 64, (NUM_SAMPLES, 16), np.int64)}


def _nested_data(rng):
    return {"input.0": rng.standard_normal((NUM_SAMPLES, 8), np.float32)}


MODELS = {
    "mlp": (EXAMPLES / "mlp.mlir", MLP, 8, _mlp_data,
            dict(auto_wrap_policy="always")),
    "gpt2": (EXAMPLES / "gpt2.mlir", GPT, 4, _gpt_data,
             dict(wrap_kinds=["Block"])),
    # Its units are marked in the IR (manual wrapping).
    "nested_wrapped": (EXAMPLES / "nested_wrapped.mlir", NestedWrapped, 4,
                       _nested_data, {}),
    # The same torch module; here every module (containers included) is a
    # unit (always_wrap_policy), marked by the builder.
    "always_wrap_nested_wrapped": (
        models.build("always_wrap_nested_wrapped"), NestedWrapped, 4,
        _nested_data, {}),
}

LR = {("mlp", "sgd"): 0.05, ("mlp", "adamw"): 1e-2,
      ("gpt2", "sgd"): 0.1, ("gpt2", "adamw"): 3e-3,
      ("nested_wrapped", "sgd"): 1e-3, ("nested_wrapped", "adamw"): 1e-2,
      ("always_wrap_nested_wrapped", "sgd"): 1e-3,
      ("always_wrap_nested_wrapped", "adamw"): 1e-2}


def _optimizer_options(model, optimizer):
    lr = LR[(model, optimizer)]
    if optimizer == "sgd":
        return dict(optimizer="sgd", lr=lr, momentum=0.9)
    # adamw: FSDPOps.td's defaults, betas (0.9, 0.999), eps 1e-8, wd 1e-2.
    return dict(optimizer="adamw", lr=lr)


def torch_optimizer(optimizer, params, lr):
    """torch's SGD (momentum 0.9) or AdamW with our pipeline's defaults."""
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, dampening=0.0,
                               weight_decay=0.0)
    return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.999), eps=1e-8,
                             weight_decay=0.01)


# -- fixtures ------------------------------------------------------------------
@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("torch_oracle")


@pytest.fixture(scope="module")
def datasets(workdir):
    rng = np.random.default_rng(1234)
    out = {}
    for name, (_, _, _, make, _) in MODELS.items():
        tensors = make(rng)
        path = workdir / f"{name}.safetensors"
        st_numpy.save_file(tensors, str(path))
        out[name] = (path, tensors)
    return out


@pytest.fixture(scope="module")
def data_supported(workdir, datasets):
    """Skip when this fsdp-run predates `--data FILE.safetensors`."""
    prog = driver.compile(MODELS["mlp"][0], workdir / "probe.mlir",
                          world_size=1, optimizer="sgd", lr=0.01)
    try:
        driver.run(prog, nproc=1, steps=1, data=datasets["mlp"][0],
                   timeout=120)
    except driver.RunError as e:
        if "needs a model whose inputs are token ids" in e.stderr:
            pytest.skip("fsdp-run does not read --data FILE.safetensors yet")
        raise


def seeded_initial_weights(model, save):
    """Our seeded initial weights of `model` (identical at every world
    size): fsdp-run's step-0 checkpoint of a 1-rank program, written to
    directory `save`, without optimizer state; and the checkpoint's path."""
    prog = driver.compile(model, Path(f"{save}.mlir"), world_size=1,
                          optimizer="sgd", lr=0.01)
    driver.run(prog, nproc=1, steps=0, seed=SEED, save=save, timeout=120)
    path = Path(save) / "step-0.safetensors"
    state = st_numpy.load_file(str(path))
    return {k: v for k, v in state.items() if not k.startswith("optim.")}, path


@pytest.fixture(scope="module")
def initial_weights(workdir):
    """Our seeded initial weights per model (world-size independent)."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name], _ = seeded_initial_weights(MODELS[name][0],
                                                    workdir / f"{name}.init")
        return cache[name]
    return get


def train_in_torch(model, optimizer, lr, init, tensors, global_batch):
    """Loads our initial weights into `model`, trains STEPS steps on rows
    (s*G + j) mod N of the dataset, and returns the losses and the final
    state (parameters + optimizer state under our checkpoint's names)."""
    torch.manual_seed(0)
    assert sorted(model.state_dict()) == sorted(init), "state_dict names differ"
    model.load_state_dict({k: torch.from_numpy(v.copy())
                           for k, v in init.items()})
    params = dict(model.named_parameters())
    opt = torch_optimizer(optimizer, list(params.values()), lr)
    inputs = [torch.from_numpy(tensors[f"input.{i}"])
              for i in range(len(tensors))]
    losses = []
    for step in range(STEPS):
        rows = torch.tensor([(step * global_batch + j) % NUM_SAMPLES
                             for j in range(global_batch)])
        opt.zero_grad()
        loss = model(*(t[rows] for t in inputs))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = {k: v.detach().numpy().copy() for k, v in params.items()}
    for k, p in params.items():
        state = opt.state[p]
        for key in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
            if key in state:
                final[f"optim.{key}.{k}"] = state[key].numpy().copy()
    return losses, final


def assert_losses_match(ours, ref, what="torch", abs_tol=0.0):
    assert len(ours) == len(ref) == STEPS
    for step, (a, b) in enumerate(zip(ours, ref)):
        assert math.isclose(a, b, rel_tol=LOSS_RTOL, abs_tol=abs_tol), \
            f"step {step}: loss {a!r} vs {what} {b!r}"


def assert_state_matches(ours, ref_state, adamw_lr=None, noise_mask=None,
                         steps=STEPS):
    """Every tensor within state_bound (WEIGHT_RTOL of its max plus
    WEIGHT_ATOL; AdamW state by its gradients' scale); under AdamW
    (adamw_lr) parameters get ADAMW_WEIGHT_ATOL_PER_LR * lr more, and the
    elements of noise_mask(key, shape) and a few outliers
    (ADAMW_OUTLIERS_PER_ELEMENT) only 2 * lr * steps (see above)."""
    for key, ref in ref_state.items():
        ref = ref.astype(np.float64)
        diff = np.abs(ours[key].astype(np.float64) - ref)
        atol = 0.0
        adamw_param = adamw_lr is not None and not key.startswith("optim.")
        if adamw_param:
            noise = noise_mask(key, ref.shape) if noise_mask else None
            if noise is not None and noise.any():
                assert diff[noise].max() <= 2 * adamw_lr * steps, key
                diff[noise] = 0.0
                ref = np.where(noise, 0.0, ref)
            atol = ADAMW_WEIGHT_ATOL_PER_LR * adamw_lr
        bound = state_bound(key, ref, ref_state, steps) + atol
        if adamw_param:
            outliers = diff > bound
            allowed = max(1, int(diff.size * ADAMW_OUTLIERS_PER_ELEMENT))
            if 0 < outliers.sum() <= allowed:
                assert diff[outliers].max() <= 2 * adamw_lr * steps, key
                diff = np.where(outliers, 0.0, diff)
        assert diff.max() <= bound, \
            f"{key}: max|diff| {diff.max():.3g} > bound {bound:.3g} " \
            f"(max|torch| {np.abs(ref).max():.3g})"


def worst_differences(ours_losses, ref_losses, ours, ref_state,
                      adamw_lr=None, noise_mask=None):
    """For the report: the worst relative and absolute loss differences;
    over tensors max|diff| / max|torch| for parameters and buffers (under
    AdamW outside noise_mask) and for optimizer state; max|diff| on the
    noise-only elements; and the largest fraction of the weight bound of
    assert_state_matches used (> 1 fails)."""
    out = dict(loss=0.0, loss_abs=0.0, weight=0.0, state=0.0, noise=0.0,
               bound=0.0)
    for a, b in zip(ours_losses, ref_losses):
        out["loss_abs"] = max(out["loss_abs"], abs(a - b))
        out["loss"] = max(out["loss"], abs(a - b) / (abs(b) or 1.0))
    for key, ref in ref_state.items():
        ref = ref.astype(np.float64)
        diff = np.abs(ours[key].astype(np.float64) - ref)
        atol = 0.0
        if not key.startswith("optim."):
            mask = noise_mask(key, ref.shape) if noise_mask else None
            if mask is not None and mask.any():
                out["noise"] = max(out["noise"], float(diff[mask].max()))
                if adamw_lr is not None:  # as assert_state_matches
                    diff, ref = diff[~mask], ref[~mask]
            if adamw_lr is not None:
                atol = ADAMW_WEIGHT_ATOL_PER_LR * adamw_lr
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        worst = float(diff.max()) if diff.size else 0.0
        which = "state" if key.startswith("optim.") else "weight"
        out[which] = max(out[which], worst / (scale or 1.0))
        out["bound"] = max(out["bound"],
                           worst / (state_bound(key, ref, ref_state) + atol))
    return out


def report_worst(tag, worst):
    print(f"\n{tag}: worst " +
          ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))


# -- the cases -----------------------------------------------------------------
# Default: every MLP configuration and a representative slice of the others
# (every rank count, strategy and optimizer at least once). FSDP_ORACLE_FULL=1:
# every model x ranks x strategy x optimizer.
DEFAULT_CASES = all_oracle_cases(("mlp",)) + [
    ("gpt2", 1, "full-shard", "adamw"),
    ("gpt2", 2, "full-shard", "adamw"),
    ("gpt2", 2, "shard-grad-op", "sgd"),
    ("gpt2", 4, "hybrid-shard", "sgd"),
    ("nested_wrapped", 1, "full-shard", "sgd"),
    ("nested_wrapped", 2, "full-shard", "adamw"),
    ("nested_wrapped", 2, "no-shard", "sgd"),
    ("nested_wrapped", 4, "hybrid-shard", "adamw"),
    ("always_wrap_nested_wrapped", 4, "full-shard", "adamw"),
]

CASES = oracle_cases(DEFAULT_CASES, *((name,) for name in MODELS))


@pytest.mark.parametrize("name,ranks,strategy,optimizer", CASES,
                         ids=lambda v: str(v))
def test_matches_torch(name, ranks, strategy, optimizer, workdir, datasets,
                       data_supported, initial_weights):
    example, _, batch, _, options = MODELS[name]
    data_path, tensors = datasets[name]
    tag = f"{name}-{ranks}-{strategy}-{optimizer}"
    prog = driver.compile(
        example, workdir / f"{tag}.mlir", world_size=ranks,
        sharding_strategy=strategy,
        shard_group_size=2 if strategy == "hybrid-shard" else None,
        **options, **_optimizer_options(name, optimizer))
    save = workdir / tag
    result = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED,
                        data=data_path, save=save, timeout=120)
    ours_losses = [row["loss"] for row in result.metrics]

    cls = MODELS[name][1]
    model = cls(ranks) if cls is NestedWrapped else cls()
    lr = LR[(name, optimizer)]
    ref_losses, ref_state = train_in_torch(
        model, optimizer, lr, initial_weights(name), tensors, batch * ranks)
    ours = st_numpy.load_file(str(save / f"step-{STEPS}.safetensors"))
    adamw_lr = lr if optimizer == "adamw" else None

    def noise_mask(key, shape):
        return _noise_only(name, key, shape)

    if sorted(ours) == sorted(ref_state):
        report_worst(tag, worst_differences(ours_losses, ref_losses, ours,
                                            ref_state, adamw_lr, noise_mask))
    assert_losses_match(ours_losses, ref_losses, abs_tol=LOSS_ATOL)
    assert sorted(ours) == sorted(ref_state), "checkpoint keys differ"
    assert_state_matches(ours, ref_state, adamw_lr=adamw_lr,
                         noise_mask=noise_mask)


# -- PyTorch FSDP2 (fully_shard) on CPU / gloo ----------------------------------
# The 2-rank full-shard MLP against torch.distributed.fsdp.fully_shard on 2
# gloo processes (each Linear a unit, then the root, as auto_wrap_policy
# "always"), same initial weights, data and AdamW: rank r trains rows
# (s*G + r + j*W) mod N, j < B (fsdp-run's DistributedSampler-style
# interleaving, runtime/runner/Data.cpp), and the reported loss is the mean
# over ranks.
# Measured (torch 2.15): losses 1.3e-7 relative, final parameters <= 1.2e-6
# of each tensor's max, so the plain bounds above apply (no AdamW allowance).
# About 15 s, nearly all of it the two spawned torch processes.
_FSDP2_WORKER = r'''
import sys
import torch

TESTS, INIT, DATA, OUT, PORT, WORLD, BATCH, STEPS, N, LR, FROZEN = sys.argv[1:]
WORLD, BATCH, STEPS, N, LR = int(WORLD), int(BATCH), int(STEPS), int(N), float(LR)
sys.path.insert(0, TESTS)
from torch_reference import (MLP, fed_batches, finish_fsdp2, join_gloo,
                             load_weights, train_steps)


def worker(rank):
    join_gloo(rank, WORLD, PORT)
    from torch.distributed.fsdp import fully_shard
    model = MLP()
    load_weights(model, INIT)
    for name, p in model.named_parameters():
        p.requires_grad_(name not in FROZEN.split(","))
    for m in (model.fc1, model.fc2, model.fc3):
        fully_shard(m)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.01)
    losses = train_steps(model, opt, STEPS,
                         fed_batches(DATA, rank, WORLD, BATCH, N))
    finish_fsdp2(OUT, model, losses)


if __name__ == "__main__":
    torch.multiprocessing.spawn(worker, nprocs=WORLD)
'''


@pytest.mark.parametrize("frozen", [(), ("fc1.weight", "fc3.bias")],
                         ids=["trainable", "frozen-subset"])
def test_mlp_matches_fsdp2(frozen, workdir, datasets, data_supported,
                           initial_weights):
    """With a frozen subset (a frozen weight beside its trainable bias, and
    the reverse), FSDP2 shards the frozen parameters with the others and
    reduces only the gradients that exist; ours keeps them in a unit's
    second, never-reduced flat parameter."""
    import json
    from torch_reference import free_port, run_workers

    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if not hasattr(fsdp, "fully_shard") or not \
            torch.distributed.is_gloo_available():
        pytest.skip("no torch.distributed.fsdp.fully_shard or gloo")
    ranks, lr = 2, LR[("mlp", "adamw")]
    example, _, batch, _, options = MODELS["mlp"]
    tag = "fsdp2-" + "-".join(frozen or ["none"])
    if frozen:
        example = models.build("mlp")
        assert example.freeze(frozen) == sorted(frozen)
    data_path, _ = datasets["mlp"]
    prog = driver.compile(example, workdir / f"{tag}-ours.mlir",
                          world_size=ranks, sharding_strategy="full-shard",
                          **options, **_optimizer_options("mlp", "adamw"))
    save = workdir / f"{tag}-ours"
    result = driver.run(prog, nproc=ranks, steps=STEPS, seed=SEED,
                        data=data_path, save=save, timeout=120)
    ours_losses = [row["loss"] for row in result.metrics]

    init_path = workdir / f"{tag}-init.safetensors"
    init = initial_weights("mlp")
    st_numpy.save_file(init, str(init_path))
    out = workdir / f"{tag}-torch"
    run_workers(workdir, "fsdp2_worker", _FSDP2_WORKER,
                [init_path, data_path, out, free_port(), ranks, batch, STEPS,
                 NUM_SAMPLES, repr(lr), ",".join(frozen)], timeout=120)
    ref_losses = json.loads((workdir / f"{tag}-torch.json").read_text())
    ref_state = st_numpy.load_file(str(workdir / f"{tag}-torch.safetensors"))

    assert_losses_match(ours_losses, ref_losses, what="FSDP2")
    ours = st_numpy.load_file(str(save / f"step-{STEPS}.safetensors"))
    assert_state_matches(ours, ref_state)  # the plain bounds
    for name in frozen:
        np.testing.assert_array_equal(ours[name], init[name], name)
