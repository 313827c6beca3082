"""The losses torch computes as one op: cross_entropy (PyTorch's
K-dimensional form, ignore_index, class weights, label smoothing, any
reduction; class indices or class probabilities), nll_loss and mse_loss. The
cross-entropy of class indices, mean or sum, without class weights is
nn.cross_entropy, one fused kernel over the logits (label smoothing adds
its term beside it); the rest is built from log_softmax and a one-hot
mask of the targets, as torch's own formula."""
from __future__ import annotations

from typing import Callable, Dict

from ..ir import Value
from .common import _FLOATS, _Unsupported, _scalar
from .ops_layout import _pick
from .ops_reductions import log_softmax, shifted_log_sum_exp

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _cross_entropy(t, node, out, logits, targets, weight=None, reduction=1,
                   ignore_index=-100, label_smoothing=0.0):
    logits, targets = t.v(logits), t.v(targets)
    probabilities = targets.type.dtype in _FLOATS
    logits = _classes_last(t, logits)
    if probabilities:
        targets = _classes_last(t, targets)
    reduction = _REDUCTIONS[reduction]
    if probabilities:
        if int(ignore_index) != -100:
            raise _Unsupported("cross_entropy with class probabilities and "
                               "an ignore_index (torch refuses it too)")
        return _cross_entropy_of_probabilities(
            t, logits, targets, None if weight is None else t.v(weight),
            reduction, float(label_smoothing))
    if weight is None and reduction != "none":
        loss = t.f.cross_entropy(logits, targets, reduction,
                                 ignore_index=int(ignore_index))
        if not label_smoothing:
            return loss
        return _smoothed(t, loss, logits, targets, reduction,
                         int(ignore_index), float(label_smoothing))
    return _composite_cross_entropy(
        t, logits, targets, None if weight is None else t.v(weight),
        reduction, int(ignore_index), float(label_smoothing))


def _classes_last(t, x: Value) -> Value:
    """torch's K-dimensional form, [N, C, d1, ..., dk] against targets
    [N, d1, ..., dk] (a segmentation's class per pixel), with the classes
    moved last, where nn.cross_entropy and the row picks read them; [N, C]
    and [C] as they are."""
    rank = x.type.rank
    return x if rank <= 2 else t.transpose(
        x, [0] + list(range(2, rank)) + [1])


def _smoothed(t, nll: Value, logits: Value, targets: Value, reduction: str,
              ignore_index: int, smoothing: float) -> Value:
    """Label smoothing without class weights: (1 − ε)·nll + (ε / C)·smooth,
    nll the fused nn.cross_entropy (which also reports a target out of
    range), smooth = −Σ_c log_softmax = C·lse − Σ_c x on each counted row,
    summed or averaged over them: aten's formula, holding one [..., C]
    temporary (the exponentials) instead of the general path's several."""
    import torch
    classes, dtype = logits.type.shape[-1], logits.type.dtype
    x = logits if dtype == "f32" else t.f.cast(logits, "f32")
    last = [x.type.rank - 1]
    peak, _, log_sum = shifted_log_sum_exp(t, x, last[0])
    lse = t.reshape(t.f.add(peak, log_sum), list(x.type.shape[:-1]))
    rows = t.f.sub(t.f.scale(lse, float(classes)), t.f.reduce_sum(x, last))
    counted = t.f.compare("ne", t.f.cast(targets, "f32"), t.constant(
        torch.tensor(float(ignore_index))))
    everything = list(range(rows.type.rank))
    smooth = t.f.reduce_sum(t.f.mul(rows, counted), everything)
    if reduction == "mean":
        smooth = t.f.div(smooth, t.f.reduce_sum(counted, everything))
    if dtype != "f32":
        smooth = t.f.cast(smooth, dtype)
    return t.f.add(t.f.scale(nll, 1.0 - smoothing),
                   t.f.scale(smooth, smoothing / classes))


def _composite_cross_entropy(t, logits: Value, targets: Value, weight,
                             reduction: str, ignore_index: int,
                             smoothing: float) -> Value:
    """torch's cross_entropy with class weights w, label smoothing ε or no
    reduction, on logits [..., C] (aten's cross_entropy_loss_label_smoothing
    and nll_loss): with p = log_softmax(logits) and each row's one-hot
    target h (a zero row where the target is ignore_index),

        nll = -Σ_c h·w·p,  smooth = -Σ_c w·p (0 on ignored rows),
        loss = (1 - ε)·nll + (ε / C)·smooth   (reduction none),

    summed over the rows for sum, and for mean divided by Σ h·w (the
    weights of the targets counted, their number without weights: 0/0 is
    NaN when all are ignored, as torch's). Unlike the fused kernel this
    holds p and h in memory ([..., C] each). A target outside [0, C) other
    than ignore_index would count as ignored: nn.id_range states torch's
    check, which the runner applies to the targets as it loads them."""
    import torch
    classes = logits.type.shape[-1]
    targets = t.f.id_range(targets, classes, ignore_index)
    p = log_softmax(t, logits, -1)
    dtype = p.type.dtype
    if dtype != "f32":
        p = t.f.cast(p, "f32")
    # The one-hot mask: targets compared with each class index, in f32
    # (exact up to 2^24 classes); ignore_index (negative, or past the
    # classes) matches none of them.
    rows = t.reshape(t.f.cast(targets, "f32"),
                     list(targets.type.shape) + [1])
    onehot = t.f.compare("eq", rows, t.constant(
        torch.arange(classes, dtype=torch.float32)))
    if ignore_index in range(classes):
        # A class index as ignore_index: its targets count for nothing.
        kept = t.f.compare("ne", rows, t.constant(
            torch.tensor(float(ignore_index))))
        onehot = t.f.mul(onehot, kept)
    last = [p.type.rank - 1]
    if weight is not None:
        if weight.type.dtype != "f32":
            weight = t.f.cast(weight, "f32")
        counted, p_weighted = t.f.mul(onehot, weight), t.f.mul(p, weight)
    else:
        counted, p_weighted = onehot, p
    loss = t.f.scale(t.f.reduce_sum(t.f.mul(counted, p), last), -1.0)
    if smoothing:
        counts = t.f.reduce_sum(onehot, last)  # 1 where counted, else 0
        smooth = t.f.mul(t.f.reduce_sum(p_weighted, last), counts)
        loss = t.f.add(t.f.scale(loss, 1.0 - smoothing),
                       t.f.scale(smooth, -smoothing / classes))
    if reduction != "none":
        everything = list(range(loss.type.rank))
        loss = t.f.reduce_sum(loss, everything)
        if reduction == "mean":
            loss = t.f.div(loss, t.f.reduce_sum(
                counted, list(range(counted.type.rank))))
    return loss if dtype == "f32" else t.f.cast(loss, dtype)


