"""What the importer core and every op family share: the errors, torch's
dtypes as IR element types, and the helpers handlers of several families
call (a 0-d scalar operand, and the f32 masks that stand for run-time bool
tensors).

An op handler is `handler(t, node, out, *args, **kwargs)`: `t` the
importer._Translator of the module being written (`t.f` its ir.Forward,
`t.v(x)` a value or a constant materialised, `t.constant`, `t.reshape`,
`t.transpose`), `node` the fx node, `out` its FakeTensor result, then the
node's arguments with computed values as ir.Value and constants as
torch tensors or Python scalars. It returns the ir.Value(s) of the result
or raises _Unsupported, which becomes one line of UnsupportedModelError.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from ..ir import TensorType, Value


class UnsupportedModelError(ValueError):
    """The model uses what the importer cannot translate; the message lists
    every occurrence."""


# A stack frame of the importer's own files (the autograd.Function apply
# it stands in for), which is not the user's line.
_OWN_FRAME = f'File "{os.path.dirname(os.path.abspath(__file__))}{os.sep}'


def _frames(node) -> List[str]:
    """The 'File' lines of the node's stack trace, outermost first, but
    the importer's own."""
    trace = node.meta.get("stack_trace") or ""
    return [line.strip() for line in trace.splitlines()
            if line.strip().startswith("File ")
            and not line.strip().startswith(_OWN_FRAME)]


def _source_line(node) -> str:
    """The user's frame of the node's stack trace (its last 'File' line)."""
    files = _frames(node)
    return files[-1] if files else ""


def source_location(node) -> Optional[Tuple[str, int]]:
    """(file, line) of the user's frame of the node, for an op's MLIR
    location (what a run-time check's error names), or None."""
    found = re.match(r'File "(.*)", line (\d+)', _source_line(node))
    return (found.group(1), int(found.group(2))) if found else None


_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16",
           "int64": "i64", "int32": "i32"}


def _dtype(torch_dtype) -> str:
    name = str(torch_dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise UnsupportedModelError(f"dtype {name} is not supported")
    return _DTYPES[name]


def _tensor_type(fake) -> TensorType:
    return TensorType(tuple(int(d) for d in fake.shape), _dtype(fake.dtype))


class _Unsupported(Exception):
    pass


@dataclass(frozen=True)
class _Spectrum:
    """The complex DFT of a real run-time tensor along `dims`, times
    `scale`, which only its `.real` reads (ops_spectral): the IR has no
    complex tensors, so it stays unevaluated until then."""
    x: Value
    dims: Tuple[int, ...]
    scale: float


def _is_tensor(x) -> bool:
    import torch
    return isinstance(x, torch.Tensor)


def _shape(out) -> List[int]:
    return [int(d) for d in out.shape]


def _out_type(out) -> TensorType:
    return _tensor_type(out)


def _only_first_output_read(node, what: str) -> None:
    """An op of two results (values, indices or mask) whose handler
    computes the first only: refused where the model reads the second."""
    import operator
    if any(int(u.args[1]) != 0 for u in node.users
           if u.target is operator.getitem):
        raise _Unsupported(f"{what} read")


# The IR's float element types (every other run-time tensor is an integer).
_FLOATS = ("f32", "bf16", "f16")


def _float(t, x: Value, what: str) -> Value:
    if x.type.dtype not in _FLOATS:
        raise _Unsupported(f"{what} of an integer tensor computed at run "
                           "time")
    return x


_INTEGERS = {"i32": "int32", "i64": "int64"}


def _scalar(t, x: float, dtype: str) -> Value:
    """A 0-d constant of the run-time operand's element type (f32, or an
    integer type for an integer scalar)."""
    import torch
    if dtype in _INTEGERS and float(x).is_integer():
        return t.constant(torch.tensor(int(x),
                                       dtype=getattr(torch, _INTEGERS[dtype])))
    if dtype != "f32":
        raise _Unsupported(f"a scalar operand with a {dtype} tensor")
    return t.constant(torch.tensor(float(x), dtype=torch.float32))


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


def _mask_not(t, m: Value) -> Value:
    return t.f.compare("eq", m, _scalar(t, 0.0, "f32"))


def _keep_either(t, m: Value, x, y, dtype: str) -> Value:
    """keep(x, m) + keep(y, m == 0) in `dtype`, m an f32 mask; x and y
    values, constant tensors or scalars. Integers (nll_loss's targets with
    the ignored ones replaced) are multiplied by the mask instead: no
    NaN or infinity to keep out of the other branch."""
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
        return (t.f.mul(v, mask) if dtype in _INTEGERS
                else t.f.keep(v, mask))
    return t.f.add(branch(x, m), branch(y, not_m))
