"""The importer core: torch.export + unflatten, then one fsdp.module per
submodule, written node by node through the op table (registry._OPS).

`from_torch(module, example_inputs)` exports the module (in its current
train/eval mode), unflattens the exported program into one graph per
submodule and writes each as an `fsdp.module` of the module's name whose
kind is its class name (so `wrap-kinds=Block` wraps as FSDP's
ModuleWrapPolicy({Block}) would), with an `fsdp.param` / `fsdp.buffer` per
parameter and persistent buffer (requires_grad kept) and a forward per
called module that calls its children with `fsdp.call`. The module's
forward must return the scalar loss. `example_inputs` are one rank's
micro-batch: their shapes are the program's.

Constants are folded at import time. A node whose tensor inputs are all
known (arange and other factories, literals, lifted constants,
non-persistent buffers — with the original module's values —, and results
of such nodes) is evaluated by calling its ATen op on those tensors; the
result stays a torch tensor and becomes IR (`arith.constant`, f32/i64/i32
only) only where a runtime op reads it, in the smallest shape that
broadcasts to the same result. A submodule called with constant arguments
(Hugging Face's attention masks, rotary cos/sin, position ids) gets them
bound in its forward instead of as arguments; one whose outputs are all
constants (a rotary embedding) or its own inputs (a dropout with p = 0, the
residual an RMSNorm hands back) is not called at all. Boolean constants
never reach IR: an SDPA mask equal to the causal lower-triangular one
becomes `nn.attention {causal}`, an all-true one no mask; run-time bool
tensors are f32 masks of 1 and 0.

Ops on run-time values go through the op table (registry.supported_ops()).
Ops the table does not handle but PyTorch decomposes into ops it does are
decomposed first (_decompose_unhandled). Anything else — an op on run-time
values the table does not handle, a keyword it does not handle — is
collected over the whole model and reported once, each with its module
path and the user's source line (UnsupportedModelError); torch.export's
own refusals (data-dependent control flow, dynamic shapes) are reported as
such.

Tied parameters. `fsdp.get_param` reads a parameter of the module's own
subtree only, and a tied parameter is declared once, where
named_parameters() first names it (GPT-2's `transformer.wte.weight`, read
also by `lm_head`). A module whose graph reads a parameter (or persistent
buffer) declared outside its subtree gets it as an extra forward argument,
named by its qualified name (`%m.transformer.wte.weight`), after its
ordinary ones; so does every module on the call chain down to it, up to
the first caller whose subtree declares it, which reads it with
`fsdp.get_param` and passes it down (a module reading its parent's
parameter, as BERT's decoder reads cls.predictions.bias, is the same
case). The module tree, names and kinds stay torch's, and the parameter
belongs, as for any tie, to the lowest unit enclosing its readers.

A submodule called on inputs of other shapes or dtypes (a shared encoder
run on queries and on longer documents) gets one forward for each: the
export's calls are unflattened apart where their inputs differ
(_unflatten), and each `fsdp.call` runs the forward taking its types. Where
a second forward would take the types of the first (a child whose inputs
are constants bound in it, BERT's position ids of another length), its
constant tensors are passed as arguments instead.

A submodule called again with other constant tensors (a block given a
different constant scale) gets a second forward taking them as arguments.

Limits: a submodule's calls must bind the same non-tensor constants
(numbers, flags), and calls on the same argument types must trace alike.
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..ir import Forward, Init, Model, Module, TensorType, Value
from .ignored import ignored_roots, mark_ignored
from .wrap_policy import (hf_gradient_checkpointing, mark_checkpointed,
                          mark_units)
from . import autograd_functions
from .assertions import checked_id_bound
from .common import (_FLOATS, UnsupportedModelError, _frames, _is_tensor,
                     _source_line, _Spectrum, _tensor_type, _Unsupported,
                     source_location)
from .patterns import rewrite_drop_paths
from .registry import _OPS

# The element types an arith.constant may have (Forward.constant).
_CONST_DTYPES = {"float32": "f32", "int64": "i64", "int32": "i32"}


def _argument_type(fake) -> TensorType:
    """A forward's argument: a bool tensor (a mask passed to a submodule)
    is an f32 mask of 1 and 0, as every run-time mask here."""
    import torch
    if fake.dtype == torch.bool:
        return TensorType(tuple(int(d) for d in fake.shape), "f32")
    return _tensor_type(fake)


def _default_init(owner, param_name: str, value) -> Init:
    """What a run starts a parameter from when it does not --load the
    weights file: ones or zeros where the module holds that constant (a
    norm's weight and bias as constructed, LlamaRMSNorm's and Gemma's
    alike), PyTorch's reset_parameters() for Linear and Embedding, zeros
    otherwise."""
    constant = _constant_init(value)
    if constant is not None:
        return constant
    kind = type(owner).__name__
    if kind == "Linear":
        if param_name == "weight":
            return Init.kaiming_uniform(math.sqrt(5))
        bound = 1 / math.sqrt(owner.in_features)
        return Init.uniform(-bound, bound)
    if kind == "Embedding":
        return Init.normal(0.0, 1.0)
    return Init.zeros


def _constant_init(value) -> Optional[Init]:
    """Init.ones / Init.zeros for a tensor that holds only that value."""
    import torch
    if value.numel() == 0 or value.is_complex():
        return None
    flat = value.detach().flatten()
    if not torch.all(flat == flat[0]):
        return None
    return {1: Init.ones, 0: Init.zeros}.get(float(flat[0]))


def _default_buffer_init(value) -> Init:
    """A buffer as the module holds it where that is ones or zeros (a batch
    norm's running variance and mean as constructed), else zeros."""
    return _constant_init(value) or Init.zeros


@dataclass
class _Issue:
    module: str
    what: str
    source: str

    def __str__(self) -> str:
        where = f"module '{self.module or '(root)'}'"
        return f"  {where}: {self.what}" + (f"\n    at {self.source}"
                                            if self.source else "")


def _call_site(node, callee) -> str:
    """Where the call_module `node`, which torch.export leaves without a
    stack trace, calls the graph `callee`: the frame of an op of the
    callee at the depth of the caller's own code (the fewest frames of an
    op in the caller's graph). Only ops: a placeholder carries its
    producer's trace, and a callee's callee may be shared with another
    call."""
    def op_frames(graph):
        return [f for n in graph.nodes if n.op == "call_function"
                for f in [_frames(n)] if f]
    depth = min(map(len, op_frames(node.graph)), default=0)
    return next((f[depth - 1] for f in op_frames(callee)
                 if depth and len(f) > depth), "")


class _Poisoned(Exception):
    """An input of the node could not be translated."""


_POISON = object()


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _module_path(called: str) -> str:
    """The module a call of torch.export.unflatten's graph `called` runs:
    its `name@N` parts (the N-th call traced apart) without the `@N`."""
    return re.sub(r"@\d+(?=\.|$)", "", called)


def _within(path: str, ancestor: str) -> bool:
    """Whether module `path` is `ancestor` or in its subtree."""
    return (ancestor == "" or path == ancestor
            or path.startswith(ancestor + "."))


def _has_runtime(x) -> bool:
    if isinstance(x, (Value, _Spectrum)):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_runtime(y) for y in x)
    if isinstance(x, dict):
        return any(_has_runtime(y) for y in x.values())
    return False


