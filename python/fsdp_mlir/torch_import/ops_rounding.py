"""Rounding and integer arithmetic: sign and abs (of integers too), round
(halves to even), floor, ceil, trunc, division with rounding_mode 'floor'
or 'trunc' (floats and integers), fmod and the remainder and floor
division of floats (of integers: ops_routing), maximum / minimum of
integers. The IR has no rounding op: a float is truncated through a cast
to i64 (every f32 from 2^23 on is an integer already and stays as it is;
NaN and ±inf too), then moved by one where the rounding asks. None of the
roundings has a gradient, as torch's; fmod and remainder have torch's."""
from __future__ import annotations

from typing import Callable, Dict

from ..ir import Value
from .common import (_INTEGERS, _Unsupported, _as_f32, _dtype, _float,
                     _keep_either, _scalar)
from .ops_pointwise import _elementwise


def _sign(t, node, out, x):
    """torch.sign as (x > 0) − (x < 0) (of integers compared in f32,
    which keeps every sign)."""
    x = t.v(x)
    if x.type.dtype in _INTEGERS:
        return t.f.cast(_sign(t, node, out, _as_f32(t, x)), x.type.dtype)
    zero = _scalar(t, 0.0, x.type.dtype)
    return t.f.sub(t.f.compare("gt", x, zero), t.f.compare("lt", x, zero))


def _abs(t, node, out, x):
    """abs; of integers x·sign(x)."""
    x = t.v(x)
    if x.type.dtype in _INTEGERS:
        return t.f.mul(x, _sign(t, node, out, x))
    return t.f.abs(_float(t, x, "abs"))


def _rounded(t, x: Value, mode: str) -> Value:
    """x rounded to an integer value: "round" (halves to even), "floor",
    "ceil" or "trunc", in x's float type (bf16 and f16 in f32)."""
    x = t.f.stop_gradient(x)
    dtype = x.type.dtype
    if dtype != "f32":
        x = t.f.cast(x, "f32")
    fits = t.f.compare("lt", t.f.abs(x), _scalar(t, 2.0 ** 23, "f32"))
    small = _keep_either(t, fits, x, 0.0, "f32")  # i64 holds its truncation
    whole = t.f.cast(small, "i64")
    trunc = t.f.cast(whole, "f32")
    if mode == "trunc":
        y = trunc
    elif mode == "floor":
        y = t.f.sub(trunc, t.f.compare("lt", small, trunc))
    elif mode == "ceil":
        y = t.f.add(trunc, t.f.compare("gt", small, trunc))
    else:
        # One more away from zero past the half, or at it from an odd t.
        gap = t.f.abs(t.f.sub(small, trunc))
        half, two = _scalar(t, 0.5, "f32"), _scalar(t, 2, "i64")
        odd = t.f.cast(t.f.sub(whole, t.f.mul(t.f.op(
            "nn.floor_div", [whole, two], [whole.type])[0], two)), "f32")
        away = t.f.maximum(t.f.compare("gt", gap, half), t.f.mul(
            t.f.compare("eq", gap, half), t.f.abs(odd)))
        y = t.f.add(trunc, t.f.mul(away, _sign(t, None, None, small)))
    y = _keep_either(t, fits, y, x, "f32")
    return y if dtype == "f32" else t.f.cast(y, dtype)


def _rounding(mode: str):
    def build(t, node, out, x, decimals=0):
        if decimals:
            raise _Unsupported(f"round to {decimals} decimals")
        x = t.v(x)
        if x.type.dtype in _INTEGERS:  # already whole
            return x
        return _rounded(t, _float(t, x, mode), mode)
    return build


def _integer_operands(t, a, b, out):
    dtype = _dtype(out.dtype)
    return [v if isinstance(v, Value) and v.type.dtype == dtype else
            t.f.cast(v, dtype) if isinstance(v, Value) else
            t.v(v, out.dtype) for v in (a, b)]


def _div(t, node, out, a, b, rounding_mode=None):
    """a / b; rounding_mode 'floor' or 'trunc' rounds the quotient. Of
    floats: 'trunc' the rounding of the f32 quotient (divided, not
    multiplied by 1/b), as torch's; 'floor' as torch's, from the exact
    fmod (_floor_quotient). Integers: nn.floor_div, plus one toward zero
    for 'trunc' where the signs differ and b does not divide a."""
    if rounding_mode is None:
        return _elementwise(t, "div", a, b, out)
    if _dtype(out.dtype) not in _INTEGERS:
        if isinstance(b, (int, float)) and isinstance(a, Value):
            b = _scalar(t, float(b), _float(t, a, "div").type.dtype)
        if rounding_mode == "floor":
            return _floor_quotient(t, a, b, out)
        return _rounded(t, _elementwise(t, "div", a, b, out), rounding_mode)
    a, b = _integer_operands(t, a, b, out)
    shape = [int(d) for d in out.shape]
    q = t.f.op("nn.floor_div", [a, b], [a.type.with_shape(shape)])[0]
    if rounding_mode == "floor":
        return q
    rest = _as_f32(t, t.f.sub(a, t.f.mul(q, b)))
    zero = _scalar(t, 0.0, "f32")
    signs_differ = t.f.compare("ne", t.f.compare("lt", _as_f32(t, a), zero),
                               t.f.compare("lt", _as_f32(t, b), zero))
    inexact = t.f.mul(signs_differ, t.f.compare("ne", rest, zero))
    return t.f.add(q, t.f.cast(inexact, q.type.dtype))


