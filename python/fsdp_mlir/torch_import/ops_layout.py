"""Layout and indexing: views and reshapes, transposes, expand, repeat, cat,
split / chunk / unbind, slice (strided too) / narrow / select, pad,
index_select, Tensor.unfold's windows, advanced indexing and gather by
constant indices, gather
by a run-time index along any dimension (nn.embedding of the selected
elements, so the gradient scatters back),
and the ops that copy or alias (no-ops here)."""
from __future__ import annotations

import math
from typing import Callable, Dict

from ..ir import Value
from .common import (_FLOATS, _INTEGERS, _Unsupported, _float, _is_tensor,
                     _scalar, _shape)


def _t(t, node, out, x):
    return t.transpose(x, [1, 0]) if x.type.rank == 2 else x


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


def _broadcast_to(t, x: Value, shape) -> Value:
    """x broadcast to `shape`: nn.broadcast of a float; an integer tensor
    (indices computed at run time, spread over the features a gather
    reads: MAE's ids_keep.unsqueeze(-1).repeat(1, 1, D)) as an exact
    integer add of a zero splat of that shape, which has no gradient."""
    if x.type.dtype in _FLOATS:
        return t.f.broadcast(x, shape)
    import torch
    zeros = torch.zeros(shape, dtype=getattr(torch, _INTEGERS[x.type.dtype]))
    return t.f.add(x, t.constant(zeros))


def _expand(t, node, out, x, *rest, **kwargs):
    shape = _shape(out)
    if tuple(shape) == x.type.shape:
        return x
    return _broadcast_to(t, x, shape)


def _repeat(t, node, out, x, repeats):
    """x.repeat(repeats) (DeBERTa's relative-position keys per head): x
    with a unit axis before each of its dims, broadcast along those axes
    to the repeat counts and reshaped, so the gradient sums the tiles
    (nn.broadcast's VJP)."""
    reps = list(repeats)
    shape = [1] * (len(reps) - x.type.rank) + list(x.type.shape)
    if all(r == 1 for r in reps):
        return _view(t, node, out, x)
    unit_axes, tiled = [], []
    for r, d in zip(reps, shape):
        unit_axes += [1, d]
        tiled += [r, d]
    y = _broadcast_to(t, t.reshape(x, unit_axes), tiled)
    return t.reshape(y, _shape(out))


def _broadcast_tensors(t, node, out, tensors):
    return [_expand(t, node, o, t.v(x)) for x, o in zip(tensors, out)]


def _cat(t, node, out, tensors, dim=0):
    # torch.cat skips empty constants (a KV cache's initial state).
    values = [t.v(x, out.dtype) for x in tensors
              if isinstance(x, Value) or x.numel()]
    if len(values) == 1:
        return values[0]
    if values[0].type.dtype in _INTEGERS:
        return _integer_cat(t, values, dim % values[0].type.rank)
    for v in values:
        _float(t, v, "cat")
    return t.f.concat(values, dim)


def _integer_cat(t, values, dim: int) -> Value:
    """torch.cat of integer tensors (PhiMoE's chosen experts), exactly:
    each padded with zeros to its place along `dim`, then added (nn.concat
    takes floats only; nn.pad and integer adds any type)."""
    total = sum(v.type.shape[dim] for v in values)
    start, result = 0, None
    for v in values:
        n = v.type.shape[dim]
        placed = t.f.pad(v, dim, start, total - start - n)
        result = placed if result is None else t.f.add(result, placed)
        start += n
    return result


def _slice(t, node, out, x, dim=0, start=None, end=None, step=1):
    """x[..., start:end:step, ...]. A slice to an empty tensor (Phi-3's
    split with an empty part) is an empty constant: torch.cat skips it
    and no kernel runs on it."""
    import torch
    dim %= x.type.rank
    n = x.type.shape[dim]
    start = 0 if start is None else start
    end = n if end is None else end
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, 0), n)
    if end <= start:
        return torch.empty(_shape(out), dtype=out.dtype)
    if start == 0 and end == n and step == 1:
        return x
    return t.f.slice(x, dim, start, end, step)


def _narrow(t, node, out, x, dim, start, length):
    return _slice(t, node, out, x, dim, start, start + length)


def _select(t, node, out, x, dim, index):
    """x[..., index, ...]: a one-wide slice without its dimension (ViT's
    class token, sequence_output[:, 0])."""
    dim %= x.type.rank
    index %= x.type.shape[dim]
    return t.reshape(t.f.slice(x, dim, index, index + 1), _shape(out))


