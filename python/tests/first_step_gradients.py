"""How exact our first gradients are, as torch's own f32 ones (the
architecture sweep's check for a model chaotic in f32, arch_sweep.py): one
SGD step at 1 rank from the same weights, each parameter's gradient (its
change over lr) against torch's float64 one."""
from __future__ import annotations

import contextlib
import copy
import math
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from fsdp_mlir import from_torch
from test_torch_import import OPTIMIZERS, PER_RANK, torch_losses, train_imported

# A first-step gradient's f32 noise, relative to its tensor's largest
# element (or to a thousandth of the model's largest, for a tensor whose
# gradient is itself noise): sums of O(100) f32 products in another order.
GRAD_RTOL = 1e-5
# How much further from float64 our f32 gradients may be than torch's own
# (the worst of its f32 runs, torch_f32_gradients): another summation
# order, GEMM blocks against torch's kernels.
GRAD_NOISE_FACTOR = 4
# Torch's f32 runs on inputs one ulp apart, beside its four kernel paths.
JITTERED_RUNS = 4
# The most ReLU inputs near zero the check takes the other way, one at a
# time (each costs a float64 step of the model).
MAX_FLIPS = 32


def as_f64(data):
    return [d.astype(np.float64) if d.dtype == np.float32 else d
            for d in data]


def float64_copy(module):
    """`module` in float64, its mixture-of-experts layers (transformers'
    grouped GEMM, which torch runs in f32 and bf16 only) on transformers'
    eager per-expert loop: the same sums. Tensors a forward left on a
    module as plain attributes (RecurrentGemma's recurrent_states), which
    deepcopy refuses while they are in an autograd graph, are copied
    detached."""
    left = {id(v): v.detach().clone() for m in module.modules()
            for v in vars(m).values()
            if isinstance(v, torch.Tensor) and not v.is_leaf}
    exact = copy.deepcopy(module, left).double()
    for m in exact.modules():
        config = getattr(m, "config", None)
        if getattr(config, "_experts_implementation", None) not in (None,
                                                                    "eager"):
            config._experts_implementation = "eager"
    return exact


def one_ulp_apart(data, rng):
    """`data` with every float element moved one f32 ulp up or down at
    random: inputs as exact as the given ones, for another draw of the f32
    rounding that follows."""
    def moved(d):
        # The direction in d's own dtype: a float64 one would step a
        # float64 ulp, which rounds back to d.
        toward = np.where(rng.random(d.shape) < 0.5, -np.inf, np.inf)
        return np.nextafter(d, toward.astype(d.dtype))
    return [moved(d) if d.dtype == np.float32 else d for d in data]


def torch_f32_gradients(module, data):
    """Torch's f32 weights after one SGD step from `module`'s, once per
    draw of its f32 rounding: each CPU convolution path (oneDNN's direct
    kernels, its default, and with oneDNN off im2col + GEMM, as ours) on 1
    thread and on 2 (another order of its batch norms' and GEMMs' sums),
    then JITTERED_RUNS runs on inputs one ulp apart."""
    threads, onednn_was = (torch.get_num_threads(),
                           torch.backends.mkldnn.enabled)
    rng = np.random.default_rng(11)
    draws = [(onednn, n, data) for onednn in (True, False) for n in (1, 2)]
    draws += [(True, threads, one_ulp_apart(data, rng))
              for _ in range(JITTERED_RUNS)]
    try:
        for onednn, n, inputs in draws:
            torch.backends.mkldnn.enabled = onednn
            torch.set_num_threads(n)
            trained = copy.deepcopy(module)
            torch_losses(trained, inputs, 1, "sgd", steps=1)
            yield {k: p.detach() for k, p in trained.named_parameters()}
    finally:
        torch.backends.mkldnn.enabled = onednn_was
        torch.set_num_threads(threads)


def f64_gradients(exact, data, start, relus=None):
    """Torch's float64 first-step gradients (its ReLUs' calls under
    `relus`, a ReluCalls, when given)."""
    exact = copy.deepcopy(exact)
    with relus or contextlib.nullcontext():
        torch_losses(exact, as_f64(data), 1, "sgd", steps=1)
    lr = OPTIMIZERS["sgd"]["lr"]
    return {k: (start[k] - p.detach()) / lr
            for k, p in exact.named_parameters()}


_RELUS = (F.relu, torch.relu, torch.relu_, torch.Tensor.relu,
          torch.Tensor.relu_)


class ReluCalls(TorchFunctionMode):
    """The ReLU calls of a forward (F.relu, torch.relu, relu_, in call
    order): each call's input recorded, or given elements of some calls'
    results flipped to the other side of the kink. A flipped element is
    relu(x) − sign(x)·x: x where x < 0, 0 where x > 0, and its gradient
    passes where the element was turned on and not where it was turned
    off, as if rounding had put x on the other side of zero."""

    def __init__(self, flips=None):
        super().__init__()
        self.inputs: list = []
        self.flips = flips or {}  # call index → flat element indices

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _RELUS:
            return func(*args, **kwargs)
        x, call = args[0], len(self.inputs)
        self.inputs.append(x.detach().clone())
        if call not in self.flips:
            return func(*args, **kwargs)
        sign = torch.zeros(x.numel(), dtype=x.dtype)
        where = self.flips[call]
        sign[where] = torch.sign(x.detach().reshape(-1)[where])
        flipped = torch.relu(x) - x * sign.reshape(x.shape)
        in_place = func in (torch.relu_, torch.Tensor.relu_) or (
            func is F.relu and (kwargs.get("inplace") or args[1:2] == (True,)))
        # (relu_ itself would save the result the subtraction overwrites.)
        return x.copy_(flipped) if in_place else flipped


