"""From a torch.nn.Module to an `fsdp.model`: torch.export + unflatten.

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

ATen ops map onto `nn` ops: linear, addmm (GPT-2's Conv1D: x·W + b),
mm / bmm / matmul, layer_norm, embedding, add / sub / mul / div (tensors
broadcast as PyTorch; by a scalar: scale or the add of a 0-d constant),
rsub, neg, relu, silu, gelu (exact or tanh), tanh, sigmoid, exp, log, sqrt,
rsqrt, abs, pow (scalar exponent), square, clamp / clamp_min / clamp_max,
dropout, the comparisons, where / masked_fill, logical ops of masks,
softmax, view / reshape / flatten / unsqueeze / squeeze, transpose /
permute / t, expand (nn.broadcast), cat (nn.concat), split, chunk, unbind,
slice / narrow (step 1), pad / constant_pad_nd (constant mode), to /
_to_copy (nn.cast on a dtype change), index_select, index and gather by
constant indices (nn.embedding of the selected elements),
scaled_dot_product_attention (grouped k/v heads; any scale; keys of
another length) → the fused nn.attention between the [B, H, T, D] ↔
[B, T, H·D] reshapes, a mask other than all-true or causal as its additive
bias, and with dropout PyTorch's math backend (matmul, mask, softmax,
dropout, matmul), sum / mean,
cross_entropy (mean, sum or none; ignore_index; no class weights or label
smoothing) and mse_loss; clone, contiguous, alias, _assert_tensor_metadata
are no-ops. Ops the table does not handle but PyTorch decomposes into
ops it does are decomposed first (_decompose_unhandled). Anything else —
an op on run-time values the table does not handle, a keyword it does not
handle — is collected over the whole model and reported once,
each with its module path and the user's source line
(UnsupportedModelError); torch.export's own refusals (data-dependent
control flow, dynamic shapes) are reported as such.

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

Limits: detach of a computed value is refused
(there is no stop-gradient op); a submodule called twice must get the same
constant arguments (they are bound in its one forward).

`save_weights(module, model, path)` writes the module's current parameters
and buffers as a full checkpoint that `fsdp-run --load` starts from, so the
first loss equals torch's.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .ir import Forward, Init, Model, Module, TensorType, Value

__all__ = ["from_torch", "save_weights", "UnsupportedModelError"]


class UnsupportedModelError(ValueError):
    """The model uses what the importer cannot translate; the message lists
    every occurrence."""


_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16",
           "int64": "i64", "int32": "i32"}
# The element types an arith.constant may have (Forward.constant).
_CONST_DTYPES = {"float32": "f32", "int64": "i64", "int32": "i32"}


def _dtype(torch_dtype) -> str:
    name = str(torch_dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise UnsupportedModelError(f"dtype {name} is not supported")
    return _DTYPES[name]


def _tensor_type(fake) -> TensorType:
    return TensorType(tuple(int(d) for d in fake.shape), _dtype(fake.dtype))


def _argument_type(fake) -> TensorType:
    """A forward's argument: a bool tensor (a mask passed to a submodule)
    is an f32 mask of 1 and 0, as every run-time mask here."""
    import torch
    if fake.dtype == torch.bool:
        return TensorType(tuple(int(d) for d in fake.shape), "f32")
    return _tensor_type(fake)


def _default_init(owner, param_name: str, shape) -> Init:
    """PyTorch's reset_parameters() for the common classes (used only when
    the run does not --load the weights file); zeros otherwise."""
    kind = type(owner).__name__
    if kind == "Linear":
        if param_name == "weight":
            return Init.kaiming_uniform(math.sqrt(5))
        bound = 1 / math.sqrt(owner.in_features)
        return Init.uniform(-bound, bound)
    if kind == "Embedding":
        return Init.normal(0.0, 1.0)
    if kind in ("LayerNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d"):
        return Init.ones if param_name == "weight" else Init.zeros
    return Init.zeros


@dataclass
class _Issue:
    module: str
    what: str
    source: str

    def __str__(self) -> str:
        where = f"module '{self.module or '(root)'}'"
        return f"  {where}: {self.what}" + (f"\n    at {self.source}"
                                            if self.source else "")


def _source_line(node) -> str:
    """The user's frame of the node's stack trace (its last 'File' line)."""
    trace = node.meta.get("stack_trace") or ""
    files = [line.strip() for line in trace.splitlines()
             if line.strip().startswith("File ")]
    return files[-1] if files else ""


class _Unsupported(Exception):
    pass


class _Poisoned(Exception):
    """An input of the node could not be translated."""


_POISON = object()


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _within(path: str, ancestor: str) -> bool:
    """Whether module `path` is `ancestor` or in its subtree."""
    return (ancestor == "" or path == ancestor
            or path.startswith(ancestor + "."))


def _is_tensor(x) -> bool:
    import torch
    return isinstance(x, torch.Tensor)


def _has_runtime(x) -> bool:
    if isinstance(x, Value):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_runtime(y) for y in x)
    if isinstance(x, dict):
        return any(_has_runtime(y) for y in x.values())
    return False


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
# Ops with no effect on the values.
_NOOPS = {"_assert_tensor_metadata.default", "_assert_async.msg",
          "_assert_async.default"}


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


class _Translator:
    """One submodule's graph into its forward; `bound` gives the constants
    of its inputs (by placeholder position), `extras` the qualified names of
    the tied parameters it receives as extra arguments."""

    def __init__(self, importer: "_Importer", fqn: str, graph,
                 spec: _CallSpec):
        self.imp, self.fqn, self.graph, self.spec = importer, fqn, graph, spec
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
        self.ir.fwd = self.f = Forward(self.ir, args)
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
            self.ir.fwd = None

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
        fqn = _join(self.fqn, node.target)
        args, poisoned = [], False
        for a in node.args:
            try:
                args.append(self.arg(a))
            except _Poisoned:
                args.append(_POISON)
                poisoned = True
        spec = self.imp.call(fqn, args, node)
        if poisoned or spec.failed or spec.outputs is None:
            raise _Poisoned()  # their own issues say why
        callee = self.imp.modules[fqn]
        results = []
        if callee.fwd is not None:
            if callee.fwd.results is None:
                raise _Poisoned()
            ins = [args[i] for i in spec.runtime] + [
                self.state_value(n) for n in spec.extras]
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

    def call_function(self, node):
        if node.target is operator.getitem:
            seq, index = node.args
            return self.arg(seq)[index]
        name = getattr(node.target, "__name__", str(node.target))
        if name in _NOOPS:
            return None
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


class _Importer:
    def __init__(self, module, exported, unflat):
        import torch
        self.torch = torch
        self.module = module
        self.originals = dict(module.named_modules())
        self.unflat = dict(unflat.named_modules())
        self.graphs = {fqn: m.graph for fqn, m in self.unflat.items()
                       if hasattr(m, "graph")}
        self.issues: List[_Issue] = []
        self.modules: Dict[str, Module] = {}
        self.specs: Dict[str, _CallSpec] = {}
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

    def issue(self, fqn: str, what: str, node) -> None:
        self.issues.append(_Issue(fqn, what, _source_line(node)))

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
                ir.param(name, _tensor_type(p), _default_init(mod, name, p.shape),
                         requires_grad=p.requires_grad)
            for name, b in mod.named_buffers(recurse=False):
                if name in mod._non_persistent_buffers_set or id(b) in declared:
                    continue
                declared.add(id(b))
                ir.buffer(name, _tensor_type(b), Init.zeros)

    def resolve_attr(self, fqn: str, target: str):
        """A get_attr of module `fqn`: ("state", qualified name of the
        parameter or persistent buffer) or ("const", its tensor)."""
        owner_path, _, leaf = _join(fqn, target).rpartition(".")
        original = self.originals.get(owner_path)
        obj = getattr(original, leaf, None) if original is not None else None
        if not _is_tensor(obj):  # a constant torch.export lifted
            obj = getattr(self.unflat[owner_path], leaf)
        canonical = self.state_names.get(id(obj))
        if canonical is None or canonical in self.non_persistent:
            return "const", obj.detach()
        return "state", canonical

    def state_type(self, name: str) -> TensorType:
        owner_path, _, leaf = name.rpartition(".")
        owner = self.modules[owner_path]
        s = owner.params.get(leaf) or owner.buffers[leaf]
        return s.type

    def needs(self, fqn: str) -> List[str]:
        """Parameters declared outside `fqn`'s subtree that its forward or
        a callee's reads: its extra arguments, in first-read order."""
        if fqn in self.needs_memo:
            return self.needs_memo[fqn]
        self.needs_memo[fqn] = []  # (no recursion through cycles)
        out: List[str] = []
        graph = self.graphs.get(fqn)
        for node in (graph.nodes if graph is not None else []):
            names: List[str] = []
            if node.op == "get_attr":
                kind, what = self.resolve_attr(fqn, node.target)
                if kind == "state":
                    names = [what]
            elif node.op == "call_module":
                names = self.needs(_join(fqn, node.target))
            for name in names:
                if not _within(name.rpartition(".")[0], fqn) and \
                        name not in out:
                    out.append(name)
        self.needs_memo[fqn] = out
        return out

    def call(self, fqn: str, args: List[object], node) -> _CallSpec:
        """Translates `fqn` for a call with `args` (values or constants),
        the first time; later calls must bind the same constants."""
        bound = {i: a for i, a in enumerate(args)
                 if a is not _POISON and not isinstance(a, Value)}
        runtime = [i for i in range(len(args)) if i not in bound]
        spec = self.specs.get(fqn)
        if spec is None:
            spec = _CallSpec(bound, runtime, self.needs(fqn), poisoned=tuple(
                i for i, a in enumerate(args) if a is _POISON))
            self.specs[fqn] = spec
            _Translator(self, fqn, self.graphs[fqn], spec).run()
            return spec
        if spec.runtime != runtime or not all(
                _same_constant(spec.bound[i], bound[i]) for i in bound):
            self.issue(fqn, "called again with other constant arguments "
                       "(a module's constant inputs are bound in its "
                       "forward)", node)
            return _CallSpec({}, [], [], failed=True)
        return spec

    def translate_root(self) -> None:
        spec = _CallSpec({}, [], [])
        self.specs[""] = spec
        _Translator(self, "", self.graphs[""], spec).run()


