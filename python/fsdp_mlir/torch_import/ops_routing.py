"""Mixture-of-experts routing as Mixtral-style models export it with
static shapes: the router's topk, the sort of expert ids with its
permutation, histc counts, floor_divide and remainder (of floats:
ops_rounding's), the experts' grouped GEMM (transformers'
grouped_mm_fallback, torch._grouped_mm) and the inverse permutation that
index_put_ builds from an arange. Only the first and the GEMM carry
gradients."""
from __future__ import annotations

from typing import Callable, Dict

from ..ir import TensorType, Value
from ..ir.forward import _f64
from .common import (_FLOATS, _INTEGERS, _Unsupported, _dtype, _float,
                     _scalar, _shape)
from .ops_layout import _gather_at_run_time
from .ops_pointwise import _neg
from .ops_rounding import _div, float_remainder
from .ops_scatter import _index_put_at_constant_positions


def _integer(x: Value, what: str) -> Value:
    if x.type.dtype not in ("i32", "i64"):
        raise _Unsupported(f"{what} of a {x.type.dtype} tensor")
    return x


def _last_dim(x: Value, dim: int, what: str) -> None:
    if dim % x.type.rank != x.type.rank - 1:
        raise _Unsupported(f"{what} along a dimension other than the last")


def _topk(t, node, out, x, k, dim=-1, largest=True, sorted=True):
    """torch.topk: largest first, or smallest first (any `sorted`: the
    order is torch's)."""
    x = _float(t, t.v(x), "topk")
    _last_dim(x, dim, "topk")
    if not largest:  # the largest of −x, negated back
        values, indices = _topk(t, node, out, t.f.scale(x, -1.0), k, dim)
        return t.f.scale(values, -1.0), indices
    shape = x.type.shape[:-1] + (int(k),)
    return t.f.op("nn.topk", [x],
                  [x.type.with_shape(shape), TensorType(shape, "i64")],
                  f"k = {int(k)} : i64")


def _max_dim(t, node, out, x, dim, keepdim=False):
    """torch.max(x, dim) → (values, indices): the top 1 along `dim` (moved
    last and back), so the gradient reaches the first maximal entry, as
    torch's; a NaN counts largest, as torch's max propagates it."""
    x = _float(t, t.v(x), "max")
    rank = x.type.rank
    dim %= rank
    perm = [d for d in range(rank) if d != dim] + [dim]
    moved = x if dim == rank - 1 else t.transpose(x, perm)
    values, indices = _topk(t, node, None, moved, 1)
    back = [perm.index(d) for d in range(rank)]
    if dim != rank - 1:  # indices moved back as f32 (exact below 2^24)
        values = t.transpose(values, back)
        indices = t.f.cast(t.transpose(t.f.cast(indices, "f32"), back), "i64")
    if not keepdim:
        shape = [n for d, n in enumerate(x.type.shape) if d != dim]
        values, indices = t.reshape(values, shape), t.reshape(indices, shape)
    return values, indices


def _amax(t, node, out, x, dims=(), keepdim=False):
    """torch.amax over `dims` (all when empty; Hiera's pooling of mask
    units): the max along each in turn. Where several entries tie, the
    gradient reaches the first (torch's amax splits it evenly among them;
    ties of computed floats are rare)."""
    x = _float(t, t.v(x), "amax")
    rank = x.type.rank
    for dim in sorted({d % rank for d in (dims or range(rank))},
                      reverse=True):
        x = _max_dim(t, node, None, x, dim, keepdim=True)[0]
    return t.reshape(x, _shape(out))


def _amin(t, node, out, x, dims=(), keepdim=False):
    """torch.amin as −amax(−x)."""
    x = _float(t, t.v(x), "amin")
    return t.f.scale(_amax(t, node, out, t.f.scale(x, -1.0), dims, keepdim),
                     -1.0)


def _arg_extreme(largest: bool):
    """torch.argmax / argmin (the first extreme entry, as torch's): the
    max's indices along `dim`, or over the flattened tensor without one.
    Integers compare in f32, as the comparisons do (exact below 2^24: a
    sequence classifier's last non-padding position, the argmax of
    arange × mask)."""
    def build(t, node, out, x, dim=None, keepdim=False):
        x = t.v(x)
        if x.type.dtype in _INTEGERS:
            x = t.f.cast(x, "f32")
        x = _float(t, x, "argmax" if largest else "argmin")
        if not largest:
            x = t.f.scale(x, -1.0)
        if dim is None:
            x, dim = t.reshape(x, [x.type.numel]), 0
        return t.reshape(_max_dim(t, node, None, x, dim, keepdim)[1],
                         _shape(out))
    return build


def _bucketize(t, node, out, x, boundaries, out_int32=False, right=False):
    """torch.bucketize by sorted boundaries [B]: the number of boundaries
    below x (right: at or below), counted from x compared with each."""
    import torch
    x = t.v(x)
    x = x if x.type.dtype == "f32" else t.f.cast(x, "f32")
    below = t.f.compare("ge" if right else "gt",
                        t.reshape(x, list(x.type.shape) + [1]),
                        t.v(boundaries, torch.float32))
    return t.f.cast(t.f.reduce_sum(below, [x.type.rank]),
                    "i32" if out_int32 else "i64")


