"""Custom torch.autograd.Functions in a model. torch.export traces their
forward only: differentiating it would silently train another model where
the hand-written backward is not its derivative (a gradient reversal
layer, a straight-through estimator, a clipped or approximate gradient).
So while the model is exported (`recording`), each apply of a Function
defined outside torch runs its forward with a recording `ctx` and passes
the float outputs through a marker op, `fsdp_mlir::custom_vjp(outputs,
inputs, saved, key)`, which the export keeps as one node. The importer
then exports the Function's `backward` on that ctx (`backward_program`)
and emits `nn.custom_vjp`: the forward's ops compute the outputs, the
backward's the inputs' gradients, as torch runs them.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, List, Tuple

_MARKER = None  # the marker op, registered on first use (torch imported lazily)


def marker():
    """torch.ops.fsdp_mlir.custom_vjp: the outputs, copied (a custom op
    returns no alias of its arguments), named by `key`."""
    global _MARKER
    if _MARKER is None:
        import torch

        @torch.library.custom_op(
            "fsdp_mlir::custom_vjp", mutates_args=(),
            schema="(Tensor[] outputs, Tensor[] inputs, Tensor[] saved, "
                   "int key) -> Tensor[]")
        def custom_vjp(outputs, inputs, saved, key):
            return [o.clone() for o in outputs]

        @custom_vjp.register_fake
        def _(outputs, inputs, saved, key):
            return [torch.empty_like(o) for o in outputs]
        _MARKER = torch.ops.fsdp_mlir.custom_vjp.default
    return _MARKER


class _Context:
    """What a forward's `ctx` offers, recording what the backward reads."""

    saved_tensors: tuple = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_dirty(self, *args):
        pass

    def mark_non_differentiable(self, *outputs):
        self.non_differentiable = [id(o) for o in outputs]

    def set_materialize_grads(self, value):
        pass

    @property
    def saved_variables(self):  # the deprecated name
        return self.saved_tensors


def _is_float_tensor(x) -> bool:
    import torch
    return isinstance(x, torch.Tensor) and x.is_floating_point()


@dataclass
class Call:
    """One apply of a Function during the export."""
    cls: type
    ctx: _Context
    args: tuple
    # The positions of `args` that are float tensors: torch's Function
    # gives a gradient to those only (not to tensors in a list argument).
    inputs: List[int]
    outputs: List[object]  # the forward's tensor outputs, marked or not
    marked: List[int]  # the positions in `outputs` of the float ones
    saved_attrs: List[str]  # ctx.x = tensor

    def saved(self) -> list:
        """The tensors the backward reads: those ctx.save_for_backward
        kept (not its Nones), then the tensor attributes of ctx."""
        return [t for t in self.ctx.saved_tensors if t is not None] + [
            getattr(self.ctx, k) for k in self.saved_attrs]

    @property
    def name(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__qualname__}"


def _separate_setup(cls) -> bool:
    """Whether cls's forward takes no ctx (a setup_context of its own)."""
    import torch
    return cls.setup_context is not torch.autograd.Function.setup_context


def _positional(cls, args, kwargs) -> tuple:
    """apply's arguments as forward's positional ones, keywords and
    defaults bound as torch binds them."""
    import inspect
    separate = _separate_setup(cls)
    bound = inspect.signature(cls.forward).bind(
        *(() if separate else (None,)), *args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.args[0 if separate else 1:])


def _run_forward(cls, ctx: _Context, args):
    if _separate_setup(cls):
        out = cls.forward(*args)
        cls.setup_context(ctx, args, out)
        return out
    return cls.forward(ctx, *args)


def _applied(calls: List[Call], cls, args):
    """cls.apply(*args) under the export: its forward's ops, its float
    outputs through the marker."""
    import torch
    ctx = _Context()
    out = _run_forward(cls, ctx, args)
    single = isinstance(out, torch.Tensor)
    outputs = [out] if single else list(out)
    marked = [i for i, o in enumerate(outputs) if _is_float_tensor(o)]
    call = Call(cls, ctx, args,
                [i for i, a in enumerate(args) if _is_float_tensor(a)],
                outputs, marked, [k for k, v in vars(ctx).items()
                                  if isinstance(v, torch.Tensor)])
    calls.append(call)
    if not marked:  # nothing to differentiate
        return out
    results = marker()([outputs[i] for i in marked],
                       [args[i] for i in call.inputs], call.saved(),
                       len(calls) - 1)
    stopped = getattr(ctx, "non_differentiable", [])
    for i, r in zip(marked, results):  # no gradient, as torch's
        outputs[i] = r.detach() if id(outputs[i]) in stopped else r
    return outputs[0] if single else type(out)(outputs)


@contextmanager
def recording(calls: List[Call]):
    """Within it, every apply of a torch.autograd.Function defined outside
    torch runs as `_applied` and appends its `Call`."""
    import torch
    function = torch.autograd.Function
    original = function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        if cls.__module__.startswith("torch."):
            return original.__get__(None, cls)(*args, **kwargs)
        return _applied(calls, cls, _positional(cls, args, kwargs))

    function.apply = classmethod(apply)
    try:
        yield
    finally:
        function.apply = original


def backward_program(call: Call) -> Tuple[object, List[int]]:
    """The Function's backward as an ExportedProgram taking the saved
    tensors then one cotangent per marked output, and
    the positions in `call.inputs` of the inputs it gives a gradient
    (those it returns None for get none)."""
    import torch
    saved = call.saved()
    examples = [torch.zeros(tuple(t.shape), dtype=t.dtype)
                for t in saved + [call.outputs[i] for i in call.marked]]
    kept = [t is not None for t in call.ctx.saved_tensors]
    needs = tuple(i in call.inputs for i in range(len(call.args)))
    given: List[int] = []

    class Backward(torch.nn.Module):
        def forward(self, *args):
            ctx = _Context()
            ctx.__dict__.update(call.ctx.__dict__)
            given_saved = iter(args[:sum(kept)])
            ctx.saved_tensors = tuple(next(given_saved) if k else None
                                      for k in kept)
            for k, v in zip(call.saved_attrs, args[sum(kept):len(saved)]):
                setattr(ctx, k, v)
            ctx.needs_input_grad = needs
            cotangents = list(args[len(saved):])
            grads = [None] * len(call.outputs)
            for i, c in zip(call.marked, cotangents):
                grads[i] = c
            result = call.cls.backward(ctx, *grads)
            if not isinstance(result, tuple):
                result = (result,)
            given[:] = [k for k, i in enumerate(call.inputs)
                        if i < len(result) and result[i] is not None]
            return tuple(result[call.inputs[k]] for k in given)

    return torch.export.export(Backward(), tuple(examples)), given


def is_marker(target: Callable) -> bool:
    return _MARKER is not None and target is _MARKER