def _cross_entropy_of_probabilities(t, logits: Value, targets: Value,
                                    weight, reduction: str,
                                    smoothing: float) -> Value:
    """cross_entropy against class probabilities y [..., C] (mixup and
    cutmix targets, distillation), as aten's
    cross_entropy_loss_prob_target: −Σ_c w·y·log_softmax(logits), y
    smoothed to (1 − ε)·y + ε / C; the mean divides by the number of
    positions (not by weights)."""
    classes = logits.type.shape[-1]
    p = log_softmax(t, logits, -1)
    dtype = p.type.dtype
    if dtype != "f32":
        p, targets = t.f.cast(p, "f32"), t.f.cast(targets, "f32")
    if smoothing:
        targets = t.f.add(t.f.scale(targets, 1.0 - smoothing),
                          _scalar(t, smoothing / classes, "f32"))
    if weight is not None:
        targets = t.f.mul(targets, weight if weight.type.dtype == "f32"
                          else t.f.cast(weight, "f32"))
    loss = t.f.scale(t.f.reduce_sum(t.f.mul(p, targets), [p.type.rank - 1]),
                     -1.0)
    if reduction == "sum":
        loss = t.f.reduce_sum(loss, list(range(loss.type.rank)))
    elif reduction == "mean":
        loss = t.f.reduce_mean(loss, list(range(loss.type.rank)))
    return loss if dtype == "f32" else t.f.cast(loss, dtype)


def _nll_loss(t, node, out, p, targets, weight=None, reduction=1,
              ignore_index=-100):
    """F.nll_loss (aten.nll_loss_nd) of log-probabilities p [N, C],
    [N, C, d1, ..., dk] or [C], as torch's decomposition: each counted
    target's log-probability picked from p by nn.embedding of p as a
    column (no [N, C] one-hot: p may be a vocabulary wide), times its class
    weight, negated; summed, or for mean divided by the counted targets'
    weights. An ignored target picks class 0, weighted 0. The targets pass
    through nn.id_range, so the runner refuses one outside [0, C) other
    than ignore_index as it loads them, as torch raises."""
    import torch
    p, targets = t.v(p), t.v(targets)
    if p.type.dtype not in _FLOATS:
        raise _Unsupported(f"nll_loss of {p.type.dtype} log-probabilities")
    p = _classes_last(t, p)
    classes, rows = p.type.shape[-1], targets.type.numel
    ignore_index = int(ignore_index)
    targets = t.f.id_range(targets, classes, ignore_index)
    flat = t.reshape(targets, [rows])
    counted = t.f.compare("ne", t.f.cast(flat, "f32"),
                          _scalar(t, float(ignore_index), "f32"))
    safe = t.f.mul(flat, t.f.cast(counted, flat.type.dtype))
    positions = t.f.add(safe, t.constant(torch.arange(
        rows, dtype=torch.int64 if flat.type.dtype == "i64" else torch.int32)
        * classes))
    picked = _pick(t, t.reshape(p, [rows * classes]), 0, positions)
    if picked.type.dtype != "f32":
        picked = t.f.cast(picked, "f32")
    if weight is not None:
        weight = t.v(weight)
        if weight.type.dtype != "f32":
            weight = t.f.cast(weight, "f32")
        counted = t.f.mul(counted, _pick(t, weight, 0, safe))
    loss = t.f.scale(t.f.mul(picked, counted), -1.0)
    reduction = _REDUCTIONS[reduction]
    if reduction == "none":
        loss = t.reshape(loss, list(targets.type.shape))
    else:
        loss = t.f.reduce_sum(loss, [0])
        if reduction == "mean":
            loss = t.f.div(loss, t.f.reduce_sum(counted, [0]))
    return loss if p.type.dtype == "f32" else t.f.cast(loss, p.type.dtype)


def _mse_loss(t, node, out, x, target, reduction=1):
    return t.f.mse_loss(t.v(x), t.v(target, out.dtype),
                        _REDUCTIONS[reduction])


OPS: Dict[str, Callable] = {
    "cross_entropy_loss.default": _cross_entropy,
    "mse_loss.default": _mse_loss,
    "nll_loss_nd.default": _nll_loss,
}