def _index_select(t, node, out, x, dim, index):
    """x.index_select(dim, index); a run-time index through nn.id_range,
    torch's bound check (no negative index, unlike x[index])."""
    x = t.v(x)
    if isinstance(index, Value):
        index = t.f.id_range(index, x.type.shape[dim % x.type.rank])
    return t.reshape(_pick(t, x, dim, t.v(index)), _shape(out))


def _pick(t, x: Value, dim: int, index: Value) -> Value:
    """x.index_select(dim, index) as a table lookup: nn.embedding of x's
    slices along `dim` (moved to the front by a transpose, the rest
    flattened), whose backward, the scatter-add of the selected slices'
    gradients, is index_select's; the result is moved back."""
    rank = x.type.rank
    dim %= rank
    perm = [dim] + [d for d in range(rank) if d != dim]
    moved = x if dim == 0 else t.transpose(x, perm)
    rest = [x.type.shape[d] for d in perm[1:]]
    table = moved if rank == 2 else t.reshape(
        moved, [x.type.shape[dim], math.prod(rest)])
    picked = t.reshape(t.f.embedding(index, table),
                       [index.type.numel] + rest)
    return t.transpose(picked, [perm.index(d) for d in range(rank)])


def _unfold(t, node, out, x, dim, size, step):
    """Tensor.unfold(dim, size, step), the windows along dim (HaloNet's
    overlapping key blocks): the windows' positions picked along dim,
    split into (window, position) and the position moved last."""
    import torch
    x = _float(t, t.v(x), "unfold")
    dim %= x.type.rank
    windows = torch.arange(x.type.shape[dim]).unfold(0, size, step)
    picked = _pick(t, x, dim, t.constant(windows.reshape(-1)))
    shape = list(x.type.shape)
    shape[dim:dim + 1] = list(windows.shape)
    windowed = t.reshape(picked, shape)
    if dim + 1 == len(shape) - 1:
        return windowed
    perm = [d for d in range(len(shape)) if d != dim + 1] + [dim + 1]
    return t.transpose(windowed, perm)


def _flip(t, node, out, x, dims):
    """torch.flip: each flipped dimension's slices picked in reverse."""
    import torch
    x = _float(t, t.v(x), "flip")  # (nn.embedding picks from float tables)
    for dim in dims:
        n = x.type.shape[dim % x.type.rank]
        x = _pick(t, x, dim, t.constant(torch.arange(n - 1, -1, -1)))
    return x


def _index(t, node, out, x, indices):
    """x[i0, i1, ...] (advanced indexing). With constant indices (HF's
    attention masks index the padding mask by arange grids) the positions
    are PyTorch's own indexing of an arange of x's elements, gathered by
    nn.embedding from x as a column (so the gradient scatters back); with
    indices computed at run time, _index_at_run_time."""
    x = _float(t, t.v(x), "indexing")
    if any(isinstance(i, Value) for i in indices):
        return _index_at_run_time(t, x, indices, out)
    # aten.index's None keeps a dimension whole (Falcon's
    # fused_qkv[..., [-2], :]); Python's None would insert one.
    where = tuple(slice(None) if i is None else i for i in indices)
    return _take(t, x, _elements(x)[where], out)