# -- the op table: (translator, fx node, its FakeTensor, args...) ---------
def _shape(out) -> List[int]:
    return [int(d) for d in out.shape]


def _out_type(out) -> TensorType:
    return _tensor_type(out)


def _float(t: "_Translator", x: Value, what: str) -> Value:
    if x.type.dtype not in ("f32", "bf16", "f16"):
        raise _Unsupported(f"{what} of an integer tensor computed at run "
                           "time")
    return x


def _linear(t, node, out, x, w, b=None):
    return t.f.linear(t.v(x), t.v(w), None if b is None else t.v(b))


def _addmm(t, node, out, bias, x, w, beta=1, alpha=1):
    """GPT-2's Conv1D: bias + x·W with W [in, out]."""
    if beta != 1 or alpha != 1:
        raise _Unsupported(f"addmm with beta={beta}, alpha={alpha}")
    w = t.v(w)
    return t.f.linear(t.v(x), t.transpose(w, [1, 0]), t.v(bias))


def _mm(t, node, out, a, b):
    return t.f.matmul(t.v(a), t.v(b))


def _layer_norm(t, node, out, x, shape, w=None, b=None, eps=1e-5,
                cudnn_enable=True):
    if len(shape) != 1:
        raise _Unsupported("layer_norm over more than the last dimension")
    return t.f.layer_norm(t.v(x), None if w is None else t.v(w),
                          None if b is None else t.v(b), eps)


