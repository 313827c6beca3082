"""A small emitter of `fsdp.model` IR text.

A model is a tree of `Module`s, as in PyTorch: each holds parameters, child
modules and at most one forward. A forward is written op by op on a
`Forward`, whose methods are the `nn` ops (result types inferred the way the
dialect infers them) plus `call` and `get_param`; values are SSA names with
their tensor types. `Model.text()` prints the syntax fsdp-opt parses
(docs/Dialects/*.md, build/docs/Dialects/*Ops.md)::

    root = Module("root", "MLP")
    fc1 = root.add(Module("fc1", "Linear"))
    w = fc1.param("weight", [32, 16], Init.kaiming_uniform(math.sqrt(5)))
    f = fc1.forward(x=tensor(8, 16))
    f.ret(f.linear(f.args[0], f.get_param(w), name="y"))

Symbol paths (`@transformer::@wte::@weight`) are computed from the tree, so
`call` and `get_param` take the Module or Param object.
"""

from __future__ import annotations

import fnmatch
import re
import textwrap
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

__all__ = ["TensorType", "tensor", "Init", "Value", "Param", "Buffer",
           "Module", "Forward", "Model", "fmt_float", "symbol"]

DTYPES = ("f32", "bf16", "f16", "i32", "i64")


def fmt_float(x: float) -> str:
    """Python's shortest round-trip form, with the `.` MLIR's float literals
    need (`1.0e-05`, `2.0`); MLIR parses it back to the same double."""
    s = repr(float(x))
    if s in ("inf", "-inf", "nan"):
        raise ValueError(f"no MLIR literal for {s}")
    mantissa, e, exp = s.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exp


_BARE_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.]*$")


def symbol(name: str) -> str:
    """`@name`, quoted when it is not a bare identifier (`@"0"`)."""
    return "@" + name if _BARE_ID.match(name) else '@"' + name + '"'


