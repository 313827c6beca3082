"""Ops that reduce along dimensions: sum / mean / var, cumsum, the
row-wise normalisations (softmax, log_softmax, layer_norm, group_norm)
and batch_norm (training: its running statistics and num_batches_tracked
updated in their buffers)."""
from __future__ import annotations

import math
from typing import Callable, Dict

from ..ir import Value
from .common import (_INTEGERS, _Unsupported, _dtype, _float, _keep_either,
                     _scalar, _shape)
from .ops_routing import _amax, _amin, _max_dim


def _layer_norm(t, node, out, x, shape, w=None, b=None, eps=1e-5,
                cudnn_enable=True):
    if len(shape) != 1:
        raise _Unsupported("layer_norm over more than the last dimension")
    return t.f.layer_norm(t.v(x), None if w is None else t.v(w),
                          None if b is None else t.v(b), eps)


def _softmax(t, node, out, x, dim, *rest):
    return t.f.softmax(x, dim)


def shifted_log_sum_exp(t, x: Value, dim: int):
    """(m, s, log Σ exp(s)) along `dim`, kept: m = max(x) detached, s =
    x − m, so x's log-sum-exp is m + log Σ exp(s) without overflow. The
    max's gradient cancels (d/dm of log Σ exp(x − m) + m is 0)."""
    peak = t.f.stop_gradient(_max_dim(t, None, None, x, dim, True)[0])
    shifted = t.f.sub(x, peak)
    return peak, shifted, t.f.log(t.f.reduce_sum(t.f.exp(shifted), [dim],
                                                 True))


def log_softmax(t, x: Value, dim: int) -> Value:
    """log_softmax as s − log Σ exp(s), s = x − max(x) along `dim`, in f32
    (bf16 / f16 rounded at the end, as torch accumulates); the gradient is
    torch's, g − softmax(x)·Σg."""
    x = _float(t, x, "log_softmax")
    dtype, dim = x.type.dtype, dim % x.type.rank
    if dtype != "f32":
        x = t.f.cast(x, "f32")
    _, shifted, log_sum = shifted_log_sum_exp(t, x, dim)
    y = t.f.sub(shifted, log_sum)
    return y if dtype == "f32" else t.f.cast(y, dtype)


def _reduce(method):
    """sum / mean over dims; with `dtype` the input is cast to it first,
    as torch's (HF's LabelSmoother sums its log-probabilities in f32)."""
    def build(t, node, out, x, dims=None, keepdim=False, dtype=None):
        if dtype is not None and x.type.dtype != _dtype(dtype):
            x = t.f.cast(x, _dtype(dtype))
        dims = list(range(x.type.rank)) if dims is None else list(dims)
        if method == "reduce_sum" and x.type.dtype in _INTEGERS:
            return t.reshape(_integer_sum(t, x, dims), _shape(out))
        return getattr(t.f, method)(x, dims, keepdim)
    return build


def _integer_sum(t, x: Value, dims) -> Value:
    """The exact sum of an integer tensor over `dims` (a mask's count:
    HF's LabelSmoother counts its labels with `.long().sum()`): the
    summed dims moved last and flattened, their cumsum (nn.cumsum takes
    integers; nn.reduce_sum floats only), its last entry."""
    rank = x.type.rank
    summed = sorted({d % rank for d in dims})
    kept = [d for d in range(rank) if d not in summed]
    if summed != list(range(rank - len(summed), rank)):
        x = t.transpose(x, kept + summed)
    count = math.prod(x.type.shape[d] for d in summed)
    rows = t.reshape(x, [x.type.shape[d] for d in kept] + [count])
    return t.f.slice(t.f.cumsum(rows, len(kept)), len(kept), count - 1,
                     count)


def _any_all(largest: bool):
    """torch.any / torch.all over `dims` (all when none), of a mask or of
    any tensor's non-zero entries: an f32 mask, the max or min of the
    0 / 1 entries (one_hot's and other input checks compute them)."""
    def build(t, node, out, x, dims=None, keepdim=False):
        x = t.v(x)
        mask = t.f.compare("ne", x if x.type.dtype == "f32" else
                           t.f.cast(x, "f32"), _scalar(t, 0.0, "f32"))
        dims = (() if dims is None else
                [dims] if isinstance(dims, int) else dims)
        return (_amax if largest else _amin)(t, node, out, mask, dims,
                                             keepdim)
    return build


def _cumsum(t, node, out, x, dim, dtype=None):
    """torch.cumsum: in the result's dtype (an integer tensor's sums are
    i64 in torch, so an i32 mask is widened first)."""
    want = _dtype(out.dtype)
    if x.type.dtype != want:
        x = t.f.cast(x, want)
    return t.f.cumsum(x, dim)