def _embedding(t, node, out, w, idx, padding_idx=-1, scale_grad=False,
               sparse=False):
    if scale_grad or sparse:
        raise _Unsupported("embedding with scale_grad_by_freq or sparse")
    rows = w.type.shape[0] if isinstance(w, Value) else int(w.shape[0])
    pad = None if padding_idx is None or padding_idx == -1 else \
        padding_idx % rows
    return t.f.embedding(t.v(idx), t.v(w), padding_idx=pad)


def _scalar(t, x: float, dtype: str) -> Value:
    """A 0-d constant of the run-time operand's element type."""
    import torch
    if dtype != "f32":
        raise _Unsupported(f"a scalar operand with a {dtype} tensor")
    return t.constant(torch.tensor(float(x), dtype=torch.float32))


def _compact(t, c, other: Value, out):
    """The constant `c` reduced to size 1 along the dimensions where it
    repeats, as long as broadcasting with `other` still gives `out`."""
    import torch
    shape = _shape(out)
    # A mask op's bool result is an f32 mask here.
    c = c.to(torch.float32 if out.dtype == torch.bool else out.dtype)
    rank = len(shape)
    oshape = [1] * (rank - other.type.rank) + list(other.type.shape)
    for d in range(c.dim()):
        full = rank - c.dim() + d
        if c.shape[d] > 1 and oshape[full] == shape[full]:
            first = c.narrow(d, 0, 1)
            if torch.equal(c, first.expand_as(c)):
                c = first
    return c


_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def _elementwise(t, op: str, a, b, out):
    """a `op` b with at most one side constant or a Python scalar."""
    import torch
    if not isinstance(a, Value) and not isinstance(b, Value):
        raise _Unsupported(f"{op} without a run-time operand")
    # 0-d constant tensors act as scalars.
    a = a.item() if _is_tensor(a) and a.dim() == 0 else a
    b = b.item() if _is_tensor(b) and b.dim() == 0 else b
    f = t.f
    build = ((lambda p, q: f.compare(op, p, q)) if op in _COMPARISONS
             else getattr(f, op))
    if isinstance(a, Value) and isinstance(b, Value):
        if a.type.dtype != b.type.dtype:
            raise _Unsupported(f"{op} of {a.type.dtype} and {b.type.dtype}")
        _float(t, a, op)
        return build(a, b)
    x, s = (a, b) if isinstance(a, Value) else (b, a)
    _float(t, x, op)
    if _is_tensor(s):  # a constant tensor: broadcast by the op
        c = t.constant(_compact(t, s, x, out))
        return build(a if x is a else c, b if x is b else c)
    if isinstance(s, bool) or not isinstance(s, (int, float)):
        raise _Unsupported(f"{op} with a {type(s).__name__} operand")
    s = float(s)
    if op in ("maximum", "minimum") + _COMPARISONS:  # no scalar form
        c = _scalar(t, s, x.type.dtype)
        return build(a if x is a else c, b if x is b else c)
    if op == "mul":
        return x if s == 1.0 else f.scale(x, s)
    if op == "div":
        if x is a:
            return x if s == 1.0 else f.scale(x, 1.0 / s)
        return f.div(_scalar(t, s, x.type.dtype), x)
    if op == "add":
        return x if s == 0.0 else f.add(x, _scalar(t, s, x.type.dtype))
    # sub
    if x is a:
        return x if s == 0.0 else f.add(x, _scalar(t, -s, x.type.dtype))
    return f.add(f.scale(x, -1.0), _scalar(t, s, x.type.dtype))


def _binary(op):
    def build(t, node, out, a, b, alpha=1, rounding_mode=None):
        if rounding_mode is not None:
            raise _Unsupported(f"div with rounding_mode={rounding_mode!r}")
        if alpha != 1:
            if isinstance(b, (int, float)):
                b = b * alpha
            else:
                b = (t.f.scale(b, float(alpha)) if isinstance(b, Value)
                     else b * alpha)
        return _elementwise(t, op, a, b, out)
    return build


# PyTorch's bool tensors computed at run time are f32 masks of 1 and 0:
# comparisons compare in f32 (exact for the 16-bit floats and for integers
# below 2^24), torch.where(c, x, y) is keep(x, c) + keep(y, c == 0), so
# the unselected side (an -inf fill, a NaN) never reaches the result.
def _as_f32(t, v):
    """A comparison's or mask's operand in f32 (constants too)."""
    import torch
    if isinstance(v, Value):
        return v if v.type.dtype == "f32" else t.f.cast(v, "f32")
    if _is_tensor(v):
        return v.to(torch.float32)
    return float(v)


def _compare(op):
    def build(t, node, out, a, b):
        return _elementwise(t, op, _as_f32(t, a), _as_f32(t, b), out)
    return build


