"""The model tree as PyTorch's: `Module`s holding parameters, buffers,
child modules and their forwards (one a signature), under a `Model`, and
the printing of the whole `fsdp.model` (`Model.text()`), which numbers the
random sites (dropouts, draws) left without an rng_id (forward.RngIds)."""

from __future__ import annotations

import fnmatch
import textwrap
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .forward import Forward, RngIds
from .types import Init, TensorType, symbol, tensor


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


def _reshard_text(value) -> str:
    """reshard_after_forward in #fsdp.unit: true / false / N."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"reshard_after_forward must be a bool or an int, got "
                    f"{value!r}")


class Module:
    """An nn.Module: `kind` is its class name, `unit` marks an FSDP unit.

    A unit's options (`#fsdp.unit<...>`), each implying `unit`:
    `reshard_after_forward` (None: the strategy's choice) overrides the
    sharding strategy for this unit, as FSDP2's per-module argument: a bool,
    or an int N (>= 1, dividing the shard group) to keep a 1/N shard after
    the forward and gather the backward over groups of N ranks;
    `rank_local` gives it a process group of its own rank only, PyTorch's
    `FSDP(expert, process_group=new_group([rank]))`: its flat parameter is
    whole on every rank, initialised per rank, and its gradient stays local.
    `mixed_precision` is the unit's own policy (FSDP2's per-module
    MixedPrecisionPolicy), each field overriding the compile's model-wide
    one: {"param_dtype" / "reduce_dtype" / "output_dtype": "f32" | "bf16" |
    "f16", "cast_forward_inputs": bool}, any subset.
    `ignored` ("local" or "all_reduce", None: not ignored) makes it FSDP's
    ignored module: its parameters are whole on every rank, never gathered,
    start identical, and their gradients stay local ("local", torch's
    ignored_modules) or are averaged over all ranks ("all_reduce", as DDP).
    `activation_checkpointing` recomputes the unit's forward in its backward
    (`checkpoint_wrapper` around this module): True the whole forward,
    "selective" only its cheap ops (the matmuls' and attention's results
    are kept from the forward).
    `forward_prefetch` / `backward_prefetch` name the units (by path) whose
    all-gathers this unit issues once its own is done, FSDP2's
    `set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`.
    """

    def __init__(self, name: str, kind: str, unit: bool = False,
                 reshard_after_forward: Union[bool, int, None] = None,
                 rank_local: bool = False):
        self.name = name
        self.kind = kind
        self.unit = unit or rank_local or reshard_after_forward is not None
        self.reshard_after_forward = reshard_after_forward
        self.rank_local = rank_local
        self.mixed_precision: Dict[str, Any] = {}
        self.ignored: Optional[str] = None
        self.activation_checkpointing = False
        self.forward_prefetch: List[str] = []
        self.backward_prefetch: List[str] = []
        self.parent: Optional[Module] = None
        self.params: Dict[str, Param] = {}
        self.buffers: Dict[str, Buffer] = {}
        self.children: Dict[str, Module] = {}
        # One forward a signature: a module called on inputs of other types
        # (a shared encoder run on queries and longer documents) has one for
        # each; the root has one.
        self.forwards: List[Forward] = []
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

    @property
    def fwd(self) -> Optional["Forward"]:
        """The first forward (the root's only one), None for a container."""
        return self.forwards[0] if self.forwards else None

    def forward(self, *args: TensorType, **named: TensorType) -> "Forward":
        """Starts a forward; arguments are named %x (one positional),
        %x0, %x1, ... (several), or as the keywords say, in order. A module
        may have several, each taking other argument types: a call picks
        the one taking its arguments' types."""
        if args and named:
            raise ValueError("pass argument types positionally or by name")
        if len(args) == 1:
            named = {"x": args[0]}
        elif args:
            named = {f"x{i}": t for i, t in enumerate(args)}
        return self.add_forward(list(named.items()))

    def add_forward(self, args: Sequence[Tuple[str, TensorType]]
                    ) -> "Forward":
        """A new forward taking `args` (names and types)."""
        types = [t for _, t in args]
        if self.forward_taking(types) is not None:
            raise ValueError(f"{self.name} already has a forward taking "
                             f"{[str(t) for t in types]}")
        self.forwards.append(Forward(self, list(args)))
        return self.forwards[-1]

    def forward_taking(self, types: Sequence[TensorType]
                       ) -> Optional["Forward"]:
        """The forward whose arguments have `types`, or None."""
        return next((f for f in self.forwards
                     if [a.type for a in f.args] == list(types)), None)

    def drop_forward(self, f: "Forward") -> None:
        """Removes forward `f` (one whose results are all constants: the
        module is not called for it)."""
        self.forwards.remove(f)

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
                          + _reshard_text(self.reshard_after_forward))
        if self.rank_local:
            fields.append("rank_local = true")
        if self.ignored:
            fields.append(f"ignored = {self.ignored}")
        for key in ("param_dtype", "reduce_dtype", "output_dtype"):
            if key in self.mixed_precision:
                fields.append(f"{key} = {self.mixed_precision[key]}")
        if "cast_forward_inputs" in self.mixed_precision:
            fields.append("cast_forward_inputs = " + (
                "true" if self.mixed_precision["cast_forward_inputs"]
                else "false"))
        if self.activation_checkpointing == "selective":
            fields.append("activation_checkpointing = selective")
        elif self.activation_checkpointing:
            fields.append("activation_checkpointing = true")
        for key in ("forward_prefetch", "backward_prefetch"):
            units = getattr(self, key)
            if units:
                fields.append(f"{key} = [" + ", ".join(
                    f'"{u}"' for u in units) + "]")
        if not self.unit:
            if fields:
                raise ValueError(f"module {self.name!r}: {', '.join(fields)} "
                                 "on a module that is not a unit")
            return ""
        return " unit" + (f"<{', '.join(fields)}>" if fields else "")

    def lines(self, ids: Optional[RngIds] = None) -> List[str]:
        """The module's text; random sites without an rng_id are numbered
        from `ids`, by default over this subtree (Forward.dropout,
        Forward.random)."""
        if ids is None:
            ids = RngIds(i for m in self.modules() for f in m.forwards
                         for i in f.rng_ids)
        head = f"fsdp.module {symbol(self.name)} kind \"{self.kind}\""
        out = ["// " + c for c in self.comments]
        out.append(head + self._unit_text() + " {")
        body = [p.line() for p in self.params.values()]
        body += [b.line() for b in self.buffers.values()]
        for c in self.children.values():
            body += c.lines(ids)
        for f in self.forwards:
            body += f.lines(ids)
        out += ["  " + l if l else l for l in body]
        out.append("}")
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

    def named_units(self):
        """(qualified name, Module) of every unit below the root, pre-order."""
        for m in self.root.modules():
            if m.unit and m is not self.root:
                yield ".".join(m.path_from(self.root)), m

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
        return "\n".join(lines) + "\n"

    __str__ = text
