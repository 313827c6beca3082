"""`Forward`: one module's forward, written op by op. Its methods are the
fsdp ops (`get_param`, `call`, `ret`, ...) and the `nn` ops, each inferring
its result type the way the dialect does; the body is kept as lines of
text and printed inside its module (model.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, Union

from .types import TensorType, Value, fmt_float, symbol, tensor

if TYPE_CHECKING:
    from .model import Buffer, Module, Param


class RngIds:
    """The rng_ids of the random sites (dropouts, draws) left without one,
    given as the model is printed: 1, 2, ... in print order, skipping the
    ids given explicitly (`taken`)."""

    def __init__(self, taken):
        self.taken = set(taken)
        self.last = 0

    def next(self) -> int:
        self.last += 1
        while self.last in self.taken:
            self.last += 1
        return self.last


class _RandomSite:
    """A body line of a random site (a dropout, a draw) without an rng_id:
    its text around the id."""

    def __init__(self, head: str, tail: str):
        self.head, self.tail = head, tail

    def text(self, ids: RngIds) -> str:
        return f"{self.head}{ids.next()}{self.tail}"


def per_dim(v, spatial: int) -> List[int]:
    """A per-spatial-dim list of a scalar or a list; one entry repeats over
    the dims (PyTorch's convention for stride, padding, dilation)."""
    v = [int(e) for e in v] if isinstance(v, (list, tuple)) else [int(v)]
    return v * spatial if len(v) == 1 else v


def _i64s(v) -> str:
    return "array<i64: " + ", ".join(map(str, v)) + ">"


def _conv_spatial(op: str, x: Value, w: Value) -> int:
    """The spatial dims of a 1-D or 2-D convolution of x by w."""
    spatial = len(x.type.shape) - 2
    if spatial not in (1, 2) or len(w.type.shape) != spatial + 2:
        raise ValueError(f"{op}: input {x.type}, weight {w.type}")
    return spatial


def _conv_attrs(stride, pad_low, pad_high, dilation, groups: int) -> str:
    return (f"stride = {_i64s(stride)}, pad_low = {_i64s(pad_low)}, "
            f"pad_high = {_i64s(pad_high)}, dilation = {_i64s(dilation)}, "
            f"groups = {groups} : i64")


class Forward:
    """The forward of a module: append ops, then `ret`."""

    def __init__(self, owner: Module, args: List[Tuple[str, TensorType]]):
        self.owner = owner
        self.args = [Value("%" + n, t) for n, t in args]
        self.body: List[Union[str, _RandomSite]] = []
        self.rng_ids: List[int] = []  # the random sites' explicit ids
        self.results: Optional[List[TensorType]] = None
        self._names = {v.name for v in self.args}
        self._counter = 0
        # (file, line) of the source being translated, or None: the
        # location of the ops whose run-time errors name it (id_range).
        self.source: Optional[Tuple[str, int]] = None

    # -- values ----------------------------------------------------------
    def _fresh(self, name: Optional[str]) -> str:
        if name is None:
            while f"%{self._counter}" in self._names:
                self._counter += 1
            name = str(self._counter)
            self._counter += 1
        full = "%" + name
        if full in self._names:
            raise ValueError(f"SSA name {full} defined twice")
        self._names.add(full)
        return full

    def _emit(self, text: str, types: Sequence[TensorType],
              names: Union[None, str, Sequence[Optional[str]]]) -> List[Value]:
        if names is None or isinstance(names, str):
            names = [names] + [None] * (len(types) - 1)
        vals = [Value(self._fresh(n), t) for n, t in zip(names, types)]
        self.body.append(", ".join(v.name for v in vals) + " = " + text)
        return vals

    def comment(self, text: str) -> None:
        self.body.append("// " + text)

    def op(self, name: str, operands: Sequence[Value],
           results: Sequence[TensorType], attrs: str = "",
           form: str = "functional",
           names: Union[None, str, Sequence[Optional[str]]] = None) -> List[Value]:
        """Any op. `form`: "functional" (`: (a, b) -> r`), "same"
        (`: type` of the single operand) or "to" (`: t1 to t2`)."""
        ops = ", ".join(v.name for v in operands)
        attr = f" {{{attrs}}}" if attrs else ""
        if form == "functional":
            ins = ", ".join(str(v.type) for v in operands)
            outs = ", ".join(str(t) for t in results)
            if len(results) != 1:
                outs = f"({outs})"
            sig = f"({ins}) -> {outs}"
        elif form == "same":
            sig = str(operands[0].type)
        elif form == "to":
            sig = f"{operands[0].type} to {results[0]}"
        else:
            raise ValueError(f"unknown form {form!r}")
        return self._emit(f"{name} {ops}{attr} : {sig}", results, names)

    # -- fsdp ops --------------------------------------------------------
    def get_param(self, p: Param, name: Optional[str] = None) -> Value:
        path = p.owner.path_from(self.owner) + [p.name]
        ref = "::".join(symbol(n) for n in path)
        return self._emit(f"fsdp.get_param {ref} : {p.type}", [p.type], name)[0]

    def _state_ref(self, s: Union[Param, "Buffer"]) -> str:
        path = s.owner.path_from(self.owner) + [s.name]
        return "::".join(symbol(n) for n in path)

    def get_buffer(self, b: Buffer, name: Optional[str] = None) -> Value:
        return self._emit(f"fsdp.get_buffer {self._state_ref(b)} : {b.type}",
                          [b.type], name)[0]

    def set_buffer(self, b: Buffer, value: Value) -> None:
        """Stores `value` in buffer `b` (e.g. BatchNorm's new statistics)."""
        if value.type != b.type:
            raise ValueError(f"set_buffer {b.name}: {value.type} != {b.type}")
        self.body.append(f"fsdp.set_buffer {self._state_ref(b)}, {value.name}"
                         f" : {value.type}")

    def call(self, m: Module, *args: Value, name: Optional[str] = None) -> Value:
        """fsdp.call of a forward returning one value."""
        returned = self._callee(m, args).results
        if len(returned) != 1:
            raise ValueError(f"module {m.name!r} returns "
                             f"{len(returned)} values: call_results")
        return self.call_results(m, *args, names=name)[0]

    @staticmethod
    def _callee(m: Module, args: Sequence[Value]) -> "Forward":
        """The finished forward of `m` taking the types of `args`."""
        callee = m.forward_taking([a.type for a in args])
        if callee is None:
            raise ValueError(f"call of {m.name!r}: no forward takes argument "
                             f"types {[str(a.type) for a in args]}; its "
                             "forwards take " + "; ".join(
                                 str([str(a.type) for a in f.args])
                                 for f in m.forwards))
        if callee.results is None:
            raise ValueError(f"module {m.name!r} has no finished forward")
        return callee

    def call_results(self, m: Module, *args: Value,
                     names=None) -> List[Value]:
        """fsdp.call of the forward of `m` taking the types of `args`, all
        its results."""
        callee = self._callee(m, args)
        ref = "::".join(symbol(n) for n in m.path_from(self.owner))
        ins = ", ".join(str(a.type) for a in args)
        res = list(callee.results)
        outs = str(res[0]) if len(res) == 1 else \
            "(" + ", ".join(map(str, res)) + ")"
        text = (f"fsdp.call {ref}({', '.join(a.name for a in args)}) : "
                f"({ins}) -> {outs}")
        return self._emit(text, res, names)

    def arange(self, n: int, dtype: str = "i64",
               name: Optional[str] = None) -> Value:
        """Positions 0..n-1 as an arith.constant."""
        t = tensor(n, dtype=dtype)
        vals = ", ".join(str(i) for i in range(n))
        return self._emit(f"arith.constant dense<[{vals}]> : {t}", [t], name)[0]

    def increment(self, x: Value, by: int = 1,
                  name: Optional[str] = None) -> Value:
        """x + by on an integer tensor (a counter such as BatchNorm's
        num_batches_tracked; lowered as an in-place update when x is used
        only here)."""
        if x.type.dtype not in ("i32", "i64"):
            raise ValueError(f"increment: {x.type} is not an integer tensor")
        c = self._emit(f"arith.constant dense<{int(by)}> : {x.type}",
                       [x.type], None)[0]
        return self._emit(f"arith.addi {x.name}, {c.name} : {x.type}",
                          [x.type], name)[0]

    def ret(self, *values: Value, names: Optional[List[str]] = None) -> None:
        """Returns `values`; the root's forward returns the loss first and
        may name every output (`names`), which an eval program returns
        (e.g. the logits a sampler reads)."""
        if self.results is not None:
            raise ValueError("forward already returned")
        if names is not None and len(names) != len(values):
            raise ValueError(f"ret: {len(names)} names for {len(values)} "
                             "values")
        self.results = [v.type for v in values]
        attr = ""
        if names is not None:
            attr = "{names = [" + ", ".join(f'"{n}"' for n in names) + "]} "
        if values:
            self.body.append("fsdp.return " + attr +
                             ", ".join(v.name for v in values)
                             + " : " + ", ".join(str(v.type) for v in values))
        else:
            self.body.append("fsdp.return")

    # -- a hand-written backward (torch.autograd.Function) ---------------
    def region(self, arg_types: Sequence[TensorType]) -> "Forward":
        """An empty region taking `arg_types`, its ops written like a
        forward's; its SSA names are unique in this forward too."""
        inner = Forward(self.owner, [])
        inner._names = self._names  # shared: one namespace for both
        inner.args = [Value(inner._fresh(None), t) for t in arg_types]
        return inner

    def custom_vjp(self, outputs: Sequence[Value], inputs: Sequence[Value],
                   saved: Sequence[Value], backward: "Forward",
                   cotangents: Sequence[Value]) -> List[Value]:
        """nn.custom_vjp: `outputs`, whose gradient reaches `inputs` as
        `backward` (a `region` taking the saved tensors and the outputs'
        cotangents) computes `cotangents`."""
        if any(not isinstance(l, str) for l in backward.body):
            raise ValueError("custom_vjp: its backward draws random numbers")
        text = "nn.custom_vjp " + ", ".join(o.name for o in outputs)
        for word, group in (("inputs", inputs), ("saved", saved)):
            if group:
                text += (f" {word}(" + ", ".join(v.name for v in group) +
                         " : " + ", ".join(str(v.type) for v in group) + ")")
        text += " : " + ", ".join(str(o.type) for o in outputs) + " {"
        results = self._emit(text, [o.type for o in outputs], None)
        self.body.append("^bb0(" + ", ".join(f"{a.name}: {a.type}"
                                             for a in backward.args) + "):")
        self.body += ["  " + l for l in backward.body]
        yielded = "nn.yield"
        if cotangents:
            yielded += (" " + ", ".join(c.name for c in cotangents) + " : " +
                        ", ".join(str(c.type) for c in cotangents))
        self.body += ["  " + yielded, "}"]
        return results

    def lines(self, ids: Optional[RngIds] = None) -> List[str]:
        """The forward's text; random sites without an rng_id take theirs
        from `ids` (by default numbered in this forward alone)."""
        if ids is None:
            ids = RngIds(self.rng_ids)
        if self.results is None:
            raise ValueError(f"forward of {self.owner.name!r} has no return")
        args = ", ".join(f"{v.name}: {v.type}" for v in self.args)
        res = ", ".join(str(t) for t in self.results)
        if len(self.results) != 1:
            res = f"({res})"
        return ([f"fsdp.forward ({args}) -> {res} {{"]
                + ["  " + (l if isinstance(l, str) else l.text(ids))
                   for l in self.body] + ["}"])

    # -- nn ops ----------------------------------------------------------
    def linear(self, x: Value, w: Value, b: Optional[Value] = None,
               name: Optional[str] = None) -> Value:
        if x.type.shape[-1] != w.type.shape[1]:
            raise ValueError(f"linear: {x.type} by weight {w.type}")
        out = x.type.with_shape(x.type.shape[:-1] + (w.type.shape[0],))
        ops = [x, w] + ([b] if b is not None else [])
        return self.op("nn.linear", ops, [out], names=name)[0]

    def conv(self, x: Value, w: Value, b: Optional[Value] = None,
             stride: Sequence[int] = (1,), pad_low: Sequence[int] = (0,),
             pad_high: Optional[Sequence[int]] = None,
             dilation: Sequence[int] = (1,), groups: int = 1,
             name: Optional[str] = None) -> Value:
        """F.conv1d / F.conv2d: x [N, C, spatial...], w [O, C/groups, k...].
        Per-dim lists of length 1 repeat over the spatial dims; pad_high
        defaults to pad_low (it differs for padding='same' with an even
        receptive field)."""
        spatial = _conv_spatial("conv", x, w)
        stride, pad_low, dilation = (per_dim(stride, spatial),
                                     per_dim(pad_low, spatial),
                                     per_dim(dilation, spatial))
        pad_high = pad_low if pad_high is None else per_dim(pad_high,
                                                             spatial)
        if w.type.shape[1] * groups != x.type.shape[1]:
            raise ValueError(f"conv: input {x.type}, weight {w.type} in "
                             f"{groups} group(s)")
        sizes = [(x.type.shape[2 + d] + pad_low[d] + pad_high[d]
                  - dilation[d] * (w.type.shape[2 + d] - 1) - 1)
                 // stride[d] + 1 for d in range(spatial)]
        out = x.type.with_shape((x.type.shape[0], w.type.shape[0], *sizes))
        ops = [x, w] + ([b] if b is not None else [])
        return self.op("nn.conv", ops, [out],
                       _conv_attrs(stride, pad_low, pad_high, dilation,
                                   groups), names=name)[0]

    def conv_transpose(self, x: Value, w: Value, stride: Sequence[int] = (1,),
                       padding: Sequence[int] = (0,),
                       output_padding: Sequence[int] = (0,),
                       dilation: Sequence[int] = (1,), groups: int = 1,
                       name: Optional[str] = None) -> Value:
        """F.conv_transpose1d / 2d without the bias: x [N, C_in,
        spatial...], w [C_in, C_out/groups, k...] (torch's layout), each
        output size (in - 1)·stride - 2·padding + dilation·(k - 1) +
        output_padding + 1. nn.conv_transpose is the adjoint of the
        convolution of its result; the pad after is chosen so that this
        convolution has exactly the input's windows (torch's padding when
        output_padding < stride)."""
        spatial = _conv_spatial("conv_transpose", x, w)
        stride, padding, extra, dilation = (
            per_dim(stride, spatial), per_dim(padding, spatial),
            per_dim(output_padding, spatial), per_dim(dilation, spatial))
        if x.type.shape[1] != w.type.shape[0] or x.type.shape[1] % groups:
            raise ValueError(f"conv_transpose: input {x.type}, weight "
                             f"{w.type} in {groups} group(s)")
        sizes, pad_high = [], []
        for d in range(spatial):
            size = ((x.type.shape[2 + d] - 1) * stride[d] - 2 * padding[d]
                    + dilation[d] * (w.type.shape[2 + d] - 1) + extra[d] + 1)
            # The convolution of the result reads rows padding + 0, stride,
            # ...: it has the input's count of windows when the rows past
            # the last window, output_padding + pad after - padding, are
            # fewer than a stride.
            high = (padding[d] if extra[d] < stride[d]
                    else padding[d] - extra[d])
            if high < 0:
                raise ValueError(
                    f"conv_transpose: spatial dim {d}: output_padding "
                    f"{extra[d]} is at least the stride {stride[d]} and "
                    f"above the padding {padding[d]}: the rows it adds lie "
                    "past every window of the convolution it transposes")
            if size < 1:
                raise ValueError(
                    f"conv_transpose: spatial dim {d}: the output size "
                    f"{size} is not positive (padding {padding[d]})")
            sizes.append(size)
            pad_high.append(high)
        out = x.type.with_shape((x.type.shape[0], w.type.shape[1] * groups,
                                 *sizes))
        return self.op("nn.conv_transpose", [x, w], [out],
                       _conv_attrs(stride, padding, pad_high, dilation,
                                   groups), names=name)[0]

    def max_pool(self, x: Value, kernel: Sequence[int],
                 stride: Sequence[int], padding: Sequence[int] = (0,),
                 dilation: Sequence[int] = (1,),
                 name: Optional[str] = None) -> Value:
        """F.max_pool1d / F.max_pool2d (ceil_mode off) of x [N, C,
        spatial...]; per-dim lists of length 1 repeat over the spatial
        dims."""
        spatial = len(x.type.shape) - 2
        if spatial not in (1, 2):
            raise ValueError(f"max_pool: input {x.type}")
        kernel, stride, padding, dilation = (
            per_dim(kernel, spatial), per_dim(stride, spatial),
            per_dim(padding, spatial), per_dim(dilation, spatial))
        sizes = [(x.type.shape[2 + d] + 2 * padding[d]
                  - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1
                 for d in range(spatial)]
        out = x.type.with_shape(tuple(x.type.shape[:2]) + tuple(sizes))
        attrs = (f"kernel = {_i64s(kernel)}, stride = {_i64s(stride)}, "
                 f"padding = {_i64s(padding)}, dilation = {_i64s(dilation)}")
        return self.op("nn.max_pool", [x], [out], attrs, names=name)[0]

    def matmul(self, a: Value, b: Value, transpose_lhs: bool = False,
               transpose_rhs: bool = False, name: Optional[str] = None) -> Value:
        sa, sb = list(a.type.shape), list(b.type.shape)
        if transpose_lhs:
            sa[-1], sa[-2] = sa[-2], sa[-1]
        if transpose_rhs:
            sb[-1], sb[-2] = sb[-2], sb[-1]
        if sa[-1] != sb[-2]:
            raise ValueError(f"matmul: {a.type} by {b.type}")
        batch = _broadcast(sa[:-2], sb[:-2])
        out = a.type.with_shape(batch + [sa[-2], sb[-1]])
        flags = [f for f, on in (("transpose_lhs", transpose_lhs),
                                 ("transpose_rhs", transpose_rhs)) if on]
        return self.op("nn.matmul", [a, b], [out], ", ".join(flags),
                       names=name)[0]

    def _binary(self, op: str, a: Value, b: Value, name: Optional[str]) -> Value:
        out = a.type.with_shape(_broadcast(a.type.shape, b.type.shape))
        return self.op(op, [a, b], [out], names=name)[0]

    def add(self, a: Value, b: Value, name: Optional[str] = None) -> Value:
        return self._binary("nn.add", a, b, name)

    def sub(self, a: Value, b: Value, name: Optional[str] = None) -> Value:
        return self._binary("nn.sub", a, b, name)

    def mul(self, a: Value, b: Value, name: Optional[str] = None) -> Value:
        return self._binary("nn.mul", a, b, name)

    def scale(self, x: Value, factor: float, name: Optional[str] = None) -> Value:
        return self.op("nn.scale", [x], [x.type],
                       f"factor = {fmt_float(factor)} : f64", "same", name)[0]

    def div(self, a: Value, b: Value, name: Optional[str] = None) -> Value:
        return self._binary("nn.div", a, b, name)

    def fmod(self, a: Value, b: Value, name: Optional[str] = None) -> Value:
        """torch.fmod: a − trunc(a / b)·b, exact, with a's sign."""
        return self._binary("nn.fmod", a, b, name)

    def maximum(self, a: Value, b: Value, name: Optional[str] = None) -> Value:
        return self._binary("nn.maximum", a, b, name)

    def minimum(self, a: Value, b: Value, name: Optional[str] = None) -> Value:
        return self._binary("nn.minimum", a, b, name)

    def keep(self, a: Value, mask: Value, name: Optional[str] = None) -> Value:
        """a where mask != 0, else exactly 0 (torch.where's branches)."""
        return self._binary("nn.keep", a, mask, name)

    def compare(self, op: str, a: Value, b: Value,
                name: Optional[str] = None) -> Value:
        """lt, le, gt, ge, eq or ne: a mask of 1 and 0 in a's type."""
        if op not in ("lt", "le", "gt", "ge", "eq", "ne"):
            raise ValueError(f"unknown comparison {op}")
        return self._binary("nn." + op, a, b, name)

    def _math(self, op: str, x: Value, attrs: str = "",
              name: Optional[str] = None) -> Value:
        return self.op(f"nn.{op}", [x], [x.type], attrs, "same", name)[0]

    def tanh(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("tanh", x, name=name)

    def sigmoid(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("sigmoid", x, name=name)

    def exp(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("exp", x, name=name)

    def log(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("log", x, name=name)

    def sqrt(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("sqrt", x, name=name)

    def rsqrt(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("rsqrt", x, name=name)

    def abs(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("abs", x, name=name)

    def erf(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("erf", x, name=name)

    def sin(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("sin", x, name=name)

    def cos(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("cos", x, name=name)

    def acos(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("acos", x, name=name)

    def asin(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("asin", x, name=name)

    def atan(self, x: Value, name: Optional[str] = None) -> Value:
        return self._math("atan", x, name=name)

    def pow(self, x: Value, exponent: float,
            name: Optional[str] = None) -> Value:
        """x ** exponent (a constant exponent)."""
        return self._math("pow", x, f"exponent = {_f64(exponent)}", name)

    def clamp(self, x: Value, min: Optional[float] = None,
              max: Optional[float] = None,
              name: Optional[str] = None) -> Value:
        """torch.clamp(x, min, max): at least one bound."""
        bounds = [f"{k} = {_f64(v)}" for k, v in (("min", min), ("max", max))
                  if v is not None]
        if not bounds:
            raise ValueError("clamp: give min, max or both")
        return self._math("clamp", x, ", ".join(bounds), name)

    def slice(self, x: Value, dim: int, start: int, end: int, step: int = 1,
              name: Optional[str] = None) -> Value:
        """x[..., start:end:step, ...] along `dim` (any element type)."""
        dim %= x.type.rank
        shape = list(x.type.shape)
        shape[dim] = -(-(end - start) // step)
        attrs = f"dim = {dim} : i64, start = {start} : i64, end = {end} : i64"
        if step != 1:
            attrs += f", step = {step} : i64"
        return self.op("nn.slice", [x], [x.type.with_shape(shape)], attrs,
                       names=name)[0]

    def pad(self, x: Value, dim: int, low: int, high: int, value: float = 0.0,
            name: Optional[str] = None) -> Value:
        """`low` and `high` elements of `value` around `dim` (F.pad with
        mode="constant" on one dimension; any element type)."""
        dim %= x.type.rank
        shape = list(x.type.shape)
        shape[dim] += low + high
        attrs = f"dim = {dim} : i64, low = {low} : i64, high = {high} : i64"
        if value:
            attrs += f", value = {_f64(value)}"
        return self.op("nn.pad", [x], [x.type.with_shape(shape)], attrs,
                       names=name)[0]

    def constant(self, t: TensorType, data: bytes,
                 name: Optional[str] = None) -> Value:
        """A compile-time tensor: `data` is its little-endian row-major
        bytes (exact, as MLIR's hex form of dense elements); one element's
        bytes when they all repeat it (MLIR's splat)."""
        size = len(data) // max(1, t.numel)
        if size and data == data[:size] * t.numel:
            data = data[:size]
        return self._emit(f'arith.constant dense<"0x{data.hex().upper()}"> : '
                          f"{t}", [t], name)[0]

    def relu(self, x: Value, name: Optional[str] = None) -> Value:
        return self.op("nn.relu", [x], [x.type], form="same", names=name)[0]

    def silu(self, x: Value, name: Optional[str] = None) -> Value:
        return self.op("nn.silu", [x], [x.type], form="same", names=name)[0]

    def gelu(self, x: Value, approximate: str = "none",
             name: Optional[str] = None) -> Value:
        attrs = ("" if approximate == "none"
                 else f"approximate = #nn.approximation<{approximate}>")
        return self.op("nn.gelu", [x], [x.type], attrs, "same", name)[0]

    def dropout(self, x: Value, p: float, rng_id: Optional[int] = None,
                name: Optional[str] = None) -> Value:
        """F.dropout(x, p, training=True): inverted dropout (kept elements
        scaled by 1/(1-p)). p == 0 emits nothing and returns x. The mask is
        keyed by the run's seed, the step and `rng_id`; left None, every
        site gets its own id when the Model is printed (1, 2, ... in print
        order, skipping explicit ids), which fsdp-build-train-step re-keys
        per inlined call and micro-batch."""
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability {p} not in [0, 1)")
        if p == 0.0:
            return x
        return self._random_site(
            lambda id: self.op("nn.dropout", [x], [x.type],
                               f"p = {_f64(p)}, rng_id = {id} : i64",
                               "same", name)[0], rng_id)

    def random(self, t: TensorType, distribution: str = "normal",
               a: float = 0.0, b: float = 1.0, rng_id: Optional[int] = None,
               name: Optional[str] = None) -> Value:
        """A tensor of type `t` drawn afresh each step: "uniform" in
        [a, b) (torch.rand) or "normal" with mean a and standard deviation
        b (torch.randn). Keyed, as dropout, by the run's seed, the step and
        `rng_id` (left None: numbered when printed); no gradient."""
        if distribution not in ("uniform", "normal"):
            raise ValueError(f"unknown distribution {distribution!r}")
        attrs = (f"a = {_f64(a)}, b = {_f64(b)}, distribution = "
                 f"#nn.distribution<{distribution}>")
        return self._random_site(
            lambda id: self._emit(f"nn.random {{{attrs}, rng_id = {id} : "
                                  f"i64}} : {t}", [t], name)[0], rng_id)

    def _random_site(self, emit, rng_id: Optional[int]) -> Value:
        """Emits a random site through `emit(id text)`: with its explicit
        id, or with one given when the model is printed."""
        if rng_id is not None:
            self.rng_ids.append(int(rng_id))
            return emit(str(int(rng_id)))
        y = emit(_ID)
        self.body[-1] = _RandomSite(*self.body[-1].split(_ID))
        return y

    def softmax(self, x: Value, dim: int = -1,
                name: Optional[str] = None) -> Value:
        dim = dim % x.type.rank
        return self.op("nn.softmax", [x], [x.type], f"dim = {dim} : i64",
                       "same", name)[0]

    def layer_norm(self, x: Value, weight: Optional[Value] = None,
                   bias: Optional[Value] = None, eps: float = 1e-5,
                   name: Optional[str] = None) -> Value:
        return self._norm("nn.layer_norm", x, weight, bias, eps, name)

    def rms_norm(self, x: Value, weight: Optional[Value] = None,
                 eps: float = 1e-6, name: Optional[str] = None) -> Value:
        return self._norm("nn.rms_norm", x, weight, None, eps, name)

    def batch_norm(self, x: Value, weight: Value, bias: Value,
                   running_mean: Value, running_var: Value,
                   eps: float = 1e-5, momentum: float = 0.1,
                   training: bool = False,
                   names: Optional[Sequence[Optional[str]]] = None
                   ) -> List[Value]:
        """F.batch_norm over channel dim 1: (y, new_running_mean,
        new_running_var); in eval mode the statistics come back unchanged."""
        attrs = []
        if eps != 1e-5:
            attrs.append(f"epsilon = {_f64(eps)}")
        if momentum != 0.1:
            attrs.append(f"momentum = {_f64(momentum)}")
        if training:
            attrs.append("training")
        c = x.type.shape[1]
        for v in (weight, bias, running_mean, running_var):
            if v.type.shape != (c,):
                raise ValueError(f"batch_norm: {v.type} for {c} channels")
        return self.op("nn.batch_norm",
                       [x, weight, bias, running_mean, running_var],
                       [x.type, running_mean.type, running_var.type],
                       ", ".join(attrs), names=names)

    def stop_gradient(self, x: Value, name: Optional[str] = None) -> Value:
        """Tensor.detach(): x, with no gradient flowing back through it."""
        return self._math("stop_gradient", x, name=name)

    def id_range(self, ids: Value, count: int, ignore: Optional[int] = None,
                 name: Optional[str] = None) -> Value:
        """ids, each required in [0, count) or equal to `ignore`: the runner
        checks a train-step input's ids as it loads a batch, and the step
        checks them where they stand; the error names the op's location,
        `self.source` (the user's file and line) where it is set."""
        attrs = f"count = {int(count)} : i64"
        if ignore is not None:
            attrs += f", ignore = {int(ignore)} : i64"
        ids = self._math("id_range", ids, attrs, name=name)
        if self.source is not None:
            path = self.source[0].replace("\\", "\\\\")
            path = path.replace('"', '\\"')
            self.body[-1] += f' loc("{path}":{int(self.source[1])}:0)'
        return ids

    def cast(self, x: Value, dtype: str, name: Optional[str] = None) -> Value:
        return self.op("nn.cast", [x], [TensorType(x.type.shape, dtype)],
                       form="to", names=name)[0]

    def transpose(self, x: Value, permutation: Sequence[int],
                  name: Optional[str] = None) -> Value:
        """Tensor.permute: result dim i is input dim permutation[i]."""
        perm = [p % x.type.rank for p in permutation]
        if sorted(perm) != list(range(x.type.rank)):
            raise ValueError(f"transpose: {list(permutation)} of {x.type}")
        out = x.type.with_shape([x.type.shape[p] for p in perm])
        return self.op("nn.transpose", [x], [out],
                       "permutation = array<i64: " + ", ".join(map(str, perm))
                       + ">", names=name)[0]

    def _norm(self, op, x, weight, bias, eps, name) -> Value:
        text = f"{op} {x.name}"
        ops = [x]
        if weight is not None:
            text += f" weight {weight.name}"
            ops.append(weight)
        if bias is not None:
            text += f" bias {bias.name}"
            ops.append(bias)
        ins = ", ".join(str(v.type) for v in ops)
        eps_attr = _f64(eps)
        text += f" {{epsilon = {eps_attr}}} : ({ins}) -> {x.type}"
        return self._emit(text, [x.type], name)[0]

    def embedding(self, ids: Value, table: Value,
                  padding_idx: Optional[int] = None,
                  name: Optional[str] = None) -> Value:
        """F.embedding; the `padding_idx` row gets no gradient."""
        out = table.type.with_shape(ids.type.shape + (table.type.shape[1],))
        attrs = "" if padding_idx is None else \
            f"padding_idx = {int(padding_idx)} : i64"
        return self.op("nn.embedding", [ids, table], [out], attrs,
                       names=name)[0]

    def attention(self, q: Value, k: Value, v: Value, num_heads: int,
                  num_kv_heads: Optional[int] = None, causal: bool = False,
                  scale: Optional[float] = None, bias: Optional[Value] = None,
                  name: Optional[str] = None) -> Value:
        """`bias` [1 or B, 1 or H, Tq, Tk] is added to the scaled scores."""
        attrs = (["causal"] if causal else []) + [f"num_heads = {num_heads} : i64"]
        if num_kv_heads is not None and num_kv_heads != num_heads:
            attrs.append(f"num_kv_heads = {num_kv_heads} : i64")
        if scale is not None:
            attrs.append(f"scale = {_f64(scale)}")
        if bias is None:
            return self.op("nn.attention", [q, k, v], [q.type],
                           ", ".join(attrs), names=name)[0]
        ins = ", ".join(str(x.type) for x in (q, k, v, bias))
        text = (f"nn.attention {q.name}, {k.name}, {v.name} bias {bias.name} "
                f"{{{', '.join(attrs)}}} : ({ins}) -> {q.type}")
        return self._emit(text, [q.type], name)[0]

    def rope(self, x: Value, num_heads: int, theta: float = 10000.0,
             name: Optional[str] = None) -> Value:
        return self.op("nn.rope", [x], [x.type],
                       f"num_heads = {num_heads} : i64, theta = {_f64(theta)}",
                       "same", name)[0]

    def reshape(self, x: Value, shape: Sequence[int],
                name: Optional[str] = None) -> Value:
        out = x.type.with_shape(shape)
        if out.numel != x.type.numel:
            raise ValueError(f"reshape: {x.type} to {out}")
        return self.op("nn.reshape", [x], [out], form="to", names=name)[0]

    def split(self, x: Value, sizes: Sequence[int], dim: int = -1,
              names: Optional[Sequence[Optional[str]]] = None) -> List[Value]:
        dim = dim % x.type.rank
        if sum(sizes) != x.type.shape[dim]:
            raise ValueError(f"split: sizes {list(sizes)} of {x.type}")
        outs = []
        for s in sizes:
            shape = list(x.type.shape)
            shape[dim] = s
            outs.append(x.type.with_shape(shape))
        attrs = (f"dim = {dim} : i64, sizes = array<i64: "
                 + ", ".join(map(str, sizes)) + ">")
        return self.op("nn.split", [x], outs, attrs, names=names)

    def broadcast(self, x: Value, shape: Sequence[int],
                  name: Optional[str] = None) -> Value:
        """Tensor.expand(shape): sizes of 1 and new leading dims repeated;
        the VJP sums the gradient back."""
        return self.op("nn.broadcast", [x], [x.type.with_shape(list(shape))],
                       form="to", names=name)[0]

    def concat(self, values: Sequence[Value], dim: int,
               name: Optional[str] = None) -> Value:
        """torch.cat(values, dim) of float tensors."""
        first = values[0].type
        dim = dim % first.rank
        shape = list(first.shape)
        shape[dim] = sum(v.type.shape[dim] for v in values)
        return self.op("nn.concat", values, [first.with_shape(shape)],
                       f"dim = {dim} : i64", names=name)[0]

    def _reduce(self, op, x, dims, keepdim, name) -> Value:
        dims = sorted(d % x.type.rank for d in dims)
        shape = [1 if i in dims else d for i, d in enumerate(x.type.shape)
                 if keepdim or i not in dims]
        attrs = "dims = array<i64: " + ", ".join(map(str, dims)) + ">"
        if keepdim:
            attrs += ", keepdim"
        return self.op(op, [x], [x.type.with_shape(shape)], attrs,
                       names=name)[0]

    def cumsum(self, x: Value, dim: int, reverse: bool = False,
               name: Optional[str] = None) -> Value:
        """torch.cumsum(x, dim) (any element type); `reverse` sums from
        the end."""
        attrs = f"dim = {dim % x.type.rank} : i64"
        if reverse:
            attrs += ", reverse"
        return self.op("nn.cumsum", [x], [x.type], attrs, "same", name)[0]

    def reduce_sum(self, x: Value, dims: Sequence[int], keepdim: bool = False,
                   name: Optional[str] = None) -> Value:
        return self._reduce("nn.reduce_sum", x, dims, keepdim, name)

    def reduce_mean(self, x: Value, dims: Sequence[int], keepdim: bool = False,
                    name: Optional[str] = None) -> Value:
        return self._reduce("nn.reduce_mean", x, dims, keepdim, name)

    def cross_entropy(self, logits: Value, targets: Value,
                      reduction: str = "mean", ignore_index: int = -100,
                      name: Optional[str] = None) -> Value:
        """F.cross_entropy: targets equal to `ignore_index` count for
        nothing (and not in the mean's divisor)."""
        attrs = [] if reduction == "mean" else \
            [f"reduction = #nn.reduction<{reduction}>"]
        if ignore_index != -100:
            attrs.append(f"ignore_index = {int(ignore_index)} : i64")
        attrs = ", ".join(attrs)
        return self.op("nn.cross_entropy", [logits, targets],
                       [logits.type.with_shape(())], attrs, names=name)[0]

    def mse_loss(self, x: Value, target: Value, reduction: str = "mean",
                 name: Optional[str] = None) -> Value:
        attrs = "" if reduction == "mean" else \
            f"reduction = #nn.reduction<{reduction}>"
        return self.op("nn.mse_loss", [x, target], [x.type.with_shape(())],
                       attrs, names=name)[0]


# Where a random site's id goes in its line (split off at once).
_ID = "?rng_id?"


def _f64(x: float) -> str:
    """An f64 attribute; ±inf as MLIR's hexadecimal bit pattern."""
    if x in (float("inf"), float("-inf")):
        return ("0x7FF0000000000000" if x > 0 else "0xFFF0000000000000") + \
            " : f64"
    return fmt_float(x) + " : f64"


def _broadcast(a: Sequence[int], b: Sequence[int]) -> List[int]:
    """PyTorch's trailing broadcasting of two shapes."""
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + list(a)
    b = [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return out