def _f32_operands(t, a, b):
    """Float operands (values, constants or scalars) as f32 values: torch
    computes floor division and remainder of bf16 / f16 in f32."""
    import torch

    def value(v):
        v = v if isinstance(v, Value) else t.v(v, torch.float32)
        return _as_f32(t, _float(t, v, "remainder or floor division"))
    return value(a), value(b)


def _floor_quotient(t, a, b, out) -> Value:
    """floor(a / b) of floats as aten's div_floor_floating: with
    m = fmod(a, b) (exact), q = (a − m) / b, less one where m ≠ 0 and its
    sign differs from b's; floor(q), plus one where q lies more than 1/2
    above it (q is an integer up to rounding); a / b where b is 0. Exact
    near multiples of b, where floor(a / b) is not: -3.5 // 0.7 is -6 (the
    f32 quotient rounds to -5). No gradient, as torch's."""
    a, b = (t.f.stop_gradient(v) for v in _f32_operands(t, a, b))
    m = t.f.fmod(a, b)
    q = t.f.sub(t.f.div(t.f.sub(a, m), b), _sign_differs(t, m, b))
    whole = _rounded(t, q, "floor")
    whole = t.f.add(whole, t.f.compare("gt", t.f.sub(q, whole),
                                       _scalar(t, 0.5, "f32")))
    by_zero = t.f.compare("eq", b, _scalar(t, 0.0, "f32"))
    y = _keep_either(t, by_zero, t.f.div(a, b), whole, "f32")
    return y if _dtype(out.dtype) == "f32" else t.f.cast(y, _dtype(out.dtype))


def _sign_differs(t, m: Value, b: Value) -> Value:
    """1 where the fmod m (f32) is not 0 and its sign differs from b's,
    else 0: where aten's remainder and floor division move by one b."""
    zero = _scalar(t, 0.0, "f32")
    return t.f.mul(t.f.compare("ne", m, zero),
                   t.f.compare("ne", t.f.compare("lt", m, zero),
                               t.f.compare("lt", b, zero)))


def _fmod(t, node, out, a, b):
    """torch.fmod: nn.fmod of floats (torch's gradient: 1 for a,
    −trunc(a / b) for b); of integers a − trunc(a / b)·b."""
    if _dtype(out.dtype) in _INTEGERS:
        a, b = _integer_operands(t, a, b, out)
        return t.f.sub(a, t.f.mul(_div(t, node, out, a, b, "trunc"), b))
    return _elementwise(t, "fmod", a, b, out)


def float_remainder(t, a, b, out) -> Value:
    """torch.remainder of floats, as aten's: m = fmod(a, b), plus b where m
    is not 0 and its sign differs from b's (the result takes b's sign).
    The gradient is torch's: 1 for a, −floor(a / b) for b."""
    a, b = _f32_operands(t, a, b)
    m = t.f.fmod(a, b)
    y = t.f.add(m, t.f.keep(b, _sign_differs(t, m, b)))
    return y if _dtype(out.dtype) == "f32" else t.f.cast(y, _dtype(out.dtype))


def _extreme(op: str):
    """maximum / minimum; of integers a where by the sign of a − b (exact
    whatever their size: converting a difference to f32 keeps its sign)."""
    def build(t, node, out, a, b):
        if _dtype(out.dtype) not in _INTEGERS:
            return _elementwise(t, op, a, b, out)
        a, b = _integer_operands(t, a, b, out)
        diff = _as_f32(t, t.f.sub(a, b))
        first = t.f.compare("ge" if op == "maximum" else "le", diff,
                            _scalar(t, 0.0, "f32"))
        return _keep_either(t, first, a, b, _dtype(out.dtype))
    return build


OPS: Dict[str, Callable] = {
    "sign.default": _sign,
    "abs.default": _abs,
    "round.default": _rounding("round"),
    "round.decimals": _rounding("round"),
    "floor.default": _rounding("floor"),
    "ceil.default": _rounding("ceil"),
    "trunc.default": _rounding("trunc"),
    "div.Tensor_mode": _div,
    "div.Scalar_mode": _div,
    "fmod.Tensor": _fmod,
    "fmod.Scalar": _fmod,
    "maximum.default": _extreme("maximum"),
    "minimum.default": _extreme("minimum"),
}