def near_zero_relu_inputs(module, exact, data, limit=MAX_FLIPS):
    """The ReLU inputs an f32 run may put on either side of zero: exactly
    (float64) within GRAD_NOISE_FACTOR times torch's own f32 error on that
    call's inputs (its default run), at most `limit` of them, nearest
    first (relative to that error): {call index: flat indices}."""
    f32, f64 = ReluCalls(), ReluCalls()
    with f32:
        torch_losses(copy.deepcopy(module), data, 1, "sgd", steps=1)
    with f64:
        torch_losses(copy.deepcopy(exact), as_f64(data), 1, "sgd", steps=1)
    near = []
    for call, (a, b) in enumerate(zip(f32.inputs, f64.inputs)):
        noise = GRAD_NOISE_FACTOR * (a.double() - b).abs().max().item()
        closeness = b.reshape(-1).abs() / max(noise, 1e-300)
        for i in torch.nonzero(closeness < 1).reshape(-1).tolist():
            near.append((closeness[i].item(), call, i))
    flips: dict = {}
    for _, call, i in sorted(near)[:limit]:
        flips.setdefault(call, []).append(i)
    return {c: torch.tensor(i) for c, i in flips.items()}


def flipped_references(exact, data, start, near):
    """Torch's float64 first-step gradients with each near-zero ReLU input
    (near_zero_relu_inputs) in turn taken the other way: the references
    an f32 run that flipped that one is measured against."""
    for call, indices in near.items():
        for i in indices.tolist():
            yield f64_gradients(exact, data, start,
                                ReluCalls({call: torch.tensor([i])}))


def first_step_gradients(arch, name: str, workdir: Path | None = None):
    """(ratio, flipped): the worst, over parameters, of |ours − f64| /
    (GRAD_NOISE_FACTOR · |torch f32 − f64| + GRAD_RTOL · scale), torch's
    f32 error the worst of its runs (torch_f32_gradients): at most 1 when
    ours is about as exact as torch's f32 runs.

    One torch run is not a measure of its rounding: a deep model amplifies
    it far enough to flip a ReLU whose exact input is within it of zero,
    which moves every gradient upstream by that element's share. Torch's
    default run flipped none of those ours did in ResNeXt-50's last block
    (an input of -5.3e-5 where torch's f32 forward errs by 1e-4); its
    runs on inputs one ulp apart flip others. Where even those flip none
    that ours does (R(2+1)D's layer4: an input 8.9e-6 from zero), ours
    is measured against float64 with each ReLU input within f32 noise of
    zero taken the other way in turn (flipped_references), and `flipped`
    says one of those explains it: the ratio is then that reference's."""
    lr = OPTIMIZERS["sgd"]["lr"]
    torch.manual_seed(0)
    module = arch.factory()
    data = arch.data(np.random.default_rng(3))
    start = {k: p.detach().double().clone()
             for k, p in module.named_parameters()}
    exact = float64_copy(module)
    f64 = f64_gradients(exact, data, start)
    model = from_torch(module, [torch.from_numpy(d[:PER_RANK]) for d in data],
                       name=name)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        _, saved = train_imported(Path(tmp), module, model, data, 1, "sgd",
                                  wrap_kinds=arch.kinds, steps=1)

    # Read back through f32 parameters: their rounding adds about
    # |p|·6e-8 / lr to every gradient, ours and torch's alike.
    def grads(values):
        return {k: (start[k] - v.double()) / lr for k, v in values.items()}
    ours = grads({k: torch.from_numpy(saved[k]) for k in start})
    f32_error = {k: 0.0 for k in f64}
    for f32 in torch_f32_gradients(module, data):
        for k, g in grads(f32).items():
            f32_error[k] = max(f32_error[k], (g - f64[k]).abs().max().item())
    largest = max(g.abs().max().item() for g in f64.values())

    def worst(reference):
        ratio = 0.0
        for k, g in reference.items():
            miss = (ours[k] - g).abs().max().item()
            if not math.isfinite(miss):  # (max() would skip a NaN)
                return math.inf
            scale = max(g.abs().max().item(), 1e-3 * largest)
            bound = GRAD_NOISE_FACTOR * f32_error[k] + GRAD_RTOL * scale
            ratio = max(ratio, miss / bound if bound else
                        (0.0 if miss == 0 else math.inf))
        return ratio
    ratio = worst(f64)
    if ratio <= 1 or not math.isfinite(ratio):
        return ratio, False
    near = near_zero_relu_inputs(module, exact, data)
    flipped = min((worst(r) for r in flipped_references(exact, data, start,
                                                         near)),
                  default=math.inf)
    return (flipped, True) if flipped <= 1 else (ratio, False)
