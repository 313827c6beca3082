"""Writes into a tensor, as a functional program has them: slice_scatter
(a slice assignment `x[..., a:b] = y`, DeepSeek-V3's keys built from two
parts, Funnel's pooled positions) → the kept parts and the new one
concatenated; copy (the value written, `x.copy_(y)`) → y broadcast and
cast to x's shape and type; scatter of one value, or scatter_add of a tensor, at a run-time index
(DeepSeek-V3's mask of the chosen expert groups, PhiMoE's router
backward) → where the index hits, found by comparing it with each
position along the dimension; index_put
at constant indices (F.fold, `x[i] += v`) → each element read from a
column of the values. Their
gradients follow from those ops': the overwritten parts of the base get
none."""
from __future__ import annotations

import math
from typing import Callable, Dict

import torch

from ..ir import Value
from .common import (_FLOATS, _Unsupported, _as_f32, _dtype, _float,
                     _is_tensor, _keep_either, _shape)
from .ops_layout import _cat, _expand, _slice


def _slice_scatter(t, node, out, base, src, dim=0, start=None, end=None,
                   step=1):
    base = t.v(base, out.dtype)
    dim %= base.type.rank
    n = base.type.shape[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    end = n if end is None else (end + n if end < 0 else end)
    start = min(max(start, 0), n)  # clamped as torch clamps a slice
    end = min(max(end, start), n)
    if end == start:  # nothing written
        return base
    if step != 1:
        raise _Unsupported("slice_scatter with a step (a strided slice "
                           "assignment)")
    if base.type.dtype not in _FLOATS:
        raise _Unsupported("slice_scatter into an integer tensor")
    parts = [_slice(t, node, None, base, dim, 0, start) if start else None,
             t.v(src, out.dtype),
             _slice(t, node, None, base, dim, end, n) if end < n else None]
    return _cat(t, node, out, [p for p in parts if p is not None], dim)


def _copy(t, node, out, x, src, non_blocking=False):
    value = t.v(src, out.dtype)
    want = _dtype(out.dtype)
    if value.type.dtype != want:
        value = t.f.cast(value, want)
    return _expand(t, node, out, value)


def _copy_into_buffer(t, node, out, x, src, non_blocking=False):
    """buffer.copy_(value), as functionalisation writes every buffer update
    (BatchNorm's running statistics; its num_batches_tracked += 1 as
    copy_(n, n + 1), which stays the counter's in-place increment): the
    value stored in the buffer."""
    buffer = t.buffer_of(node.args[0])
    if buffer is None:
        raise _Unsupported("copy_ into module state other than a buffer")
    source = node.args[1]
    if (getattr(source, "target", None) is not None
            and str(source.target) == "aten.add.Tensor"
            and t.buffer_of(source.args[0]) is buffer
            and isinstance(source.args[1], int)
            and buffer.type.dtype in ("i32", "i64")):
        value = t.f.increment(t.v(x), source.args[1])
    else:
        value = t.v(src)
        if value.type.dtype != buffer.type.dtype:
            value = t.f.cast(value, buffer.type.dtype)
    t.f.set_buffer(buffer, value)
    return value


def _hits(t, out, dim: int, index, what: str):
    """For x.scatter*(dim, index, ...) into a tensor of out's shape: the
    mask hits[..., k, j, ...] = (index[..., k, ...] == j), an axis of the
    positions j along `dim` after index's own. The index lies in [0, size
    of dim), as torch checks (nn.id_range): one past it would name no
    position and be dropped."""
    if not isinstance(index, Value):
        raise _Unsupported(f"{what} by a constant index into a run-time "
                           "tensor")
    shape = _shape(out)
    if [d for i, d in enumerate(index.type.shape) if i != dim] != \
            [d for i, d in enumerate(shape) if i != dim]:
        raise _Unsupported(f"{what} by an index whose other dimensions "
                           "differ from the input's")
    index = t.f.id_range(index, shape[dim])
    ids = t.reshape(_as_f32(t, index), list(index.type.shape[:dim + 1])
                    + [1] + list(index.type.shape[dim + 1:]))
    positions = torch.arange(shape[dim], dtype=torch.float32).reshape(
        [shape[dim] if i == dim + 1 else 1 for i in range(len(shape) + 1)])
    return t.f.compare("eq", ids, t.constant(positions))


def _scatter_value(t, node, out, x, dim, index, value):
    """x.scatter(dim, index, value): value where some index along `dim`
    names the position, x elsewhere (index's other dimensions are x's)."""
    dim %= len(out.shape)
    count = t.f.reduce_sum(_hits(t, out, dim, index, "scatter"), [dim])
    hit = t.f.compare("gt", count, t.constant(torch.tensor(0.0)))
    return _keep_either(t, hit, float(value), x, _dtype(out.dtype))


def _scatter_add(t, node, out, x, dim, index, src):
    """x.scatter_add(dim, index, src): x plus each src element at the
    position its index names along `dim` (PhiMoE's router backward), the
    sum over index's entries of src times its hit mask; src and index have
    the same shape. src's gradient is the cotangent read at its index, as
    torch's gather."""
    dim %= len(out.shape)
    src = _float(t, t.v(src, out.dtype), "scatter_add")
    if not isinstance(index, Value) or src.type.shape != index.type.shape:
        raise _Unsupported("scatter_add with src and index of different "
                           "shapes")
    hits = _hits(t, out, dim, index, "scatter_add")
    if hits.type.dtype != src.type.dtype:
        hits = t.f.cast(hits, src.type.dtype)
    column = t.reshape(src, list(src.type.shape[:dim + 1]) + [1]
                       + list(src.type.shape[dim + 1:]))
    added = t.f.reduce_sum(t.f.mul(column, hits), [dim])
    if _is_tensor(x) and not x.any():
        return added
    return t.f.add(t.v(x, out.dtype), added)


def _index_put_at_constant_positions(t, node, out, x, indices, values,
                                     accumulate):
    """x.index_put(indices, values, accumulate) where the indices are
    constants (F.fold's col2im in VOLO's outlook attention, `x[i] += v`):
    each element of the result read by nn.embedding from a column of
    values' elements, so the gradient scatters back. accumulate: the
    values landing on an element (at most m of them, the list padded with
    a zero appended to the column) summed and added to x; otherwise x's
    elements and values' in one column, each element reading x's own or
    the value written there (positions written twice are refused: which
    write wins is undefined in torch)."""
    shape = _shape(out)
    numel = math.prod(shape)
    where = tuple(slice(None) if i is None else torch.as_tensor(i)
                  for i in indices)
    indexed = torch.arange(numel).reshape(shape)[where]
    positions, count = indexed.reshape(-1), indexed.numel()
    if count == 0:
        return t.v(x, out.dtype)
    dtype = _dtype(out.dtype)
    written = _float(t, t.v(values, out.dtype), "index_put")
    if written.type.shape != tuple(indexed.shape):
        written = t.f.broadcast(written, list(indexed.shape))
    column = t.reshape(written, [count, 1])
    if not accumulate:
        if torch.unique(positions).numel() != count:
            raise _Unsupported("index_put that writes a position twice "
                               "without accumulate (torch leaves which "
                               "write wins undefined)")
        source = torch.arange(numel)
        source[positions] = numel + torch.arange(count)
        table = t.f.concat([t.reshape(t.v(x, out.dtype), [numel, 1]),
                            column], 0)
        return t.reshape(t.f.embedding(t.constant(source), table), shape)
    # slots[e, j]: the j-th value landing on element e, or `count` (the
    # zero appended to the column).
    order = torch.argsort(positions, stable=True)
    hits = torch.bincount(positions, minlength=numel)
    first = torch.cumsum(hits, 0) - hits
    rank = torch.arange(count) - first[positions[order]]
    slots = torch.full((numel, int(hits.max())), count)
    slots[positions[order], rank] = order
    zero = t.constant(torch.zeros(1, 1))
    if dtype != "f32":
        zero = t.f.cast(zero, dtype)
    picked = t.f.embedding(t.constant(slots), t.f.concat([column, zero], 0))
    summed = t.reshape(t.f.reduce_sum(
        t.reshape(picked, list(slots.shape)), [1]), shape)
    if _is_tensor(x) and not x.any():
        return summed
    return t.f.add(t.v(x, out.dtype), summed)


OPS: Dict[str, Callable] = {
    "slice_scatter.default": _slice_scatter,
    "copy.default": _copy,
    "copy_.default": _copy_into_buffer,
    "scatter.value": _scatter_value,
    "scatter_add.default": _scatter_add,
}