def _bound(args: List[object], constants_as_args: bool) -> Dict[int, object]:
    """The call arguments a module's forward binds (by position): the
    constants, or with `constants_as_args` those other than tensors."""
    return {i: a for i, a in enumerate(args)
            if a is not _POISON and not isinstance(a, Value)
            and not (constants_as_args and _is_tensor(a))}


def _binds_alike(spec: "_CallSpec", args: List[object]) -> bool:
    """Whether a call with `args` fits the forward `spec` made: the same
    arguments computed (or passed) and the same constants bound."""
    bound = _bound(args, spec.constants_as_args)
    return [i for i in range(len(args)) if i not in bound] == spec.runtime \
        and all(_same_constant(spec.bound[i], bound[i]) for i in bound)


def _same_constant(a, b) -> bool:
    import torch
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and a.dtype == b.dtype and a.shape == b.shape
                and bool(torch.equal(a, b)))
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))
                and len(a) == len(b)
                and all(_same_constant(x, y) for x, y in zip(a, b)))
    return type(a) is type(b) and a == b


# Ops never evaluated at import time even on constant inputs: random ones.
_RANDOM = ("rand", "bernoulli", "normal", "uniform", "multinomial",
           "dropout", "native_dropout", "exponential", "geometric",
           "cauchy", "log_normal", "randperm")
# Ops whose tensor argument gives only a dtype/shape: a run-time value there
# does not stop folding.
_LIKE = {"new_ones.default", "new_zeros.default", "new_full.default",
         "new_empty.default", "zeros_like.default", "ones_like.default",
         "full_like.default", "empty_like.default"}
# Ops with no effect on the values (_assert_async: Translator.assertion).
_NOOPS = {"_assert_tensor_metadata.default"}


@dataclass
class _CallSpec:
    """How a submodule was translated for its call sites: which of its
    inputs are constants (bound in its forward) and where its outputs come
    from: ("result", k) its forward's k-th result, ("arg", i) the call's i-th
    argument, ("const", value) a constant."""
    bound: Dict[int, object]
    runtime: List[int]
    extras: List[str]
    outputs: object = None
    failed: bool = False
    poisoned: Tuple[int, ...] = ()  # inputs an unsupported op computes
    # The module's forward for these calls; None where it is not called
    # (its outputs are constants or its own inputs).
    forward: Optional[Forward] = None
    # Its forward would take the argument types of another of its forwards.
    collided: bool = False
    constants_as_args: bool = False  # its constant tensors passed, not bound


