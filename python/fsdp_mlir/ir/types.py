"""What the model tree and the forwards share: tensor types, SSA values,
`#fsdp.init<...>` initializers, and the literal forms MLIR parses (floats,
symbol names)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence, Tuple


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