def _var(t, node, out, x, dims=None, unbiased=True, keepdim=False,
         correction=None):
    """torch.var as mean((x - mean(x))^2) * n / (n - correction)."""
    x = _float(t, x, "var")
    dims = (list(range(x.type.rank)) if dims is None
            else [d % x.type.rank for d in dims])
    correction = (1 if unbiased else 0) if correction is None else correction
    count = math.prod(x.type.shape[d] for d in dims)
    if count - correction <= 0:
        raise _Unsupported(f"var of {count} element(s) with correction "
                           f"{correction}")
    centered = t.f.sub(x, t.f.reduce_mean(x, dims, True))
    squares = t.f.reduce_sum(t.f.mul(centered, centered), dims, keepdim)
    return t.f.scale(squares, 1.0 / (count - correction))


def _cdist(t, node, out, x1, x2, p=2.0, compute_mode=None):
    """torch.cdist as torch computes it for small inputs (larger ones
    export already decomposed into its matmul form): every pair's
    difference [..., P, R, M], then (Σ|d|^p)^(1/p). For p = 2 a pair at
    distance 0 gets no gradient, as torch's _cdist_backward (the square
    root's would be infinite there)."""
    x1, x2 = _float(t, t.v(x1), "cdist"), _float(t, t.v(x2), "cdist")
    if x1.type.dtype != "f32":  # in f32, rounded back at the end
        y = _cdist(t, node, out, t.f.cast(x1, "f32"), t.f.cast(x2, "f32"), p)
        return t.f.cast(y, x1.type.dtype)
    p = float(p)
    if p <= 0 or math.isinf(p):
        raise _Unsupported(f"cdist with p = {p}")
    rows = t.reshape(x1, list(x1.type.shape[:-1]) + [1, x1.type.shape[-1]])
    cols = t.reshape(x2, list(x2.type.shape[:-2]) + [1]
                     + list(x2.type.shape[-2:]))
    diff = t.f.sub(rows, cols)
    last = [diff.type.rank - 1]
    if p == 1:
        return t.f.reduce_sum(t.f.abs(diff), last)
    if p != 2:
        return t.f.pow(t.f.reduce_sum(t.f.pow(t.f.abs(diff), p), last),
                       1.0 / p)
    squares = t.f.reduce_sum(t.f.mul(diff, diff), last)
    apart = t.f.compare("gt", squares, _scalar(t, 0.0, "f32"))
    return t.f.keep(t.f.sqrt(_keep_either(t, apart, squares, 1.0, "f32")),
                    apart)


def _var_mean(t, node, out, x, dims=None, unbiased=True, keepdim=False,
              correction=None):
    """torch.var_mean: var's result and the mean over the same dims."""
    var = _var(t, node, out, x, dims, unbiased, keepdim, correction)
    dims = list(range(x.type.rank)) if dims is None else list(dims)
    return var, t.f.reduce_mean(x, dims, keepdim)