def _mask_not(t, m: Value) -> Value:
    return t.f.compare("eq", m, _scalar(t, 0.0, "f32"))


def _where(t, node, out, cond, x, y):
    """torch.where in the result's type."""
    m = _as_f32(t, cond)
    if not isinstance(m, Value):  # a constant condition, run-time branches
        m = t.constant(m)
    return _keep_either(t, m, x, y, _dtype(out.dtype))


def _keep_either(t, m: Value, x, y, dtype: str) -> Value:
    """keep(x, m) + keep(y, m == 0) in `dtype`, m an f32 mask; x and y
    values, constant tensors or scalars."""
    import torch
    not_m = _mask_not(t, m)

    def branch(v, mask):
        if dtype != "f32":
            mask = t.f.cast(mask, dtype)
        if isinstance(v, Value):
            v = v if v.type.dtype == dtype else t.f.cast(v, dtype)
        elif _is_tensor(v):
            v = t.constant(v.to(torch.float32))
            v = v if dtype == "f32" else t.f.cast(v, dtype)
        else:
            v = _scalar(t, float(v), dtype)
        return t.f.keep(v, mask)
    return t.f.add(branch(x, m), branch(y, not_m))


def _masked_fill(t, node, out, x, mask, value):
    return _where(t, node, out, mask, value, x)


def _on_masks(what, build):
    """A logical op of masks (bitwise ~, &, | of bool tensors too)."""
    def handler(t, node, out, *args):
        import torch
        if out.dtype != torch.bool:
            raise _Unsupported(f"{what} of {str(out.dtype)[6:]} tensors "
                               "(only of bool masks)")
        return build(t, out, *[_as_f32(t, a) for a in args])
    return handler


_logical_not = _on_masks("not", lambda t, out, x: _mask_not(t, x))
_logical_and = _on_masks(
    "and", lambda t, out, a, b: _elementwise(t, "mul", a, b, out))
_logical_or = _on_masks(
    "or", lambda t, out, a, b: _elementwise(t, "maximum", a, b, out))


def _rsub(t, node, out, x, other, alpha=1):
    """other - alpha * x."""
    if alpha != 1:
        x = t.f.scale(x, float(alpha)) if isinstance(x, Value) else x * alpha
    return _elementwise(t, "sub", other, x, out)


def _neg(t, node, out, x):
    return t.f.scale(_float(t, x, "neg"), -1.0)


def _t(t, node, out, x):
    return t.transpose(x, [1, 0]) if x.type.rank == 2 else x


def _gelu(t, node, out, x, approximate="none"):
    return t.f.gelu(x, approximate=approximate)


def _dropout(t, node, out, x, p, train):
    return t.f.dropout(t.v(x), p) if train and p else x


def _view(t, node, out, x, *shape):
    if tuple(_shape(out)) == x.type.shape:
        return x
    return t.reshape(x, _shape(out))


