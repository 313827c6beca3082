"""Custom torch.autograd.Functions in a model. torch.export traces their
forward only, so the importer differentiates that forward and never sees
the hand-written backward. Where the two agree (a backward written to
save memory), that is what torch computes; where they differ (a gradient
reversal layer, a straight-through estimator, YOSO's approximate
backward) the import would silently train another model. So the
Functions the export applies are recorded (`recording`), and `check`
compares, for each, the parameter gradients of the loss on the example
inputs under torch (its backward) with those when its apply runs its
forward's ops under autograd (the derivative of its forward, what the
import computes). A difference beyond f32 rounding is refused, naming the
Function and the line applying it.
"""
from __future__ import annotations

import traceback
from contextlib import contextmanager
from typing import List, Tuple

# Two correct formulas for one f32 gradient differ by rounding, ~1e-6 of
# its size; an altered backward (a sign, an estimator, an approximation)
# differs at the size of the gradient itself.
GRADIENT_RTOL = 1e-3


@contextmanager
def recording(calls: List[Tuple[type, str]]):
    """Within it, every apply of a torch.autograd.Function defined outside
    torch appends (its class, the applying source line)."""
    import torch
    function = torch.autograd.Function
    original = function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        if not cls.__module__.startswith("torch."):
            frame = traceback.extract_stack(limit=2)[0]
            calls.append((cls, f'File "{frame.filename}", line '
                               f"{frame.lineno}, in {frame.name}"))
        return original.__get__(None, cls)(*args, **kwargs)

    function.apply = classmethod(apply)
    try:
        yield
    finally:
        function.apply = original


class _Context:
    """What a forward's `ctx` offers, doing nothing: the forward's ops are
    differentiated by autograd instead."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_dirty(self, *args):
        pass

    def mark_non_differentiable(self, *args):
        pass

    def set_materialize_grads(self, value):
        pass


@contextmanager
def _forward_inlined(cls):
    """cls.apply runs cls.forward's ops under autograd (no backward of
    its own)."""
    import torch
    separate = cls.setup_context is not torch.autograd.Function.setup_context

    def apply(*args, **kwargs):
        if separate:  # forward(*args) with a separate setup_context
            return cls.forward(*args, **kwargs)
        return cls.forward(_Context(), *args, **kwargs)

    had = "apply" in cls.__dict__
    previous = cls.__dict__.get("apply")
    cls.apply = apply
    try:
        yield
    finally:
        if had:
            cls.apply = previous
        else:
            del cls.apply


def _gradients(module, inputs):
    """The gradients of the loss `module(*inputs)` for its trainable
    parameters, seeded alike (dropout draws the same masks); None when the
    first output is no scalar loss (from_torch refuses that itself)."""
    import torch
    params = [p for p in module.parameters() if p.requires_grad]
    torch.manual_seed(0)
    out = module(*inputs)
    loss = out[0] if isinstance(out, (tuple, list)) else out
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0 or \
            not loss.requires_grad:
        return None
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g
            for p, g in zip(params, grads)]


def check(module, example_inputs, calls) -> List[Tuple[str, str]]:
    """(qualified name, line) of each recorded Function whose backward is
    not its forward's derivative: the model's gradients with its forward
    inlined differ from torch's beyond GRADIENT_RTOL of the largest. The
    module's state (BatchNorm's running statistics) is left as it was."""
    first = {}
    for cls, line in calls:
        first.setdefault(cls, line)
    if not first:
        return []
    state = {k: v.clone() for k, v in module.state_dict().items()}
    refused = []
    try:
        torch_grads = _gradients(module, example_inputs)
        if torch_grads is None:
            return []
        scale = max((g.abs().max().item() for g in torch_grads), default=0.0)
        for cls, line in first.items():
            with _forward_inlined(cls):
                # None: the forward's ops pass no gradient at all.
                inlined = _gradients(module, example_inputs) or [
                    0 * g for g in torch_grads]
            if any((a - b).abs().max().item() > GRADIENT_RTOL * scale
                   for a, b in zip(torch_grads, inlined)):
                refused.append((f"{cls.__module__}.{cls.__qualname__}", line))
    finally:
        module.load_state_dict(state)
    return refused