class _Translator:
    """One submodule's graph into its forward; `bound` gives the constants
    of its inputs (by placeholder position), `extras` the qualified names of
    the tied parameters it receives as extra arguments."""

    def __init__(self, importer: "_Importer", fqn: str, graph,
                 spec: _CallSpec, called: Optional[str] = None):
        self.imp, self.fqn, self.graph, self.spec = importer, fqn, graph, spec
        self.called = called or fqn  # the graph's name (see _module_path)
        self.ir = importer.modules[fqn]
        self.values: Dict[object, object] = {}
        self.extra_values: Dict[str, Value] = {}
        self.consts: Dict[Tuple[str, bytes], Value] = {}
        # SSA name → ("transpose", input, permutation) | ("reshape", input)
        self.views: Dict[str, tuple] = {}
        self.f: Optional[Forward] = None

    # -- driving ---------------------------------------------------------
    def run(self) -> None:
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        args: List[Tuple[str, TensorType]] = []
        runtime_nodes = []
        for i, node in enumerate(placeholders):
            if i in self.spec.bound:
                self.values[node] = self.spec.bound[i]
                continue
            if i in self.spec.poisoned:
                # Computed by an unsupported op: the module is not called,
                # its body is translated for its own issues only.
                self.values[node] = _POISON
                self.spec.failed = True
                continue
            try:
                args.append((node.name, _argument_type(node.meta["val"])))
            except UnsupportedModelError as e:
                self.imp.issue(self.fqn, f"input '{node.name}': {e}", node)
                self.spec.failed = True
                return
            runtime_nodes.append(node)
        for name in self.spec.extras:
            args.append((name, self.imp.state_type(name)))
        if self.ir.forward_taking([t for _, t in args]) is not None:
            self.spec.collided = self.spec.failed = True  # (the caller says)
            return
        self.f = self.spec.forward = self.ir.add_forward(args)
        for node, arg in zip(runtime_nodes, self.f.args):
            self.values[node] = arg
        for name, arg in zip(self.spec.extras,
                             self.f.args[len(runtime_nodes):]):
            self.extra_values[name] = arg
        self.runtime_args = {id(a): i for i, a in zip(
            [i for i in range(len(placeholders)) if i not in self.spec.bound],
            self.f.args)}
        for node in self.graph.nodes:
            if node.op == "placeholder":
                continue
            try:
                self.visit(node)
            except _Unsupported as e:
                self.imp.issue(self.fqn, str(e), node)
                self.values[node] = _POISON
            except _Poisoned:
                # Depends on an unsupported node: reported there.
                self.values[node] = _POISON
            except ValueError as e:  # an ir builder's shape check
                what = getattr(node.target, "__name__", str(node.target))
                self.imp.issue(self.fqn, f"{what}: {e}", node)
                self.values[node] = _POISON

    def arg(self, a):
        if hasattr(a, "op") and hasattr(a, "graph"):  # an fx Node
            value = self.values[a]
            if value is _POISON:
                raise _Poisoned()
            return value
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        if isinstance(a, dict):
            return {k: self.arg(v) for k, v in a.items()}
        return a

    def visit(self, node) -> None:
        if node.op == "get_attr":
            self.values[node] = self.read_state(node.target)
        elif node.op == "call_module":
            self.values[node] = self.call_module(node)
        elif node.op == "call_function":
            self.f.source = source_location(node)
            self.values[node] = self.call_function(node)
        elif node.op == "output":
            self.finish(node)
        else:
            raise _Unsupported(f"fx node kind '{node.op}'")

    def finish(self, node) -> None:
        outs = node.args[0]
        single = not isinstance(outs, (list, tuple))
        outs = [outs] if single else list(outs)
        values = [self.arg(o) for o in outs]
        template, results = [], []
        for v in values:
            if isinstance(v, Value) and id(v) in self.runtime_args:
                template.append(("arg", self.runtime_args[id(v)]))
            elif isinstance(v, Value):
                template.append(("result", len(results)))
                results.append(v)
            elif _has_runtime(v):
                raise _Unsupported("a module output nesting computed values")
            else:
                template.append(("const", v))
        self.spec.outputs = template[0] if single else template
        if self.fqn == "":
            self.f.ret(*results)
            return
        if results:
            self.f.ret(*results)
        else:  # nothing computed at run time: the module is not called
            self.ir.drop_forward(self.f)
            self.spec.forward = None

    # -- regions: `with torch.no_grad()` / `torch.autocast` in a forward --
    def inline_region(self, subgraph, operands) -> tuple:
        """The results of a higher-order op's subgraph on `operands`, its
        nodes translated here as if written in place."""
        operands = iter(operands)
        for node in subgraph.graph.nodes:
            if node.op == "placeholder":
                self.values[node] = next(operands)
            elif node.op == "get_attr":  # the subgraph's own: a nested one
                held = subgraph
                for part in node.target.split("."):
                    held = getattr(held, part)
                self.values[node] = (held.detach() if _is_tensor(held)
                                     else held)
            elif node.op == "output":
                return tuple(self.arg(list(node.args[0])))
            else:
                self.visit(node)
        raise _Unsupported("a region's subgraph without an output")

    def no_grad_region(self, enabled, subgraph, *operands) -> tuple:
        """torch.set_grad_enabled(enabled) around a block: its float
        results carry no gradient back when disabled (as .detach())."""
        results = self.inline_region(subgraph, operands)
        if enabled:
            return results
        return tuple(self.f.stop_gradient(r) if isinstance(r, Value)
                     and r.type.dtype in _FLOATS else r
                     for r in results)

    def autocast_region(self, device_type, dtype, enabled, cache_enabled,
                        subgraph, *operands) -> tuple:
        """torch.autocast(enabled=False) around a block (attention kept in
        f32, EfficientViT's): the block as written. An enabled one would
        compute in `dtype` where torch's autocast lists say; the compiler's
        mixed-precision options do that for the whole model instead."""
        if enabled:
            raise _Unsupported(f"torch.autocast({device_type!r}, {dtype}) "
                               "enabled inside the model; compile with a "
                               "mixed-precision policy instead")
        return self.inline_region(subgraph, operands)

    def custom_vjp(self, outputs, inputs, saved, key: int) -> list:
        """A torch.autograd.Function's outputs, differentiated by its own
        backward (autograd_functions.py): nn.custom_vjp, whose region is
        that backward translated as the forward's ops are."""
        call = self.imp.functions[key]
        try:
            exported, given = autograd_functions.backward_program(call)
            backward = self.imp.torch.export.unflatten(
                _decompose_unhandled(exported))
        except Exception as e:  # torch.export's refusal, said as such
            said = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise _Unsupported(f"torch.autograd.Function {call.name}: "
                               f"torch.export cannot trace its backward: "
                               f"{said}") from None
        outputs, inputs, saved = ([self.v(x) for x in group]
                                  for group in (outputs, inputs, saved))
        region = self.f.region([v.type for v in saved + outputs])
        outer = (self.f, self.consts, self.views)
        self.f, self.consts, self.views = region, {}, {}  # isolated
        try:
            grads = [self.v(g) for g in
                     self.inline_region(backward, region.args)]
        finally:
            self.f, self.consts, self.views = outer
        for k, g in zip(given, grads):
            if g.type.shape != inputs[k].type.shape:
                raise _Unsupported(
                    f"torch.autograd.Function {call.name}: its backward "
                    f"gives input {call.inputs[k]} a gradient of shape "
                    f"{list(g.type.shape)} for {list(inputs[k].type.shape)}")
        return self.f.custom_vjp(outputs, [inputs[k] for k in given], saved,
                                 region, grads)

    # -- state, constants ------------------------------------------------
    def read_state(self, target: str):
        kind, what = self.imp.resolve_attr(self.fqn, target)
        if kind == "const":
            return what
        owner_path, _, leaf = what.rpartition(".")
        if not _within(owner_path, self.fqn):
            return self.extra_values[what]
        owner = self.imp.modules[owner_path]
        if leaf in owner.params:
            return self.f.get_param(owner.params[leaf])
        return self.f.get_buffer(owner.buffers[leaf])

    def buffer_of(self, node):
        """The fsdp.buffer of this module's subtree that fx node `node`
        reads (a get_attr of a persistent buffer), or None: where an op
        updates a buffer in place (BatchNorm's statistics), the import
        stores the new value there."""
        if getattr(node, "op", None) != "get_attr":
            return None
        kind, what = self.imp.resolve_attr(self.fqn, node.target)
        if kind != "state":
            return None
        owner_path, _, leaf = what.rpartition(".")
        if not _within(owner_path, self.fqn):
            return None
        return self.imp.modules[owner_path].buffers.get(leaf)

    def state_value(self, name: str) -> Value:
        """A tied parameter a callee receives: read here or received."""
        if name in self.extra_values:
            return self.extra_values[name]
        owner_path, _, leaf = name.rpartition(".")
        owner = self.imp.modules[owner_path]
        if leaf in owner.params:
            return self.f.get_param(owner.params[leaf])
        return self.f.get_buffer(owner.buffers[leaf])

    def v(self, x, dtype=None) -> Value:
        """`x` as an IR value: constants are materialised (in `dtype`, a
        torch dtype, when given)."""
        if isinstance(x, Value):
            return x
        return self.constant(x, dtype)

    def constant(self, c, dtype=None) -> Value:
        import torch
        if not isinstance(c, torch.Tensor):
            if not isinstance(c, (int, float)):
                raise _Unsupported(f"a constant {type(c).__name__} where a "
                                   "tensor is computed at run time")
            c = torch.tensor(c, dtype=dtype or (
                torch.int64 if isinstance(c, int) else torch.float32))
        if dtype is not None:
            c = c.to(dtype)
        name = str(c.dtype).replace("torch.", "")
        if name not in _CONST_DTYPES:
            raise _Unsupported(
                f"a constant {name} tensor of shape {list(c.shape)} reaches a "
                "run-time op (constants are f32, i64 or i32)")
        if any(d == 0 for d in c.shape):
            raise _Unsupported(f"an empty constant of shape {list(c.shape)}")
        t = TensorType(tuple(int(d) for d in c.shape), _CONST_DTYPES[name])
        data = c.detach().contiguous().cpu().numpy().tobytes()
        key = (str(t), data)
        if key not in self.consts:
            self.consts[key] = self.f.constant(t, data)
        return self.consts[key]

    # -- data movement ---------------------------------------------------
    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        """x.permute(perm); a permute of a permute is one permute of the
        first's input (none when they cancel, as the [B, H, T, D] ↔
        [B, T, H, D] transposes around nn.attention do)."""
        perm = [p % x.type.rank for p in perm]
        if perm == list(range(x.type.rank)):
            return x
        origin = self.views.get(x.name)
        if origin is not None and origin[0] == "transpose":
            return self.transpose(origin[1], [origin[2][p] for p in perm])
        y = self.f.transpose(x, perm)
        self.views[y.name] = ("transpose", x, perm)
        return y

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        """x.reshape(shape); a reshape of a reshape reshapes the first's
        input. (The ops this leaves unused are dropped when the train step
        is built.)"""
        if tuple(shape) == x.type.shape:
            return x
        origin = self.views.get(x.name)
        if origin is not None and origin[0] == "reshape":
            return self.reshape(origin[1], shape)
        y = self.f.reshape(x, list(shape))
        self.views[y.name] = ("reshape", x)
        return y

    # -- calls -----------------------------------------------------------
    def call_module(self, node):
        if node.kwargs:
            raise _Unsupported(f"submodule '{node.target}' called with "
                               "keyword arguments")
        called = _join(self.called, node.target)
        fqn = _module_path(called)
        args, poisoned = [], False
        for a in node.args:
            try:
                args.append(self.arg(a))
            except _Poisoned:
                args.append(_POISON)
                poisoned = True
        if not poisoned and any(not isinstance(a, Value) and _has_runtime(a)
                                for a in args):
            # A tuple holding computed values (what a no_grad block
            # returns, unflatten passes to a module called last in it):
            # its graph unpacks the tuple, translated in place.
            return self.inline(fqn, called, args)
        callee = self.imp.modules[fqn]
        if (not poisoned and _stateless(callee)
                and self.imp.translated_apart(fqn, called)):
            return self.inline(fqn, called, args)  # traced apart, stateless
        spec = self.imp.call(fqn, args, node, called)
        if poisoned or spec.failed or spec.outputs is None:
            raise _Poisoned()  # their own issues say why
        results = []
        if spec.forward is not None:
            if spec.forward.results is None:
                raise _Poisoned()
            ins = [self.argument(args[i]) for i in spec.runtime] + [
                self.state_value(n) for n in spec.extras]
            if [a.type for a in ins] != [a.type for a in spec.forward.args] \
                    and _stateless(callee):
                return self.inline(fqn, called, args)
            results = self.f.call_results(callee, *ins)

        def output(entry):
            if entry[0] == "result":
                return results[entry[1]]
            if entry[0] == "arg":
                return args[entry[1]]
            return entry[1]
        if isinstance(spec.outputs, tuple):
            return output(spec.outputs)
        return [output(e) for e in spec.outputs]

    def argument(self, a) -> Value:
        """A call's argument as a value: a constant tensor passed to a
        module (constants_as_args) materialised, a bool one as the f32 mask
        of 1 and 0 a forward takes for it."""
        if isinstance(a, Value):
            return a
        return self.constant(a.float() if a.dtype == self.imp.torch.bool
                             else a)

    def inline(self, fqn: str, called: str, args: List[object]):
        """A stateless submodule called again on other shapes (ResNet's one
        ReLU after each convolution of a bottleneck): its graph translated
        here, into this forward, instead of a call of its one forward."""
        sub = _Translator(self.imp, fqn, self.imp.graphs[called],
                          _CallSpec({}, [], []), called)
        sub.f, sub.consts, sub.views = self.f, self.consts, self.views
        placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
        for node, value in zip(placeholders, args):
            sub.values[node] = value
        for node in sub.graph.nodes:
            if node.op == "output":
                return sub.arg(node.args[0])
            if node.op != "placeholder":
                sub.visit(node)
        raise _Unsupported(f"submodule '{fqn}' has no output")

    def assertion(self, node) -> None:
        """An assertion that class labels lie below C (F.one_hot's) as an
        nn.id_range on them, read by what follows; others are dropped."""
        bound = checked_id_bound(node)
        labels = self.values.get(bound[0]) if bound else None
        if isinstance(labels, Value) and labels.type.dtype not in _FLOATS:
            self.values[bound[0]] = self.f.id_range(labels, bound[1])

    def call_function(self, node):
        if node.target is operator.getitem:
            seq, index = node.args
            return self.arg(seq)[index]
        if autograd_functions.is_marker(node.target):
            return self.custom_vjp(*self.arg(list(node.args)))
        region = _REGIONS.get(getattr(node.target, "_name", None))
        if region is not None:
            return region(self, *self.arg(list(node.args)))
        name = getattr(node.target, "__name__", str(node.target))
        if name.startswith("_assert_async"):
            return self.assertion(node)
        if name in _NOOPS:
            return None
        name = _functional_of_inplace(node, name)
        try:
            args = self.arg(list(node.args))
            kwargs = self.arg(dict(node.kwargs))
        except _Poisoned:
            if name not in _OPS:  # reported even after an unsupported input
                raise _Unsupported(f"unsupported op {name}") from None
            raise
        if name in _LIKE and isinstance(args[0], Value):
            import torch
            fake = node.args[0].meta["val"]
            args[0] = torch.zeros(tuple(fake.shape), dtype=fake.dtype)
        if not _has_runtime(args) and not _has_runtime(kwargs) and \
                not name.startswith(_RANDOM):
            try:
                return node.target(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - said as an issue
                raise _Unsupported(f"cannot evaluate {name} on its constant "
                                   f"inputs: {type(e).__name__}: {e}")
        handler = _OPS.get(name)
        if handler is None:
            raise _Unsupported(f"unsupported op {name}")
        try:
            return handler(self, node, node.meta.get("val"), *args, **kwargs)
        except TypeError as e:  # an argument the table does not know
            raise _Unsupported(f"{name} with arguments the importer does "
                               f"not handle ({e})") from None


# The higher-order ops torch.export wraps a forward's context managers in.
_REGIONS = {"wrap_with_set_grad_enabled": _Translator.no_grad_region,
            "wrap_with_autocast": _Translator.autocast_region}


# In-place element-wise ops on activations (torchvision's
# ReLU(inplace=True), `out += identity`) run as their functional forms:
# torch.export's trace reads a tensor mutated in place through the in-place
# node from then on, so its result is the new value. Refused where the
# mutation would reach another tensor: a view (its base changes too) or a
# tensor some view was taken of. An in-place op on module state (a buffer's
# counter) keeps its own handler.
_INPLACE = {"relu_.default": "relu.default", "add_.Tensor": "add.Tensor",
            "sub_.Tensor": "sub.Tensor", "mul_.Tensor": "mul.Tensor",
            "div_.Tensor": "div.Tensor", "silu_.default": "silu.default",
            "sigmoid_.default": "sigmoid.default",
            "tanh_.default": "tanh.default", "clamp_.default": "clamp.default",
            "hardtanh_.default": "hardtanh.default",
            "hardswish_.default": "hardswish.default",
            "hardsigmoid_.default": "hardsigmoid.default",
            "dropout_.default": "dropout.default",
            "copy_.default": "copy.default",
            "scatter_add_.default": "scatter_add.default"}


def _stateless(module: Module) -> bool:
    return not any(m.params or m.buffers for m in module.modules())


def _is_view(node) -> bool:
    schema = getattr(getattr(node, "target", None), "_schema", None)
    return (schema is not None and not schema.is_mutable
            and any(r.alias_info is not None for r in schema.returns))


def _functional_of_inplace(node, name: str) -> str:
    """The op table's name for `node`: an in-place op's functional form
    where _INPLACE allows it, else `name` itself."""
    functional = _INPLACE.get(name)
    target = node.args[0] if node.args else None
    if functional is None or getattr(target, "op", None) == "get_attr":
        return name
    if _is_view(target) or any(_is_view(u) for u in target.users):
        raise _Unsupported(f"{name} on a tensor that shares its storage with "
                           "a view (the mutation would reach the other)")
    return functional


class _Importer:
    def __init__(self, module, exported, unflat,
                 functions: List[autograd_functions.Call]):
        import torch
        self.torch = torch
        self.module = module
        self.functions = functions  # the autograd.Functions applied, by key
        self.originals = dict(module.named_modules(remove_duplicate=False))
        # Every name a call may use: a graph torch.export shares between
        # calls (the same shapes) is listed under each.
        self.unflat = dict(unflat.named_modules(remove_duplicate=False))
        self.graphs = {fqn: m.graph for fqn, m in self.unflat.items()
                       if hasattr(m, "graph")}
        for graph in {id(g): g for g in self.graphs.values()}.values():
            rewrite_drop_paths(graph)
        self.issues: List[_Issue] = []
        self.modules: Dict[str, Module] = {}
        # (module, graph's name, constants_as_args) → how its calls of that
        # graph translate.
        self.specs: Dict[Tuple[str, str, bool], _CallSpec] = {}
        self.state_names: Dict[int, str] = {}
        self.non_persistent = set()
        for name, p in module.named_parameters():
            self.state_names.setdefault(id(p), name)
        for name, b in module.named_buffers():
            owner, _, leaf = name.rpartition(".")
            if id(b) not in self.state_names and \
                    leaf in self.originals[owner]._non_persistent_buffers_set:
                self.non_persistent.add(name)
            self.state_names.setdefault(id(b), name)
        self.build_tree()
        self.needs_memo: Dict[str, List[str]] = {}

    def issue(self, fqn: str, what: str, node, callee=None) -> None:
        """Records a refusal at `node`'s source line, or for a call of the
        graph `callee` without a trace of its own, at its call site."""
        source = _source_line(node)
        if not source and callee is not None:
            source = _call_site(node, callee)
        self.issues.append(_Issue(fqn, what, source))

    def build_tree(self) -> None:
        root = Module("root", type(self.module).__name__)
        self.modules[""] = root
        declared = set()
        for fqn, mod in self.originals.items():
            if fqn:
                parent, _, leaf = fqn.rpartition(".")
                self.modules[fqn] = self.modules[parent].add(
                    Module(leaf, type(mod).__name__))
            ir = self.modules[fqn]
            for name, p in mod.named_parameters(recurse=False):
                if id(p) in declared:
                    continue  # tied: declared where named_parameters() names it
                declared.add(id(p))
                ir.param(name, _tensor_type(p), _default_init(mod, name, p),
                         requires_grad=p.requires_grad)
            for name, b in mod.named_buffers(recurse=False):
                if name in mod._non_persistent_buffers_set or id(b) in declared:
                    continue
                declared.add(id(b))
                ir.buffer(name, _tensor_type(b), _default_buffer_init(b))

    def resolve_attr(self, fqn: str, target: str):
        """A get_attr of module `fqn`: ("state", qualified name of the
        parameter or persistent buffer) or ("const", its tensor)."""
        owner_path, _, leaf = _join(fqn, target).rpartition(".")
        original = self.originals.get(owner_path)
        obj = getattr(original, leaf, None) if original is not None else None
        if not _is_tensor(obj):  # a constant torch.export lifted
            obj = getattr(self.unflat[owner_path], leaf)
        if not _is_tensor(obj):  # a higher-order op's subgraph
            return "const", obj
        canonical = self.state_names.get(id(obj))
        if canonical is None or canonical in self.non_persistent:
            return "const", obj.detach()
        return "state", canonical

    def state_type(self, name: str) -> TensorType:
        owner_path, _, leaf = name.rpartition(".")
        owner = self.modules[owner_path]
        s = owner.params.get(leaf) or owner.buffers[leaf]
        return s.type

    def needs(self, called: str) -> List[str]:
        """Parameters declared outside the subtree of the module graph
        `called` runs that its forward or a callee's reads: its extra
        arguments, in first-read order."""
        if called in self.needs_memo:
            return self.needs_memo[called]
        self.needs_memo[called] = []  # (no recursion through cycles)
        fqn = _module_path(called)
        out: List[str] = []
        graph = self.graphs.get(called)
        for node in (graph.nodes if graph is not None else []):
            names: List[str] = []
            if node.op == "get_attr":
                kind, what = self.resolve_attr(fqn, node.target)
                if kind == "state":
                    names = [what]
            elif node.op == "call_module":
                names = self.needs(_join(called, node.target))
            for name in names:
                if not _within(name.rpartition(".")[0], fqn) and \
                        name not in out:
                    out.append(name)
        self.needs_memo[called] = out
        return out

    def call(self, fqn: str, args: List[object], node,
             called: Optional[str] = None) -> _CallSpec:
        """The forward of module `fqn` for a call with `args` (values or
        constants), translated at its first such call: one binding the
        constants, else (the same argument types as another forward, or
        other constants than the bound ones) one taking the constant
        tensors as arguments. `called`: the unflattened graph's name for
        this call, `fqn@N` where torch.export traced the module's calls
        apart (on other shapes, or one inside a `torch.no_grad()` block)."""
        called = called or fqn
        spec = None
        for constants_as_args in (False, True):
            spec = self.specs.get((fqn, called, constants_as_args))
            if spec is None:
                # A graph of its own: the module's first call, or a call
                # torch.export traced apart (other shapes: another forward).
                spec = self.translate(fqn, called, args, constants_as_args)
                if not spec.collided:
                    return spec
            elif not spec.collided and _binds_alike(spec, args):
                return spec
            # Another forward takes its computed arguments' types, or its
            # constants differ from the ones bound (BERT's position ids of
            # a shorter sequence): its constant tensors become arguments.
        if spec.collided:
            self.issue(fqn, "called again on the same argument types "
                       "where its trace differs (torch.export traced the "
                       "calls apart: a number or flag it takes, or a "
                       "branch on one, differs): a call picks the "
                       "module's forward by its argument types", node,
                       self.graphs[called])
        else:
            self.issue(fqn, "called again with other constant arguments "
                       "than tensors (a module's constant inputs are bound "
                       "in its forward)", node, self.graphs[called])
        return _CallSpec({}, [], [], failed=True)

    def translate(self, fqn: str, called: str, args: List[object],
                  constants_as_args: bool) -> _CallSpec:
        """Module `fqn`'s forward translated from graph `called` for a call
        with `args`: their constants bound in it, or with
        `constants_as_args` its constant tensors passed as arguments."""
        bound = _bound(args, constants_as_args)
        spec = _CallSpec(bound, [i for i in range(len(args))
                                 if i not in bound], self.needs(called),
                         poisoned=tuple(i for i, a in enumerate(args)
                                        if a is _POISON),
                         constants_as_args=constants_as_args)
        self.specs[(fqn, called, constants_as_args)] = spec
        _Translator(self, fqn, self.graphs[called], spec, called).run()
        return spec

    def translated_apart(self, fqn: str, called: str) -> bool:
        """Whether module `fqn` was translated from a graph other than
        `called` (its calls traced apart)."""
        return any(m == fqn and g != called for m, g, _ in self.specs)

    def translate_root(self) -> None:
        spec = _CallSpec({}, [], [])
        self.specs[("", "", False)] = spec
        _Translator(self, "", self.graphs[""], spec).run()


def _decompose_unhandled(exported):
    """The program with every op the table does not handle but PyTorch's
    decompositions break down into ATen ops (glu, and the
    activations below) decomposed; the ops the table maps themselves
    (linear, SDPA, layer_norm: fused nn ops) stay whole."""
    import torch
    from torch._decomp import core_aten_decompositions, get_decompositions
    aten = torch.ops.aten

    def name(op):
        return f"{op._schema.name.split('::')[-1]}.{op._overloadname}"
    used = {node.target for node in exported.graph.nodes
            if node.op == "call_function"
            and isinstance(node.target, torch._ops.OpOverload)}
    decompositions = core_aten_decompositions()
    decompositions.update(get_decompositions([
        aten.leaky_relu, aten.elu, aten.softplus, aten.mish]))
    table = {op: fn for op, fn in decompositions.items()
             if isinstance(op, torch._ops.OpOverload)
             and name(op) not in _OPS and name(op) not in _INPLACE}
    if not any(op in table for op in used):
        return exported
    return exported.run_decompositions(table)


def _unflatten(exported):
    """torch.export.unflatten, with the calls of a module on inputs of other
    shapes or dtypes kept apart. Unflatten shares one graph between calls
    whose graphs print alike (a shared encoder run on queries and on longer
    documents); the translation reads each node's shape from its meta
    value, the first call's in a shared graph, so a call on other inputs
    needs its graph (`name@N`), which becomes the module's forward for
    those input types."""
    import importlib
    import torch
    unflatten = importlib.import_module("torch.export.unflatten")
    alike = getattr(unflatten, "_check_graph_equivalence", None)
    if alike is None:  # another torch: calls on other shapes are refused
        return torch.export.unflatten(exported)

    def same_inputs(x, y) -> bool:
        return alike(x, y) and _input_types(x.graph) == _input_types(y.graph)
    unflatten._check_graph_equivalence = same_inputs
    try:
        return torch.export.unflatten(exported)
    finally:
        unflatten._check_graph_equivalence = alike


def _input_types(graph) -> list:
    """The shapes and dtypes of a graph's placeholders (their meta values;
    the repr of a non-tensor one)."""
    out = []
    for node in graph.nodes:
        if node.op == "placeholder":
            v = node.meta.get("val")
            out.append((tuple(v.shape), v.dtype) if _is_tensor(v)
                       else repr(v))
    return out


def from_torch(module, example_inputs: Sequence, *, name: Optional[str] = None,
               auto_wrap_policy=None, ignored_modules=None,
               ignored_params=None, ignored_grad_sync: str = "local",
               activation_checkpointing=None) -> Model:
    """The `fsdp.model` of `module` called on `example_inputs` (one rank's
    micro-batch); see the module docstring. With `auto_wrap_policy` (FSDP1's
    policies, a callable `fn(path, module)`, or `or_policy(...)`: see
    wrap_policy.py) the modules it picks are marked as FSDP units.
    `ignored_modules` / `ignored_params` are FSDP's (ignored.py): whole on
    every rank, their gradients local, or with `ignored_grad_sync=
    "all_reduce"` averaged over the ranks. `activation_checkpointing` is
    `apply_activation_checkpointing`'s `check_fn(module)`: the units it
    picks recompute their forward in the backward, only its cheap ops
    where it returns "selective" (the matmuls' and attention's results
    kept); without it, the layers transformers'
    `activation_checkpointing_enable()` set to checkpoint do, when they are
    units (else a warning says they are not). Raises
    UnsupportedModelError listing every construct it cannot translate."""
    import torch
    functions: List[autograd_functions.Call] = []
    try:
        with autograd_functions.recording(functions):
            exported = torch.export.export(module, tuple(example_inputs))
        exported = _decompose_unhandled(exported)
        unflat = _unflatten(exported)
    except Exception as e:  # torch.export's refusal, said as such
        kind = type(e).__name__
        said = str(e).strip().splitlines() or [
            "it gave no message (an assert in the model's forward, such as "
            "a check of the input's size, raises so)"]
        raise UnsupportedModelError(
            f"torch.export cannot trace the model ({kind}): " + said[0]
            + "\n  data-dependent control flow and dynamic shapes are not "
              "supported; the inputs' shapes are fixed") from None
    imp = _Importer(module, exported, unflat, functions)
    imp.translate_root()
    for fqn, ir in imp.modules.items():  # (else explained by the issues)
        if any(f.results is None for f in ir.forwards) and not imp.issues:
            imp.issues.append(_Issue(fqn, "its forward was not completed", ""))
    if imp.issues:
        raise UnsupportedModelError(
            f"cannot import {type(module).__name__}: {len(imp.issues)} "
            "unsupported construct(s):\n" + "\n".join(map(str, imp.issues)))
    root = imp.modules[""]
    results = root.fwd.results if root.fwd is not None else []
    if (not results or results[0].shape != ()
            or results[0].dtype not in _FLOATS):
        raise UnsupportedModelError(
            f"the forward of {type(module).__name__} must return the scalar "
            f"loss first; it returns {[str(t) for t in results]}")
    skipped = mark_ignored(
        imp.modules, module,
        ignored_roots(module, ignored_modules, ignored_params),
        ignored_grad_sync)
    if auto_wrap_policy is not None:
        mark_units(imp.modules, module, auto_wrap_policy, skipped)
    if activation_checkpointing is None:
        activation_checkpointing = hf_gradient_checkpointing(imp.modules,
                                                             module)
    if activation_checkpointing is not None:
        mark_checkpointed(imp.modules, module, activation_checkpointing)
    model_name = name or type(module).__name__.lower()
    return Model(model_name, root, header=[
        f"Imported from the torch module {type(module).__module__}."
        f"{type(module).__name__} by fsdp_mlir.from_torch (torch.export)."])