def _transpose(t, node, out, x, d0, d1):
    perm = list(range(x.type.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return t.transpose(x, perm)


def _permute(t, node, out, x, perm):
    return t.transpose(x, perm)


def _split(t, node, out, x, size, dim=0):
    dim %= x.type.rank
    n = x.type.shape[dim]
    sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return t.f.split(x, sizes, dim)


def _chunk(t, node, out, x, chunks, dim=0):
    """torch.chunk: pieces of ceil(n / chunks), the last one smaller."""
    n = x.type.shape[dim % x.type.rank]
    return _split(t, node, out, x, -(-n // chunks), dim)


def _split_with_sizes(t, node, out, x, sizes, dim=0):
    return t.f.split(x, list(sizes), dim)


def _unbind(t, node, out, x, dim=0):
    dim %= x.type.rank
    n = x.type.shape[dim]
    parts = t.f.split(x, [1] * n, dim) if n > 1 else [x]
    return [t.reshape(p, _shape(o)) for p, o in zip(parts, out)]


def _expand(t, node, out, x, *rest, **kwargs):
    shape = _shape(out)
    if tuple(shape) == x.type.shape:
        return x
    _float(t, x, "expand")
    return t.f.op("nn.broadcast", [x], [x.type.with_shape(shape)],
                  form="to")[0]


def _broadcast_tensors(t, node, out, tensors):
    return [_expand(t, node, o, t.v(x)) for x, o in zip(tensors, out)]


def _cat(t, node, out, tensors, dim=0):
    # torch.cat skips empty constants (a KV cache's initial state).
    values = [t.v(x, out.dtype) for x in tensors
              if isinstance(x, Value) or x.numel()]
    if len(values) == 1:
        return values[0]
    for v in values:
        _float(t, v, "cat")
    dim %= len(out.shape)
    return t.f.op("nn.concat", values, [_out_type(out)],
                  f"dim = {dim} : i64")[0]


def _slice(t, node, out, x, dim=0, start=None, end=None, step=1):
    if step != 1:
        raise _Unsupported(f"slice with step {step}")
    dim %= x.type.rank
    n = x.type.shape[dim]
    start = 0 if start is None else start
    end = n if end is None else end
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, 0), n)
    if start == 0 and end == n:
        return x
    if end <= start:
        raise _Unsupported("slice to an empty tensor")
    return t.f.slice(x, dim, start, end)


def _narrow(t, node, out, x, dim, start, length):
    return _slice(t, node, out, x, dim, start, start + length)


def _select(t, node, out, x, dim, index):
    """x[..., index, ...]: a one-wide slice without its dimension (ViT's
    class token, sequence_output[:, 0])."""
    dim %= x.type.rank
    index %= x.type.shape[dim]
    return t.reshape(t.f.slice(x, dim, index, index + 1), _shape(out))


def _index_select(t, node, out, x, dim, index):
    """x.index_select(dim, index) as a table lookup: nn.embedding of x's
    slices along `dim` (moved to the front by a transpose, the rest
    flattened), whose backward, the scatter-add of the selected slices'
    gradients, is index_select's; the result is moved back."""
    x = t.v(x)
    rank = x.type.rank
    dim %= rank
    perm = [dim] + [d for d in range(rank) if d != dim]
    moved = x if dim == 0 else t.transpose(x, perm)
    rest = [x.type.shape[d] for d in perm[1:]]
    table = moved if rank == 2 else t.reshape(
        moved, [x.type.shape[dim], math.prod(rest)])
    picked = t.f.embedding(t.v(index), table)
    if dim == 0:
        return t.reshape(picked, _shape(out))
    picked = t.reshape(picked, [_shape(out)[dim]] + rest)
    return t.transpose(picked, [perm.index(d) for d in range(rank)])


def _index(t, node, out, x, indices):
    """x[i0, i1, ...] (advanced indexing). With constant indices (HF's
    attention masks index the padding mask by arange grids) the positions
    are PyTorch's own indexing of an arange of x's elements, gathered by
    nn.embedding from x as a column (so the gradient scatters back); one
    run-time index on dimension 0 is index_select."""
    x = _float(t, t.v(x), "indexing")
    given = [i for i in indices if i is not None]
    if len(given) == 1 and isinstance(indices[0], Value):
        return _index_select(t, node, out, x, 0, indices[0])
    if any(isinstance(i, Value) for i in given):
        raise _Unsupported("indexing by several tensors computed at run time")
    return _take(t, x, _elements(x)[tuple(indices)], out)


def _elements(x: Value):
    """x's flat element positions, in x's shape."""
    import torch
    return torch.arange(x.type.numel).reshape(x.type.shape)


def _take(t, x: Value, positions, out):
    """The elements of x at constant flat positions (out's shape), by
    nn.embedding from x as a column: the gradient scatters back."""
    if positions.numel() == 0:
        raise _Unsupported("indexing that selects nothing")
    column = t.reshape(x, [x.type.numel, 1])
    picked = t.f.embedding(t.constant(positions.reshape(-1)), column)
    return t.reshape(picked, _shape(out))


def _gather(t, node, out, x, dim, index, sparse_grad=False):
    """torch.gather by a constant index: positions from PyTorch's own
    gather of an arange of x's elements, as for indexing."""
    x = _float(t, t.v(x), "gather")
    if isinstance(index, Value):
        raise _Unsupported("gather by an index computed at run time")
    return _take(t, x, _elements(x).gather(dim, index), out)


def _conv2d(t, node, out, x, w, b=None, stride=1, padding=0, dilation=1,
            groups=1):
    """A convolution whose stride equals its kernel (ViT's patch embedding)
    is a linear map of non-overlapping patches: x [B, C, H, W] →
    patches [B·h·w, C·kh·kw] (C, kh, kw order, as the weight's) → linear
    with the weight as [O, C·kh·kw] → [B, O, h, w]."""
    def pair(v):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return v * 2 if len(v) == 1 else v
    x, w = t.v(x), t.v(w)
    o, c, kh, kw = w.type.shape
    stride, padding, dilation = pair(stride), pair(padding), pair(dilation)
    bsz, _, height, width = x.type.shape
    if (stride != [kh, kw] or padding != [0, 0] or dilation != [1, 1]
            or groups != 1 or height % kh or width % kw):
        raise _Unsupported(
            f"conv2d other than non-overlapping patches (kernel {[kh, kw]}, "
            f"stride {stride}, padding {padding}, dilation {dilation}, "
            f"groups {groups}, input {height}x{width})")
    h, wd = height // kh, width // kw
    patches = t.reshape(x, [bsz, c, h, kh, wd, kw])
    patches = t.transpose(patches, [0, 2, 4, 1, 3, 5])
    patches = t.reshape(patches, [bsz * h * wd, c * kh * kw])
    y = t.f.linear(patches, t.reshape(w, [o, c * kh * kw]),
                   None if b is None else t.v(b))
    y = t.reshape(y, [bsz, h, wd, o])
    return t.transpose(y, [0, 3, 1, 2])


def _pad(t, node, out, x, pad, mode="constant", value=None):
    if mode != "constant":
        raise _Unsupported(f"pad with mode {mode!r}")
    value = 0.0 if value is None else float(value)
    for i in range(0, len(pad), 2):
        low, high = pad[i], pad[i + 1]
        if low < 0 or high < 0:
            raise _Unsupported("pad by a negative amount")
        if low or high:
            x = t.f.pad(x, x.type.rank - 1 - i // 2, low, high, value)
    return x


def _constant_pad_nd(t, node, out, x, pad, value=0):
    return _pad(t, node, out, x, pad, "constant", value)


def _to(t, node, out, x, *args, **kwargs):
    """to / _to_copy: a cast when the dtype changes (to bool: x != 0, a
    mask)."""
    import torch
    if out.dtype == torch.bool:
        return t.f.compare("ne", _as_f32(t, x), _scalar(t, 0.0, "f32"))
    want = _dtype(out.dtype)
    if want == x.type.dtype:
        return x
    if want not in ("f32", "bf16", "f16"):
        raise _Unsupported(f"cast of {x.type.dtype} to {want}")
    return t.f.cast(x, want)


def _sdpa(t, node, out, q, k, v, attn_mask=None, dropout_p=0.0,
          is_causal=False, scale=None, enable_gqa=False):
    """[B, H, T, D] heads → nn.attention on [B, T, H*D] and back. A mask
    other than all-true or causal becomes its additive bias (a bool one:
    −inf where it is false); dropout takes PyTorch's math backend."""
    import torch
    q, k, v = t.v(q), t.v(k), t.v(v)
    B, H, T, D = q.type.shape
    kv_heads, S = k.type.shape[1], k.type.shape[2]
    causal = bool(is_causal)
    dropout_p = float(dropout_p)
    scale = 1 / math.sqrt(D) if scale is None else float(scale)
    is_bool = False
    if isinstance(attn_mask, Value):
        # A run-time bool tensor is an f32 mask here: ask the graph.
        arg = node.kwargs.get("attn_mask",
                              node.args[3] if len(node.args) > 3 else None)
        is_bool = arg.meta["val"].dtype == torch.bool
    elif attn_mask is not None:
        kind = _fused_mask_kind(attn_mask, B, H, T, S, causal)
        if kind:  # nn.attention's own mask: none, or causal
            causal = causal or kind == "causal"
            attn_mask = None
        elif attn_mask.dtype == torch.bool:  # its bias, folded
            attn_mask = t.constant(torch.zeros(attn_mask.shape).masked_fill(
                ~attn_mask, float("-inf")))
        else:
            attn_mask = t.constant(attn_mask.to(torch.float32))
    if dropout_p:
        return _sdpa_math(t, q, k, v, attn_mask, is_bool, causal, scale,
                          dropout_p)
    bias = None if attn_mask is None else _attention_bias(
        t, attn_mask, is_bool, [B, H, T, S], q.type.dtype)

    def packed(x, heads, length):
        return t.reshape(t.transpose(x, [0, 2, 1, 3]),
                         [B, length, heads * D])

    default = math.isclose(scale, 1 / math.sqrt(D), rel_tol=1e-9)
    o = t.f.attention(packed(q, H, T), packed(k, kv_heads, S),
                      packed(v, kv_heads, S), H, num_kv_heads=kv_heads,
                      causal=causal, scale=None if default else scale,
                      bias=bias)
    return t.transpose(t.reshape(o, [B, T, H, D]), [0, 2, 1, 3])


def _attention_bias(t, mask: Value, is_bool: bool, full, dtype) -> Value:
    """An SDPA mask as nn.attention's additive bias [1 or B, 1 or H, T, S]:
    a bool mask is 0 where true, −inf where false; a float one as it is."""
    if is_bool:
        mask = t.f.keep(_scalar(t, float("-inf"), "f32"), _mask_not(t, mask))
    shape = [1] * (4 - mask.type.rank) + list(mask.type.shape)
    mask = t.reshape(mask, shape)
    if any(shape[d] not in (1, full[d]) for d in (0, 1)):
        raise _Unsupported(f"attention mask of shape {shape}")
    want = shape[:2] + full[2:]
    if shape != want:
        mask = t.f.op("nn.broadcast", [mask], [mask.type.with_shape(want)],
                      form="to")[0]
    return mask if mask.type.dtype == dtype else t.f.cast(mask, dtype)


def _fused_mask_kind(mask, B, H, T, S, causal):
    """"all" for a constant mask that is all-true, "causal" for one that is
    (without is_causal, T = S) exactly causal: nn.attention's own masks;
    None for any other."""
    import torch
    if mask.dtype != torch.bool and not bool(
            ((mask == 0) | torch.isneginf(mask)).all()):
        return None
    try:
        m = torch.broadcast_to(mask, (B, H, T, S))
    except RuntimeError:
        raise _Unsupported(f"attention mask of shape "
                           f"{list(mask.shape)}") from None
    keep = m if m.dtype == torch.bool else m == 0
    if bool(keep.all()):
        return "all"
    lower = torch.ones(T, S, dtype=torch.bool).tril()
    if T == S and not causal and bool((keep == lower).all()):
        return "causal"
    return None


def _sdpa_math(t, q, k, v, mask, is_bool, causal, scale, dropout_p):
    """PyTorch's math SDPA: the [B, H, T, S] scores materialised. A bool
    mask selects (masked scores are -inf), a float one is added: a padding
    mask, or a bias whose gradient flows back (T5's relative positions).
    Dropout applies to the probabilities, as PyTorch's does (its masks are
    our Philox ones, not torch's)."""
    import torch
    B, H, T, D = q.type.shape
    kv_heads, S = k.type.shape[1], k.type.shape[2]
    if kv_heads != H:  # grouped-query: each k/v head serves H / kv heads
        def repeat(x):
            x = t.reshape(x, [B, kv_heads, 1, S, D])
            x = t.f.op("nn.broadcast", [x], [x.type.with_shape(
                [B, kv_heads, H // kv_heads, S, D])], form="to")[0]
            return t.reshape(x, [B, H, S, D])
        k, v = repeat(k), repeat(v)
    dtype = q.type.dtype
    scores = t.f.scale(t.f.matmul(q, k, transpose_rhs=True), scale)
    ninf = _scalar(t, float("-inf"), "f32")
    if causal:
        lower = torch.ones(T, S, dtype=torch.float32).tril()
        scores = _keep_either(t, t.constant(lower), scores, ninf, dtype)
    if mask is not None and is_bool:
        scores = _keep_either(t, _as_f32(t, mask), scores, ninf, dtype)
    elif mask is not None:
        scores = t.f.add(scores, mask if mask.type.dtype == dtype
                         else t.f.cast(mask, dtype))
    p = t.f.dropout(t.f.softmax(scores, -1), dropout_p)
    return t.f.matmul(p, v)


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _cross_entropy(t, node, out, logits, targets, weight=None, reduction=1,
                   ignore_index=-100, label_smoothing=0.0):
    if weight is not None or label_smoothing:
        raise _Unsupported("cross_entropy with class weights or label "
                           "smoothing")
    return t.f.cross_entropy(t.v(logits), t.v(targets),
                             _REDUCTIONS[reduction],
                             ignore_index=int(ignore_index))


def _mse_loss(t, node, out, x, target, reduction=1):
    return t.f.mse_loss(t.v(x), t.v(target, out.dtype),
                        _REDUCTIONS[reduction])


def _reduce(method):
    def build(t, node, out, x, dims=None, keepdim=False, dtype=None):
        if dtype is not None:
            raise _Unsupported(f"{method} with a dtype")
        dims = list(range(x.type.rank)) if dims is None else list(dims)
        return getattr(t.f, method)(x, dims, keepdim)
    return build


def _var(t, node, out, x, dims=None, unbiased=True, keepdim=False,
         correction=None):
    """torch.var as mean((x - mean(x))^2) * n / (n - correction)."""
    x = _float(t, x, "var")
    dims = (list(range(x.type.rank)) if dims is None
            else [d % x.type.rank for d in dims])
    correction = (1 if unbiased else 0) if correction is None else correction
    count = math.prod(x.type.shape[d] for d in dims)
    if count - correction <= 0:
        raise _Unsupported(f"var of {count} element(s) with correction "
                           f"{correction}")
    centered = t.f.sub(x, t.f.reduce_mean(x, dims, True))
    squares = t.f.reduce_sum(t.f.mul(centered, centered), dims, keepdim)
    return t.f.scale(squares, 1.0 / (count - correction))


def _identity(t, node, out, x, *args, **kwargs):
    return x


def _detach(t, node, out, x):
    raise _Unsupported("detach of a value computed at run time (no "
                       "stop-gradient op)")


def _softmax(t, node, out, x, dim, *rest):
    return t.f.softmax(x, dim)


def _unary(method):
    def build(t, node, out, x):
        return getattr(t.f, method)(_float(t, x, method))
    return build


def _pow(t, node, out, x, exponent):
    if not isinstance(exponent, (int, float)) or isinstance(exponent, bool):
        raise _Unsupported("pow with a tensor exponent")
    if exponent == 1:
        return x
    return t.f.pow(_float(t, x, "pow"), float(exponent))


def _clamp(t, node, out, x, min=None, max=None):
    for bound in (min, max):
        if bound is not None and not isinstance(bound, (int, float)):
            raise _Unsupported("clamp with tensor bounds")
    if min is None and max is None:
        return x
    return t.f.clamp(_float(t, x, "clamp"),
                     None if min is None else float(min),
                     None if max is None else float(max))


def _clamp_min(t, node, out, x, min):
    return _clamp(t, node, out, x, min=min)


def _clamp_max(t, node, out, x, max):
    return _clamp(t, node, out, x, max=max)


_OPS: Dict[str, Callable] = {
    "linear.default": _linear,
    "addmm.default": _addmm,
    "mm.default": _mm,
    "bmm.default": _mm,
    "matmul.default": _mm,
    "layer_norm.default": _layer_norm,
    "embedding.default": _embedding,
    "add.Tensor": _binary("add"),
    "add.Scalar": _binary("add"),
    "sub.Tensor": _binary("sub"),
    "sub.Scalar": _binary("sub"),
    "mul.Tensor": _binary("mul"),
    "mul.Scalar": _binary("mul"),
    "div.Tensor": _binary("div"),
    "maximum.default": _binary("maximum"),
    "minimum.default": _binary("minimum"),
    **{f"{c}.{k}": _compare(c) for c in _COMPARISONS
       for k in ("Tensor", "Scalar")},
    "where.self": _where,
    "where.ScalarSelf": _where,
    "where.ScalarOther": _where,
    "where.Scalar": _where,
    "masked_fill.Scalar": _masked_fill,
    "masked_fill.Tensor": _masked_fill,
    "logical_not.default": _logical_not,
    "bitwise_not.default": _logical_not,
    "logical_and.default": _logical_and,
    "bitwise_and.Tensor": _logical_and,
    "logical_or.default": _logical_or,
    "bitwise_or.Tensor": _logical_or,
    "__and__.Tensor": _logical_and,
    "__or__.Tensor": _logical_or,
    "__invert__.default": _logical_not,
    "div.Scalar": _binary("div"),
    "div.Tensor_mode": _binary("div"),
    "rsub.Scalar": _rsub,
    "rsub.Tensor": _rsub,
    "neg.default": _neg,
    "t.default": _t,
    "relu.default": _unary("relu"),
    "silu.default": _unary("silu"),
    "tanh.default": _unary("tanh"),
    "sigmoid.default": _unary("sigmoid"),
    "exp.default": _unary("exp"),
    "log.default": _unary("log"),
    "sqrt.default": _unary("sqrt"),
    "rsqrt.default": _unary("rsqrt"),
    "abs.default": _unary("abs"),
    "pow.Tensor_Scalar": _pow,
    "square.default": lambda t, node, out, x: _pow(t, node, out, x, 2),
    # As exp(x) - 1 and log(1 + x): a few ulps off torch's near 0.
    "expm1.default": lambda t, node, out, x: t.f.add(
        t.f.exp(_float(t, x, "expm1")), _scalar(t, -1.0, x.type.dtype)),
    "log1p.default": lambda t, node, out, x: t.f.log(
        t.f.add(_float(t, x, "log1p"), _scalar(t, 1.0, x.type.dtype))),
    "clamp.default": _clamp,
    "clamp_min.default": _clamp_min,
    "clamp_max.default": _clamp_max,
    "gelu.default": _gelu,
    "dropout.default": _dropout,
    "view.default": _view,
    "reshape.default": _view,
    "_unsafe_view.default": _view,
    "flatten.using_ints": _view,
    "unsqueeze.default": _view,
    "squeeze.default": _view,
    "squeeze.dim": _view,
    "squeeze.dims": _view,
    "transpose.int": _transpose,
    "permute.default": _permute,
    "expand.default": _expand,
    "broadcast_to.default": _expand,
    "broadcast_tensors.default": _broadcast_tensors,
    "cat.default": _cat,
    "concat.default": _cat,
    "split.Tensor": _split,
    "index.Tensor": _index,
    "gather.default": _gather,
    "chunk.default": _chunk,
    "split_with_sizes.default": _split_with_sizes,
    "unbind.int": _unbind,
    "slice.Tensor": _slice,
    "narrow.default": _narrow,
    "select.int": _select,
    "index_select.default": _index_select,
    "conv2d.default": _conv2d,
    "pad.default": _pad,
    "constant_pad_nd.default": _constant_pad_nd,
    "to.dtype": _to,
    "to.dtype_layout": _to,
    "to.device": _to,
    "_to_copy.default": _to,
    "type_as.default": _to,
    "scaled_dot_product_attention.default": _sdpa,
    "cross_entropy_loss.default": _cross_entropy,
    "mse_loss.default": _mse_loss,
    "sum.dim_IntList": _reduce("reduce_sum"),
    "sum.default": _reduce("reduce_sum"),
    "mean.dim": _reduce("reduce_mean"),
    "mean.default": _reduce("reduce_mean"),
    "var.correction": _var,
    "var.dim": _var,
    "softmax.int": _softmax,
    "_softmax.default": _softmax,
    "clone.default": _identity,
    "contiguous.default": _identity,
    "alias.default": _identity,
    "lift_fresh_copy.default": _identity,
    "detach.default": _detach,
    "detach_.default": _detach,
}


def _decompose_unhandled(exported):
    """The program with every op the table does not handle but PyTorch's
    decompositions break down into ATen ops (glu, hardswish, and the
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
        aten.leaky_relu, aten.hardtanh, aten.elu, aten.softplus,
        aten.hardsigmoid, aten.mish]))
    table = {op: fn for op, fn in decompositions.items()
             if isinstance(op, torch._ops.OpOverload) and name(op) not in _OPS}
    if not any(op in table for op in used):
        return exported
    return exported.run_decompositions(table)


def from_torch(module, example_inputs: Sequence, *, name: Optional[str] = None
               ) -> Model:
    """The `fsdp.model` of `module` called on `example_inputs` (one rank's
    micro-batch); see the module docstring. Raises UnsupportedModelError
    listing every construct it cannot translate."""
    import torch
    try:
        exported = _decompose_unhandled(
            torch.export.export(module, tuple(example_inputs)))
        unflat = torch.export.unflatten(exported)
    except Exception as e:  # torch.export's refusal, said as such
        kind = type(e).__name__
        raise UnsupportedModelError(
            f"torch.export cannot trace the model ({kind}): "
            + str(e).strip().splitlines()[0]
            + "\n  data-dependent control flow and dynamic shapes are not "
              "supported; the inputs' shapes are fixed") from None
    imp = _Importer(module, exported, unflat)
    imp.translate_root()
    for fqn, ir in imp.modules.items():  # (else explained by the issues)
        if ir.fwd is not None and ir.fwd.results is None and not imp.issues:
            imp.issues.append(_Issue(fqn, "its forward was not completed", ""))
    if imp.issues:
        raise UnsupportedModelError(
            f"cannot import {type(module).__name__}: {len(imp.issues)} "
            "unsupported construct(s):\n" + "\n".join(map(str, imp.issues)))
    root = imp.modules[""]
    results = root.fwd.results if root.fwd is not None else []
    if not results or results[0].shape != () or results[0].dtype not in (
            "f32", "bf16", "f16"):
        raise UnsupportedModelError(
            f"the forward of {type(module).__name__} must return the scalar "
            f"loss first; it returns {[str(t) for t in results]}")
    model_name = name or type(module).__name__.lower()
    return Model(model_name, root, header=[
        f"Imported from the torch module {type(module).__module__}."
        f"{type(module).__name__} by fsdp_mlir.from_torch (torch.export)."])


def save_weights(module, model: Model, path) -> None:
    """The module's parameters and persistent buffers (by fully-qualified
    name) as a full checkpoint at step 0, which `fsdp-run --load` reads."""
    import torch
    from safetensors.torch import save_file
    tensors = {}
    for name, p in module.named_parameters():
        tensors[name] = p.detach().to(torch.float32).contiguous().clone()
    modules = dict(module.named_modules())
    for name, b in module.named_buffers():
        owner, _, leaf = name.rpartition(".")
        if leaf not in modules[owner]._non_persistent_buffers_set:
            tensors[name] = b.detach().contiguous().clone()
    save_file(tensors, str(path), metadata={
        "format": "fsdp-mlir-full", "model": model.name, "step_count": "0",
        "optimizer": "none"})