def _native_group_norm(t, node, out, x, w, b, n, c, hw, groups, eps):
    """F.group_norm (GroupNorm: wav2vec2's feature extractor, diffusion and
    detection backbones): each group's C/G channels and positions of
    x [N, C, *] as one row of nn.layer_norm (the biased variance, as
    torch), then the per-channel weight and bias. Its mean and rstd
    results are torch's saved statistics, which a model does not read."""
    import operator
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] != 0:
            raise _Unsupported("native_group_norm's mean / rstd read by the "
                               "model")
    x = _float(t, t.v(x), "group_norm")
    shape = list(x.type.shape)
    rows = t.reshape(x, [shape[0], groups, x.type.numel // (shape[0] * groups)])
    y = t.reshape(t.f.layer_norm(rows, None, None, eps), shape)
    return [_per_channel_affine(t, y, w, b), None, None]


def _per_channel_affine(t, y, w, b):
    """y [N, C, *] times w [C] plus b [C] (either may be None)."""
    per_channel = [1, y.type.shape[1]] + [1] * (y.type.rank - 2)
    if w is not None:
        y = t.f.mul(y, t.reshape(t.v(w), per_channel))
    if b is not None:
        y = t.f.add(y, t.reshape(t.v(b), per_channel))
    return y


def _normalized(t, x, w, b, running_mean, running_var, training, momentum,
                eps):
    """nn.batch_norm of F.batch_norm's arguments: the output and, in
    training, the new running statistics. Without affine parameters the
    weight is ones and the bias zeros."""
    x = t.v(x)
    if running_mean is None and running_var is None:
        if not training:
            raise _Unsupported("batch_norm in eval without running "
                               "statistics")
        return _batch_statistics_norm(t, x, w, b, eps), None, None
    if running_mean is None or running_var is None:
        raise _Unsupported("batch_norm with one running statistic")
    if momentum is None:
        raise _Unsupported("batch_norm with momentum=None (a cumulative "
                           "average)")
    channels = x.type.shape[1]
    if w is None or b is None:
        import torch
        w = torch.ones(channels) if w is None else w
        b = torch.zeros(channels) if b is None else b
    return t.f.batch_norm(x, t.v(w), t.v(b), t.v(running_mean),
                          t.v(running_var), eps=eps, momentum=momentum,
                          training=training)


def _batch_statistics_norm(t, x, w, b, eps):
    """batch_norm with no running statistics (track_running_stats=False,
    InstanceNorm, NF-Nets' weight standardisation through F.batch_norm):
    each channel of x [N, C, *] normalised over its N·* values (the biased
    variance, as torch) as one row of nn.layer_norm, then the per-channel
    weight and bias."""
    x = _float(t, x, "batch_norm")
    shape = list(x.type.shape)
    n, c = shape[0], shape[1]
    spatial = x.type.numel // (n * c)
    rows = t.transpose(t.reshape(x, [n, c, spatial]), [1, 0, 2])
    normed = t.f.layer_norm(t.reshape(rows, [c, n * spatial]), None, None,
                            eps)
    y = t.transpose(t.reshape(normed, [c, n, spatial]), [1, 0, 2])
    return _per_channel_affine(t, t.reshape(y, shape), w, b)


def _batch_norm(t, node, out, x, w, b, running_mean, running_var, training,
                momentum, eps, cudnn_enabled=True):
    """F.batch_norm (BatchNorm1d / 2d) → nn.batch_norm; in training the new
    running statistics go back into the buffers torch updates in place."""
    y, mean, var = _normalized(t, x, w, b, running_mean, running_var,
                               training, momentum, eps)
    if training and running_mean is not None:
        for arg, value in ((node.args[3], mean), (node.args[4], var)):
            buffer = t.buffer_of(arg)
            if buffer is None:
                raise _Unsupported("batch_norm training with statistics "
                                   "that are not this module's buffers")
            t.f.set_buffer(buffer, value)
    return y


# batch_norm as a decomposition leaves it (PyTorch functionalises the whole
# program when it decomposes any op: leaky_relu, mish, arange(end)). The
# saved mean and inverse deviation are its backward's, which nn.batch_norm
# keeps for itself; in training the new running statistics are results,
# which copy_ stores in the buffers (ops_scatter._copy_into_buffer).
def _batch_norm_functional(t, node, out, x, w, b, running_mean, running_var,
                           training, momentum, eps):
    y, mean, var = _normalized(t, x, w, b, running_mean, running_var,
                               training, momentum, eps)
    return [y, None, None, mean, var] if training else [y, None, None,
                                                        None, None]


def _batch_norm_no_stats(t, node, out, x, w, b, training, momentum, eps):
    if not training:
        raise _Unsupported("batch_norm in eval without running statistics")
    return [_batch_statistics_norm(t, t.v(x), w, b, eps), None, None]


def _batch_norm_no_training(t, node, out, x, w, b, running_mean,
                            running_var, momentum, eps):
    y, _, _ = _normalized(t, x, w, b, running_mean, running_var, False,
                          momentum, eps)
    return [y, None, None]


def _add_inplace(t, node, out, x, other, alpha=1):
    """x.add_(n) on an integer buffer (BatchNorm's num_batches_tracked):
    the buffer's new value stored back."""
    buffer = t.buffer_of(node.args[0])
    if (buffer is None or not isinstance(other, int) or alpha != 1
            or buffer.type.dtype not in ("i32", "i64")):
        raise _Unsupported("add_ other than an integer buffer's counter")
    value = t.f.increment(t.v(x), other)
    t.f.set_buffer(buffer, value)
    return value


OPS: Dict[str, Callable] = {
    "layer_norm.default": _layer_norm,
    "native_group_norm.default": _native_group_norm,
    "softmax.int": _softmax,
    "_softmax.default": _softmax,
    "_log_softmax.default": lambda t, node, out, x, dim, *rest:
        log_softmax(t, t.v(x), dim),
    "log_softmax.int": lambda t, node, out, x, dim, *rest:
        log_softmax(t, t.v(x), dim),
    "sum.dim_IntList": _reduce("reduce_sum"),
    "sum.default": _reduce("reduce_sum"),
    "mean.dim": _reduce("reduce_mean"),
    "mean.default": _reduce("reduce_mean"),
    "cumsum.default": _cumsum,
    "any.default": _any_all(True),
    "any.dim": _any_all(True),
    "any.dims": _any_all(True),
    "all.default": _any_all(False),
    "all.dim": _any_all(False),
    "all.dims": _any_all(False),
    "var.correction": _var,
    "var.dim": _var,
    "var_mean.correction": _var_mean,
    "var_mean.dim": _var_mean,
    "_cdist_forward.default": _cdist,
    "batch_norm.default": _batch_norm,
    "_native_batch_norm_legit_functional.default": _batch_norm_functional,
    "_native_batch_norm_legit_no_training.default": _batch_norm_no_training,
    "_native_batch_norm_legit.no_stats": _batch_norm_no_stats,
    "add_.Tensor": _add_inplace,
}