def _sort(t, node, out, x, dim=-1, descending=False):
    """torch.sort along the last dim, stable (torch's CPU kernel is for
    the default too); descending as the ascending sort of −x, so equal
    entries keep their order, as torch's stable descending sort (a NaN
    comes last, where torch puts it first). Float values are x gathered
    at the sorted positions, so their gradient scatters back, as torch's;
    nn.sort itself has none."""
    x = t.v(x)
    _last_dim(x, dim, "sort")
    key = _neg(t, node, None, x) if descending else x
    values, indices = t.f.op("nn.sort", [key],
                             [key.type, TensorType(x.type.shape, "i64")])
    if x.type.dtype in _FLOATS:
        values = _gather_at_run_time(t, x, x.type.rank - 1, indices, x.type,
                                     checked=False)
    elif descending:
        values = _neg(t, node, None, values)
    return values, indices


def _sort_stable(t, node, out, x, *, stable=None, dim=-1, descending=False):
    return _sort(t, node, out, x, dim, descending)


def _histc(t, node, out, x, bins=100, min=0, max=0):
    x = _float(t, t.v(x), "histc")
    if not min < max:
        raise _Unsupported("histc over the data's own range (min >= max)")
    attrs = (f"bins = {int(bins)} : i64, max = {_f64(float(max))}, "
             f"min = {_f64(float(min))}")
    return t.f.op("nn.histc", [x], [TensorType((int(bins),), x.type.dtype)],
                  attrs)[0]


def _floor_divide(t, node, out, x, other):
    """torch.floor_divide (`//`); of floats ops_rounding's exact floor of
    the quotient."""
    if _dtype(out.dtype) in _FLOATS:
        return _div(t, node, out, x, other, "floor")
    x = _integer(t.v(x), "floor_divide")
    y = (_integer(other, "floor_divide") if isinstance(other, Value)
         else _scalar(t, other, x.type.dtype))
    if y.type.dtype != x.type.dtype:
        raise _Unsupported("floor_divide of mixed integer types")
    shape = tuple(int(d) for d in out.shape)
    return t.f.op("nn.floor_div", [x, y], [x.type.with_shape(shape)])[0]


def _remainder(t, node, out, x, other):
    """torch.remainder (`%`) of integers, x − floor_divide(x, y)·y: the
    sign of the divisor, as Python's and torch's (CANINE's hashed ids); of
    floats ops_rounding's, from the exact fmod."""
    if _dtype(out.dtype) in _FLOATS:
        return float_remainder(t, x, other, out)
    x = _integer(t.v(x), "remainder")
    y = (_integer(other, "remainder") if isinstance(other, Value)
         else _scalar(t, other, x.type.dtype))
    return t.f.sub(x, t.f.mul(_floor_divide(t, node, out, x, y), y))


def _grouped_mm(t, node, out, x, w, offs=None, bias=None, out_dtype=None):
    """Rows [offs[g-1], offs[g]) of x times w[g] ([G, K, N]); rows past the
    last offset are 0."""
    x, w = _float(t, t.v(x), "grouped_mm"), _float(t, t.v(w), "grouped_mm")
    if offs is None or bias is not None or x.type.rank != 2 \
            or w.type.rank != 3:
        raise _Unsupported("grouped_mm other than 2-D rows by 3-D weights "
                           "over offsets, without bias")
    if out_dtype is not None and str(out_dtype) != str(out.dtype):
        raise _Unsupported("grouped_mm with another output dtype")
    offs = _integer(t.v(offs), "grouped_mm offsets")
    result = x.type.with_shape((x.type.shape[0], w.type.shape[2]))
    return t.f.op("nn.grouped_matmul", [x, w, offs], [result])[0]


def _index_put(t, node, out, x, indices, values, accumulate=False):
    """index_put_(empty_like(p), [p], arange(n)): the inverse of the
    permutation p (a Mixtral block's way back to token order). At constant
    indices: ops_scatter's. Other index_puts are not mapped."""
    import torch
    given = [i for i in indices if i is not None]
    if not any(isinstance(i, Value) for i in given):
        return _index_put_at_constant_positions(t, node, out, x, indices,
                                                values, accumulate)
    p = given[0] if len(given) == 1 else None
    n = int(out.shape[0]) if out.dim() == 1 else -1
    if (accumulate or isinstance(x, Value) or not isinstance(p, Value)
            or len(indices) != 1 or p.type.shape != (n,)
            or isinstance(values, Value)
            or not torch.equal(torch.as_tensor(values).to(torch.int64),
                               torch.arange(n))):
        raise _Unsupported("index_put other than an arange put by a "
                           "permutation (its inverse)")
    inv = t.f.op("nn.invert_permutation", [_integer(p, "index_put")],
                 [p.type], form="same")[0]
    want = "i64" if out.dtype == torch.int64 else "i32"
    return inv if want == p.type.dtype else t.f.cast(inv, want)


OPS: Dict[str, Callable] = {
    "topk.default": _topk,
    "max.dim": _max_dim,
    "amax.default": _amax,
    "max.default": _amax,
    "min.default": _amin,
    "argmax.default": _arg_extreme(True),
    "argmin.default": _arg_extreme(False),
    "bucketize.Tensor": _bucketize,
    "amin.default": _amin,
    "sort.default": _sort,
    "sort.stable": _sort_stable,
    "histc.default": _histc,
    "floor_divide.default": _floor_divide,
    "remainder.Scalar": _remainder,
    "remainder.Tensor": _remainder,
    "floor_divide.Scalar": _floor_divide,
    "grouped_mm_fallback.default": _grouped_mm,
    "_grouped_mm.default": _grouped_mm,
    "index_put_.default": _index_put,
    "index_put.default": _index_put,
}