def _index_at_run_time(t, x: Value, indices, out):
    """x[i0, i1, ...] where some index tensors are computed at run time
    (a sequence classifier's logits[arange(B), last_token], a policy
    gradient's log_probs[arange(N), actions], EfficientFormer's attention
    biases by a buffer of relative positions): each element's flat
    position over the indexed dimensions, Σ_k i_k·stride_k, picks a row of
    x with those dimensions moved first and flattened (_pick: the gradient
    scatters back). A negative index counts from the end, as
    torch's; a run-time one beyond either end stops the step (nn.id_range),
    as torch's bound check. The indices' broadcast shape takes the indexed
    dimensions' place where they are adjacent, and comes first otherwise,
    as in torch."""
    import torch
    shape = list(x.type.shape)
    indices = list(indices) + [None] * (len(shape) - len(indices))
    dims = [d for d, i in enumerate(indices) if i is not None]
    rest = [d for d in range(len(shape)) if d not in dims]
    sizes = [shape[d] for d in dims]
    batch = list(torch.broadcast_shapes(*[
        tuple(indices[d].type.shape if isinstance(indices[d], Value)
              else indices[d].shape) for d in dims]))
    constant = torch.zeros(batch, dtype=torch.int64)
    positions = None
    for k, d in enumerate(dims):
        stride = math.prod(sizes[k + 1:])
        if isinstance(indices[d], Value):
            term = _in_range(t, indices[d], sizes[k])
            if stride != 1:
                term = t.f.mul(term, t.constant(torch.tensor(stride)))
            positions = term if positions is None else t.f.add(positions,
                                                                term)
        else:
            if indices[d].dtype == torch.bool:
                raise _Unsupported("indexing by a mask beside an index "
                                   "computed at run time")
            i = indices[d].to(torch.int64)
            constant = constant + torch.where(i < 0, i + sizes[k], i) * stride
    if list(positions.type.shape) != batch or bool(constant.any()):
        positions = t.f.add(positions, t.constant(constant))
    moved = x if dims + rest == list(range(len(shape))) else t.transpose(
        x, dims + rest)
    flat = t.reshape(moved, [math.prod(sizes)] + [shape[d] for d in rest])
    picked = _pick(t, flat, 0, t.reshape(positions, [math.prod(batch)]))
    picked = t.reshape(picked, batch + [shape[d] for d in rest])
    first = dims[0]
    if dims == list(range(first, first + len(dims))) and first > 0:
        n = len(batch)  # adjacent: the batch dims in the indexed ones' place
        picked = t.transpose(picked, list(range(n, n + first)) +
                             list(range(n)) +
                             list(range(n + first, picked.type.rank)))
    return t.reshape(picked, _shape(out))


def _in_range(t, index: Value, size: int) -> Value:
    """A run-time index (i64) in [0, size): a negative one plus size, as
    torch reads it; nn.id_range on the result stops the step at one beyond
    either end, as torch's bound check."""
    if index.type.dtype not in _INTEGERS:
        raise _Unsupported("indexing by a float tensor")
    index = index if index.type.dtype == "i64" else t.f.cast(index, "i64")
    negative = t.f.compare("lt", t.f.cast(index, "f32"),
                           _scalar(t, 0.0, "f32"))
    wrapped = t.f.add(index, t.f.mul(t.f.cast(negative, "i64"),
                                     _scalar(t, size, "i64")))
    return t.f.id_range(wrapped, size)


def _elements(x: Value):
    """x's flat element positions, in x's shape."""
    import torch
    return torch.arange(x.type.numel).reshape(x.type.shape)


def _take(t, x: Value, positions, out):
    """The elements of x at constant flat positions (out's shape), by
    nn.embedding from x as a column: the gradient scatters back."""
    if positions.numel() == 0:
        raise _Unsupported("indexing that selects nothing")
    return _take_at(t, x, t.constant(positions.reshape(-1)), out)


def _take_at(t, x: Value, positions: Value, out):
    """The elements of x at flat `positions` (i64, any shape), in out's
    shape."""
    column = t.reshape(x, [x.type.numel, 1])
    return t.reshape(t.f.embedding(positions, column), _shape(out))


def _gather(t, node, out, x, dim, index, sparse_grad=False):
    """torch.gather by a constant index: positions from PyTorch's own
    gather of an arange of x's elements, as for indexing. A constant of
    one repeated value gathered by any index is that value (RoBERTa's
    token type ids: its all-zero buffer gathered by the position ids)."""
    import torch
    if (isinstance(index, Value) and _is_tensor(x) and x.numel()
            and torch.equal(x, x.flatten()[:1].expand_as(x))):
        return x.flatten()[0].expand(_shape(out)).clone()
    x = _float(t, t.v(x), "gather")
    if isinstance(index, Value):
        return _gather_at_run_time(t, x, dim % x.type.rank, index, out)
    return _take(t, x, _elements(x).gather(dim, index), out)


def _gather_at_run_time(t, x: Value, dim: int, index: Value, out,
                        checked: bool = True):
    """torch.gather by a run-time index (DeepSeek-V3's router reading the
    chosen experts' scores; a margin loss reading each label's logit):
    each element's flat position in x, the index times dim's stride plus a
    constant offset of the other coordinates, and nn.embedding from x as a
    column there (the gradient scatters back). The index lies in
    [0, size of dim), as torch checks: an nn.id_range (checked as the
    runner loads a step input, and in the step), since a position past a
    row would read the next row's element; `checked` False where the index
    is in range by construction (a sort's positions)."""
    import torch
    shape = list(x.type.shape)
    if any(a != b for d, (a, b) in enumerate(zip(index.type.shape, shape))
           if d != dim) or index.type.rank != len(shape):
        raise _Unsupported("gather by a run-time index whose other "
                           "dimensions differ from the input's")
    if checked:
        index = t.f.id_range(index, shape[dim])
    stride = math.prod(shape[dim + 1:])
    offsets = _elements(x).narrow(dim, 0, 1).expand(index.type.shape)
    positions = t.f.add(
        t.f.mul(index, t.constant(torch.tensor(stride, dtype=torch.int64))),
        t.constant(offsets.contiguous()))
    return _take_at(t, x, positions, out)


