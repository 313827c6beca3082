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

ATen ops map onto `nn` ops (linear, layer_norm, embedding, SDPA → the fused
nn.attention, ...). Anything else — an op, a keyword the op table does not
handle, a submodule returning several values — is collected over the whole
model and reported once, each with its module path and the user's source
line (UnsupportedModelError); torch.export's own refusals (data-dependent
control flow, dynamic shapes) are reported as such.

`save_weights(module, model, path)` writes the module's current parameters
and buffers as a full checkpoint that `fsdp-run --load` starts from, so the
first loss equals torch's.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

from .ir import Init, Model, Module, TensorType, Value

__all__ = ["from_torch", "save_weights", "UnsupportedModelError"]


class UnsupportedModelError(ValueError):
    """The model uses what the importer cannot translate; the message lists
    every occurrence."""


_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16",
           "int64": "i64", "int32": "i32"}


def _dtype(torch_dtype) -> str:
    name = str(torch_dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise UnsupportedModelError(f"dtype {name} is not supported")
    return _DTYPES[name]


def _tensor_type(fake) -> TensorType:
    return TensorType(tuple(int(d) for d in fake.shape), _dtype(fake.dtype))


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


class _Translator:
    """One submodule's graph into its forward."""

    def __init__(self, importer: "_Importer", fqn: str, graph):
        self.imp, self.fqn, self.graph = importer, fqn, graph
        self.ir = importer.modules[fqn]
        self.values: Dict[object, object] = {}

    def run(self) -> None:
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        types = {n.name: _tensor_type(n.meta["val"]) for n in placeholders}
        f = self.ir.forward(**types)
        for node, arg in zip(placeholders, f.args):
            self.values[node] = arg
        self.f = f
        for node in self.graph.nodes:
            if node.op in ("placeholder",):
                continue
            try:
                self.visit(node)
            except _Unsupported as e:
                self.imp.issues.append(
                    _Issue(self.fqn, str(e), _source_line(node)))
                self.values[node] = _POISON
            except _Poisoned:
                # Depends on an unsupported node: reported there.
                self.values[node] = _POISON

    def arg(self, a):
        if hasattr(a, "op"):  # an fx Node
            value = self.values[a]
            if value is _POISON:
                raise _Poisoned()
            return value
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        return a

    def visit(self, node) -> None:
        if node.op == "get_attr":
            self.values[node] = self.imp.read_state(self.f, self.fqn,
                                                    node.target)
        elif node.op == "call_module":
            callee = self.imp.modules[_join(self.fqn, node.target)]
            if callee.fwd is None:
                self.imp.translate(_join(self.fqn, node.target))
            if callee.fwd is None or callee.fwd.results is None:
                raise _Poisoned()  # its own issues say why
            if len(callee.fwd.results) != 1:
                raise _Unsupported(f"submodule '{node.target}' returns "
                                   f"{len(callee.fwd.results)} values; calls "
                                   "of multi-result forwards are not "
                                   "supported")
            self.values[node] = self.f.call(
                callee, *[self.arg(a) for a in node.args])
        elif node.op == "call_function":
            self.values[node] = self.call_function(node)
        elif node.op == "output":
            outs = node.args[0]
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            self.f.ret(*[self.arg(o) for o in outs])
        else:
            raise _Unsupported(f"fx node kind '{node.op}'")

    def call_function(self, node):
        if node.target is operator.getitem:
            seq, index = node.args
            return self.arg(seq)[index]
        name = getattr(node.target, "__name__", str(node.target))
        handler = _OPS.get(name)
        if handler is None:  # reported even after an unsupported input
            raise _Unsupported(f"unsupported op {name}")
        args = [self.arg(a) for a in node.args]
        kwargs = {k: self.arg(v) for k, v in node.kwargs.items()}
        out = node.meta.get("val")
        return handler(self.f, node, out, *args, **kwargs)


class _Unsupported(Exception):
    pass


class _Poisoned(Exception):
    """An input of the node could not be translated."""


_POISON = object()


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


class _Importer:
    def __init__(self, module, exported, unflat):
        import torch
        self.torch = torch
        self.module = module
        self.originals = dict(module.named_modules())
        self.graphs = {fqn: m.graph for fqn, m in unflat.named_modules()
                       if hasattr(m, "graph")}
        self.issues: List[_Issue] = []
        self.modules: Dict[str, Module] = {}
        self.state_names = {}
        for name, p in module.named_parameters():
            self.state_names.setdefault(id(p), name)
        for name, b in module.named_buffers():
            self.state_names.setdefault(id(b), name)
        self.build_tree()

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

    def read_state(self, f, fqn: str, target: str) -> Value:
        """fsdp.get_param / get_buffer of `target` (relative to `fqn`)."""
        owner_path, _, leaf = _join(fqn, target).rpartition(".")
        obj = getattr(self.originals[owner_path], leaf)
        canonical = self.state_names.get(id(obj))
        if canonical is None:
            raise _Unsupported(f"'{target}' is a constant tensor attribute, "
                               "not a parameter or buffer")
        cowner, _, cleaf = canonical.rpartition(".")
        owner = self.modules[cowner]
        if not (cowner == fqn or cowner.startswith(fqn + ".") or fqn == ""):
            raise _Unsupported(
                f"reads '{canonical}', outside its own subtree (a parameter "
                "shared by sibling modules); read it in their common parent")
        if cleaf in owner.params:
            return f.get_param(owner.params[cleaf])
        return f.get_buffer(owner.buffers[cleaf])

    def translate(self, fqn: str) -> None:
        if self.modules[fqn].fwd is None:
            _Translator(self, fqn, self.graphs[fqn]).run()


# -- the op table: (forward builder, fx node, its FakeTensor, args...) ------
def _shape(out) -> List[int]:
    return [int(d) for d in out.shape]


def _linear(f, node, out, x, w, b=None):
    return f.linear(x, w, b)


def _layer_norm(f, node, out, x, shape, w=None, b=None, eps=1e-5,
                cudnn_enable=True):
    if len(shape) != 1:
        raise _Unsupported("layer_norm over more than the last dimension")
    return f.layer_norm(x, w, b, eps)


def _embedding(f, node, out, w, idx, padding_idx=-1, scale_grad=False,
               sparse=False):
    if padding_idx != -1 or scale_grad or sparse:
        raise _Unsupported("embedding with padding_idx, "
                           "scale_grad_by_freq or sparse")
    return f.embedding(idx, w)


def _binary(method):
    def build(f, node, out, a, b, alpha=1):
        if alpha != 1:
            raise _Unsupported(f"{method} with alpha={alpha}")
        if not isinstance(b, Value):
            if method == "mul":
                return f.scale(a, float(b))
            raise _Unsupported(f"{method} of a tensor and the scalar {b}")
        return getattr(f, method)(a, b)
    return build


def _div(f, node, out, a, b):
    if isinstance(b, Value):
        raise _Unsupported("div of two tensors")
    return f.scale(a, 1.0 / float(b))


def _t(f, node, out, x):
    return f.transpose(x, [1, 0]) if x.type.rank == 2 else x


def _gelu(f, node, out, x, approximate="none"):
    return f.gelu(x, approximate=approximate)


def _dropout(f, node, out, x, p, train):
    return f.dropout(x, p) if train else x


def _view(f, node, out, x, *shape):
    return f.reshape(x, _shape(out))


def _transpose(f, node, out, x, d0, d1):
    perm = list(range(x.type.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return f.transpose(x, perm)


def _permute(f, node, out, x, perm):
    return f.transpose(x, perm)


def _split(f, node, out, x, size, dim=0):
    dim %= x.type.rank
    n = x.type.shape[dim]
    sizes = [size] * (n // size) + ([n % size] if n % size else [])
    return f.split(x, sizes, dim)


def _split_with_sizes(f, node, out, x, sizes, dim=0):
    return f.split(x, list(sizes), dim)


def _sdpa(f, node, out, q, k, v, attn_mask=None, dropout_p=0.0,
          is_causal=False, scale=None, enable_gqa=False):
    """[B, H, T, D] heads → nn.attention on [B, T, H*D] and back."""
    if attn_mask is not None or dropout_p or scale is not None:
        raise _Unsupported("scaled_dot_product_attention with a mask, "
                           "dropout or a custom scale")
    B, H, T, D = q.type.shape
    kv_heads = k.type.shape[1]

    def packed(t, heads):
        return f.reshape(f.transpose(t, [0, 2, 1, 3]), [B, T, heads * D])

    o = f.attention(packed(q, H), packed(k, kv_heads), packed(v, kv_heads),
                    H, num_kv_heads=kv_heads, causal=bool(is_causal))
    return f.transpose(f.reshape(o, [B, T, H, D]), [0, 2, 1, 3])


def _arange(f, node, out, *args, **kwargs):
    start, end = (0, args[0]) if len(args) == 1 else args[:2]
    if start != 0 or len(args) > 2:
        raise _Unsupported("arange with a start or step")
    return f.arange(int(end), dtype=_dtype(out.dtype))


def _cross_entropy(f, node, out, logits, targets, weight=None, reduction=1,
                   ignore_index=-100, label_smoothing=0.0):
    if weight is not None or label_smoothing:
        raise _Unsupported("cross_entropy with class weights or label "
                           "smoothing")
    return f.cross_entropy(logits, targets,
                           {0: "none", 1: "mean", 2: "sum"}[reduction])


def _mse_loss(f, node, out, x, target, reduction=1):
    return f.mse_loss(x, target, {0: "none", 1: "mean", 2: "sum"}[reduction])


def _reduce(method):
    def build(f, node, out, x, dims=None, keepdim=False, dtype=None):
        if dtype is not None:
            raise _Unsupported(f"{method} with a dtype")
        dims = list(range(x.type.rank)) if dims is None else list(dims)
        return getattr(f, method)(x, dims, keepdim)
    return build


def _identity(f, node, out, x, *args, **kwargs):
    return x


def _broadcast_tensors(f, node, out, tensors):
    if len({t.type.shape for t in tensors}) != 1:
        raise _Unsupported("broadcast_tensors of different shapes")
    return list(tensors)


def _softmax(f, node, out, x, dim, *rest):
    return f.softmax(x, dim)


def _matmul(f, node, out, a, b):
    return f.matmul(a, b)


def _unary(method):
    def build(f, node, out, x):
        return getattr(f, method)(x)
    return build


_OPS: Dict[str, Callable] = {
    "linear.default": _linear,
    "layer_norm.default": _layer_norm,
    "embedding.default": _embedding,
    "add.Tensor": _binary("add"),
    "sub.Tensor": _binary("sub"),
    "mul.Tensor": _binary("mul"),
    "div.Tensor": _div,
    "t.default": _t,
    "relu.default": _unary("relu"),
    "silu.default": _unary("silu"),
    "gelu.default": _gelu,
    "dropout.default": _dropout,
    "view.default": _view,
    "reshape.default": _view,
    "_unsafe_view.default": _view,
    "flatten.using_ints": _view,
    "transpose.int": _transpose,
    "permute.default": _permute,
    "split.Tensor": _split,
    "split_with_sizes.default": _split_with_sizes,
    "scaled_dot_product_attention.default": _sdpa,
    "arange.default": _arange,
    "arange.start": _arange,
    "cross_entropy_loss.default": _cross_entropy,
    "mse_loss.default": _mse_loss,
    "sum.dim_IntList": _reduce("reduce_sum"),
    "sum.default": _reduce("reduce_sum"),
    "mean.dim": _reduce("reduce_mean"),
    "mean.default": _reduce("reduce_mean"),
    "softmax.int": _softmax,
    "_softmax.default": _softmax,
    "matmul.default": _matmul,
    "broadcast_tensors.default": _broadcast_tensors,
    "clone.default": _identity,
    "contiguous.default": _identity,
    "alias.default": _identity,
}


def from_torch(module, example_inputs: Sequence, *, name: Optional[str] = None
               ) -> Model:
    """The `fsdp.model` of `module` called on `example_inputs` (one rank's
    micro-batch); see the module docstring. Raises UnsupportedModelError
    listing every construct it cannot translate."""
    import torch
    try:
        exported = torch.export.export(module, tuple(example_inputs))
        unflat = torch.export.unflatten(exported)
    except Exception as e:  # torch.export's refusal, said as such
        kind = type(e).__name__
        raise UnsupportedModelError(
            f"torch.export cannot trace the model ({kind}): "
            + str(e).strip().splitlines()[0]
            + "\n  data-dependent control flow and dynamic shapes are not "
              "supported; the inputs' shapes are fixed") from None
    imp = _Importer(module, exported, unflat)
    imp.translate("")
    for fqn, ir in imp.modules.items():
        if ir.fwd is not None and ir.fwd.results is None and not any(
                i.module == fqn for i in imp.issues):
            imp.issues.append(_Issue(fqn, "its forward was not completed", ""))
    if imp.issues:
        raise UnsupportedModelError(
            f"cannot import {type(module).__name__}: {len(imp.issues)} "
            "unsupported construct(s):\n" + "\n".join(map(str, imp.issues)))
    root = imp.modules[""]
    results = root.fwd.results
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