@dataclass(frozen=True)
class TensorType:
    shape: Tuple[int, ...]
    dtype: str = "f32"

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}")
        if any(d <= 0 for d in self.shape):
            raise ValueError(f"dimensions must be positive: {self.shape}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def with_shape(self, shape: Sequence[int]) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def __str__(self) -> str:
        if not self.shape:
            return f"tensor<{self.dtype}>"
        return "tensor<" + "x".join(map(str, self.shape)) + "x" + self.dtype + ">"


def tensor(*shape: int, dtype: str = "f32") -> TensorType:
    """tensor(8, 16) is tensor<8x16xf32>; tensor() a scalar."""
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    return TensorType(tuple(int(d) for d in shape), dtype)


class Init:
    """`#fsdp.init<...>` initializers, named as the torch.nn.init functions."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Init<{self.text}>"

    @staticmethod
    def _call(kind: str, *args: float) -> "Init":
        return Init(f"{kind}({', '.join(fmt_float(a) for a in args)})")

    zeros: "Init"
    ones: "Init"

    @staticmethod
    def constant(value: float) -> "Init":
        return Init._call("constant", value)

    @staticmethod
    def normal(mean: float = 0.0, std: float = 1.0) -> "Init":
        return Init._call("normal", mean, std)

    @staticmethod
    def uniform(a: float = 0.0, b: float = 1.0) -> "Init":
        return Init._call("uniform", a, b)

    @staticmethod
    def trunc_normal(mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                     b: float = 2.0) -> "Init":
        return Init._call("trunc_normal", mean, std, a, b)

    @staticmethod
    def xavier_uniform(gain: float = 1.0) -> "Init":
        return Init._call("xavier_uniform", gain)

    @staticmethod
    def xavier_normal(gain: float = 1.0) -> "Init":
        return Init._call("xavier_normal", gain)

    @staticmethod
    def kaiming_uniform(a: float = 0.0) -> "Init":
        return Init._call("kaiming_uniform", a)

    @staticmethod
    def kaiming_normal(a: float = 0.0) -> "Init":
        return Init._call("kaiming_normal", a)


Init.zeros = Init("zeros")
Init.ones = Init("ones")


@dataclass(frozen=True)
class Value:
    """An SSA value of a forward: its name (with `%`) and type."""
    name: str
    type: TensorType

    def __str__(self) -> str:
        return self.name


@dataclass
class Param:
    name: str
    type: TensorType
    init: Init
    owner: "Module"
    requires_grad: bool = True

    @property
    def numel(self) -> int:
        return self.type.numel

    def line(self) -> str:
        s = f"fsdp.param {symbol(self.name)} : {self.type} init <{self.init}>"
        return s + ("" if self.requires_grad else " {requires_grad = false}")


@dataclass
class Buffer:
    """A registered buffer (register_buffer): state that is not trained."""
    name: str
    type: TensorType
    init: Init
    owner: "Module"
    persistent: bool = True

    @property
    def numel(self) -> int:
        return self.type.numel

    def line(self) -> str:
        s = f"fsdp.buffer {symbol(self.name)} : {self.type} init <{self.init}>"
        return s + ("" if self.persistent else " {persistent = false}")


class Module:
    """An nn.Module: `kind` is its class name, `unit` marks an FSDP unit.

    A unit's options (`#fsdp.unit<...>`), each implying `unit`:
    `reshard_after_forward` (None: the strategy's choice) overrides the
    sharding strategy for this unit, as FSDP2's per-module argument;
    `rank_local` gives it a process group of its own rank only, PyTorch's
    `FSDP(expert, process_group=new_group([rank]))`: its flat parameter is
    whole on every rank, initialised per rank, and its gradient stays local.
    """

    def __init__(self, name: str, kind: str, unit: bool = False,
                 reshard_after_forward: Optional[bool] = None,
                 rank_local: bool = False):
        self.name = name
        self.kind = kind
        self.unit = unit or rank_local or reshard_after_forward is not None
        self.reshard_after_forward = reshard_after_forward
        self.rank_local = rank_local
        self.parent: Optional[Module] = None
        self.params: Dict[str, Param] = {}
        self.buffers: Dict[str, Buffer] = {}
        self.children: Dict[str, Module] = {}
        self.fwd: Optional[Forward] = None
        self.comments: List[str] = []

    # -- structure -------------------------------------------------------
    def _check_new(self, name: str) -> None:
        if name in self.params or name in self.buffers or \
                name in self.children:
            raise ValueError(f"{self.name}: duplicate symbol {name!r}")

    def param(self, name: str, shape: Union[Sequence[int], TensorType],
              init: Init, dtype: str = "f32",
              requires_grad: bool = True) -> Param:
        self._check_new(name)
        t = shape if isinstance(shape, TensorType) else tensor(shape, dtype=dtype)
        p = Param(name, t, init, self, requires_grad)
        self.params[name] = p
        return p

    def buffer(self, name: str, shape: Union[Sequence[int], TensorType],
               init: Init, dtype: str = "f32",
               persistent: bool = True) -> Buffer:
        """register_buffer(name, tensor, persistent); shape [] is a scalar."""
        self._check_new(name)
        t = shape if isinstance(shape, TensorType) else TensorType(
            tuple(int(d) for d in shape), dtype)
        b = Buffer(name, t, init, self, persistent)
        self.buffers[name] = b
        return b

    def add(self, child: "Module") -> "Module":
        self._check_new(child.name)
        if child.parent is not None:
            raise ValueError(f"module {child.name!r} already has a parent")
        child.parent = self
        self.children[child.name] = child
        return child

    def __getitem__(self, name: str) -> "Module":
        return self.children[name]

    def forward(self, *args: TensorType, **named: TensorType) -> "Forward":
        """Starts the forward; arguments are named %x (one positional),
        %x0, %x1, ... (several), or as the keywords say, in order."""
        if self.fwd is not None:
            raise ValueError(f"{self.name} already has a forward")
        if args and named:
            raise ValueError("pass argument types positionally or by name")
        if len(args) == 1:
            named = {"x": args[0]}
        elif args:
            named = {f"x{i}": t for i, t in enumerate(args)}
        self.fwd = Forward(self, list(named.items()))
        return self.fwd

    def modules(self):
        """This module and its descendants, pre-order."""
        yield self
        for c in self.children.values():
            yield from c.modules()

    def num_params(self) -> int:
        return sum(p.numel for m in self.modules() for p in m.params.values())

    def path_from(self, ancestor: "Module") -> List[str]:
        names, m = [], self
        while m is not ancestor:
            if m.parent is None:
                raise ValueError(f"{self.name!r} is not in the subtree of "
                                 f"{ancestor.name!r}")
            names.append(m.name)
            m = m.parent
        return names[::-1]

    # -- printing --------------------------------------------------------
    def _unit_text(self) -> str:
        """` unit`, ` unit<reshard_after_forward = false, rank_local =
        true>`, or nothing."""
        fields = []
        if self.reshard_after_forward is not None:
            fields.append("reshard_after_forward = "
                          + ("true" if self.reshard_after_forward else "false"))
        if self.rank_local:
            fields.append("rank_local = true")
        if not self.unit:
            if fields:
                raise ValueError(f"module {self.name!r}: {', '.join(fields)} "
                                 "on a module that is not a unit")
            return ""
        return " unit" + (f"<{', '.join(fields)}>" if fields else "")

    def lines(self) -> List[str]:
        head = f"fsdp.module {symbol(self.name)} kind \"{self.kind}\""
        out = ["// " + c for c in self.comments]
        out.append(head + self._unit_text() + " {")
        body = [p.line() for p in self.params.values()]
        body += [b.line() for b in self.buffers.values()]
        for c in self.children.values():
            body += c.lines()
        if self.fwd is not None:
            body += self.fwd.lines()
        out += ["  " + l if l else l for l in body]
        out.append("}")
        return out


class Forward:
    """The forward of a module: append ops, then `ret`."""

    def __init__(self, owner: Module, args: List[Tuple[str, TensorType]]):
        self.owner = owner
        self.args = [Value("%" + n, t) for n, t in args]
        self.body: List[str] = []
        self.results: Optional[List[TensorType]] = None
        self._names = {v.name for v in self.args}
        self._counter = 0

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
        if m.fwd is not None and m.fwd.results is not None and \
                len(m.fwd.results) != 1:
            raise ValueError(f"module {m.name!r} returns "
                             f"{len(m.fwd.results)} values: call_results")
        return self.call_results(m, *args, names=name)[0]

    def call_results(self, m: Module, *args: Value,
                     names=None) -> List[Value]:
        """fsdp.call of a forward, all its results."""
        if m.fwd is None or m.fwd.results is None:
            raise ValueError(f"module {m.name!r} has no finished forward")
        want = [a.type for a in m.fwd.args]
        if [a.type for a in args] != want:
            raise ValueError(f"call of {m.name!r}: argument types "
                             f"{[str(a.type) for a in args]} != "
                             f"{[str(t) for t in want]}")
        ref = "::".join(symbol(n) for n in m.path_from(self.owner))
        ins = ", ".join(str(a.type) for a in args)
        res = list(m.fwd.results)
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

    def lines(self) -> List[str]:
        if self.results is None:
            raise ValueError(f"forward of {self.owner.name!r} has no return")
        args = ", ".join(f"{v.name}: {v.type}" for v in self.args)
        res = ", ".join(str(t) for t in self.results)
        if len(self.results) != 1:
            res = f"({res})"
        return ([f"fsdp.forward ({args}) -> {res} {{"]
                + ["  " + l for l in self.body] + ["}"])

    # -- nn ops ----------------------------------------------------------
    def linear(self, x: Value, w: Value, b: Optional[Value] = None,
               name: Optional[str] = None) -> Value:
        if x.type.shape[-1] != w.type.shape[1]:
            raise ValueError(f"linear: {x.type} by weight {w.type}")
        out = x.type.with_shape(x.type.shape[:-1] + (w.type.shape[0],))
        ops = [x, w] + ([b] if b is not None else [])
        return self.op("nn.linear", ops, [out], names=name)[0]

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

    def slice(self, x: Value, dim: int, start: int, end: int,
              name: Optional[str] = None) -> Value:
        """x[..., start:end, ...] along `dim` (step 1; any element type)."""
        dim %= x.type.rank
        shape = list(x.type.shape)
        shape[dim] = end - start
        return self.op("nn.slice", [x], [x.type.with_shape(shape)],
                       f"dim = {dim} : i64, start = {start} : i64, "
                       f"end = {end} : i64", names=name)[0]

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
        bytes (exact, as MLIR's hex form of dense elements)."""
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
        rid = _RNG_AUTO if rng_id is None else str(int(rng_id))
        return self.op("nn.dropout", [x], [x.type],
                       f"p = {_f64(p)}, rng_id = {rid} : i64", "same",
                       name)[0]

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

    def _reduce(self, op, x, dims, keepdim, name) -> Value:
        dims = sorted(d % x.type.rank for d in dims)
        shape = [1 if i in dims else d for i, d in enumerate(x.type.shape)
                 if keepdim or i not in dims]
        attrs = "dims = array<i64: " + ", ".join(map(str, dims)) + ">"
        if keepdim:
            attrs += ", keepdim"
        return self.op(op, [x], [x.type.with_shape(shape)], attrs,
                       names=name)[0]

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


# Placeholder of a dropout site's rng_id until Model.text() numbers them.
_RNG_AUTO = "?rng_id?"
_RNG_ID = re.compile(r"rng_id = (\?rng_id\?|-?\d+) : i64")


def _number_dropout_sites(text: str) -> str:
    """Gives every automatic rng_id a distinct positive id (in text order),
    avoiding the explicit ones."""
    taken = {int(m.group(1)) for m in _RNG_ID.finditer(text)
             if m.group(1) != _RNG_AUTO}
    counter = [0]

    def next_id(m):
        if m.group(1) != _RNG_AUTO:
            return m.group(0)
        counter[0] += 1
        while counter[0] in taken:
            counter[0] += 1
        return f"rng_id = {counter[0]} : i64"

    return _RNG_ID.sub(next_id, text)


def _f64(x: float) -> str:
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


class Model:
    """`fsdp.model @name` around a root module; `header` paragraphs become
    `//` comments above it, wrapped at 80 columns."""

    def __init__(self, name: str, root: Module, header: Sequence[str] = ()):
        self.name = name
        self.root = root
        self.header = list(header)

    def num_params(self) -> int:
        return self.root.num_params()

    def named_parameters(self):
        """(fully-qualified name, Param) pairs, as nn.Module's."""
        for m in self.root.modules():
            prefix = ".".join(m.path_from(self.root))
            for name, p in m.params.items():
                yield (f"{prefix}.{name}" if prefix else name), p

    def freeze(self, patterns: Sequence[str]) -> List[str]:
        """Sets requires_grad = False on the parameters whose qualified name
        matches one of the glob `patterns` (fine-tuning: a frozen parameter
        gets no gradient, optimizer state or update) and returns their
        names; a pattern that matches nothing is an error."""
        frozen = []
        for pattern in patterns:
            hits = [(n, p) for n, p in self.named_parameters()
                    if fnmatch.fnmatchcase(n, pattern)]
            if not hits:
                raise ValueError(f"freeze pattern {pattern!r} matches no parameter "
                                 f"of {self.name}")
            for name, p in hits:
                p.requires_grad = False
                frozen.append(name)
        return sorted(set(frozen))

    def num_units(self) -> int:
        """FSDP units: the root always is one."""
        return sum(1 for m in self.root.modules() if m.unit or m is self.root)

    def text(self) -> str:
        lines = []
        for para in self.header:
            lines += ["// " + l for l in textwrap.wrap(para, 77)] or ["//"]
        lines.append(f"fsdp.model {symbol(self.name)} {{")
        lines += ["  " + l if l else l for l in self.root.lines()]
        lines.append("}")
        return _number_dropout_sites("\n".join(lines) + "\n")

    __str__ = text