def _pad(t, node, out, x, pad, mode="constant", value=None):
    """F.pad: a constant with nn.pad (a negative amount crops: F.fold's
    padding taken off); reflect, replicate and circular (TResNet's
    anti-aliasing, image-to-image generators) pick each padded dimension's
    slices by the positions torch's own padding of an arange gives."""
    import torch
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise _Unsupported(f"pad with mode {mode!r}")
    value = 0.0 if value is None else float(value)
    for i in range(0, len(pad), 2):
        low, high = pad[i], pad[i + 1]
        dim = x.type.rank - 1 - i // 2
        if (low < 0 or high < 0) and mode != "constant":
            raise _Unsupported(f"pad with mode {mode!r} by a negative "
                               "amount")
        if low < 0 or high < 0:
            n = x.type.shape[dim]
            x = t.f.slice(x, dim, max(-low, 0), n - max(-high, 0), 1)
            low, high = max(low, 0), max(high, 0)
        if not (low or high):
            continue
        if mode == "constant":
            x = t.f.pad(x, dim, low, high, value)
            continue
        n = x.type.shape[dim]
        _float(t, x, f"pad with mode {mode!r}")
        try:
            positions = torch.nn.functional.pad(
                torch.arange(n, dtype=torch.float64).view(1, 1, n),
                (low, high), mode=mode).view(-1).long()
        except (RuntimeError, NotImplementedError) as e:
            raise _Unsupported(f"pad with mode {mode!r}: {e}") from None
        x = _pick(t, x, dim, t.constant(positions))
    return x


def _mode_pad(mode):
    def build(t, node, out, x, pad):
        return _pad(t, node, out, x, pad, mode)
    return build


def _constant_pad_nd(t, node, out, x, pad, value=0):
    return _pad(t, node, out, x, pad, "constant", value)


def _identity(t, node, out, x, *args, **kwargs):
    return x


def _detach(t, node, out, x):
    """Tensor.detach(): nn.stop_gradient (an integer value carries no
    gradient anyway)."""
    if not isinstance(x, Value) or x.type.dtype not in _FLOATS:
        return x
    return t.f.stop_gradient(x)


OPS: Dict[str, Callable] = {
    "t.default": _t,
    "view.default": _view,
    "reshape.default": _view,
    "reshape_as.default": _view,
    "view_as.default": _view,
    "unflatten.int": _view,
    "_unsafe_view.default": _view,
    "flatten.using_ints": _view,
    "unsqueeze.default": _view,
    "squeeze.default": _view,
    "squeeze.dim": _view,
    "squeeze.dims": _view,
    "transpose.int": _transpose,
    "permute.default": _permute,
    "expand.default": _expand,
    "expand_as.default": _expand,
    "broadcast_to.default": _expand,
    "repeat.default": _repeat,
    "broadcast_tensors.default": _broadcast_tensors,
    "cat.default": _cat,
    "concat.default": _cat,
    "split.Tensor": _split,
    "chunk.default": _chunk,
    "split_with_sizes.default": _split_with_sizes,
    "unbind.int": _unbind,
    "slice.Tensor": _slice,
    "narrow.default": _narrow,
    "select.int": _select,
    "index_select.default": _index_select,
    "flip.default": _flip,
    "unfold.default": _unfold,
    "reflection_pad1d.default": _mode_pad("reflect"),
    "reflection_pad2d.default": _mode_pad("reflect"),
    "reflection_pad3d.default": _mode_pad("reflect"),
    "replication_pad1d.default": _mode_pad("replicate"),
    "replication_pad2d.default": _mode_pad("replicate"),
    "replication_pad3d.default": _mode_pad("replicate"),
    "index.Tensor": _index,
    "gather.default": _gather,
    "pad.default": _pad,
    "constant_pad_nd.default": _constant_pad_nd,
    "clone.default": _identity,
    "contiguous.default": _identity,
    "alias.default": _identity,
    "lift_fresh_copy.default": _identity,
    "detach.default": _detach,
    "detach_.default": _detach,
}
