"""Matrix products and the layers that are one: linear, addmm (GPT-2's
Conv1D), mm / bmm / matmul, embedding, and conv2d when it is a linear map
of non-overlapping patches (ViT's patch embedding)."""
from __future__ import annotations

from typing import Callable, Dict

from ..ir import Value
from .common import _Unsupported


def _linear(t, node, out, x, w, b=None):
    return t.f.linear(t.v(x), t.v(w), None if b is None else t.v(b))


def _addmm(t, node, out, bias, x, w, beta=1, alpha=1):
    """GPT-2's Conv1D: bias + x·W with W [in, out]."""
    if beta != 1 or alpha != 1:
        raise _Unsupported(f"addmm with beta={beta}, alpha={alpha}")
    w = t.v(w)
    return t.f.linear(t.v(x), t.transpose(w, [1, 0]), t.v(bias))


def _mm(t, node, out, a, b):
    return t.f.matmul(t.v(a), t.v(b))


def _embedding(t, node, out, w, idx, padding_idx=-1, scale_grad=False,
               sparse=False):
    if scale_grad or sparse:
        raise _Unsupported("embedding with scale_grad_by_freq or sparse")
    rows = w.type.shape[0] if isinstance(w, Value) else int(w.shape[0])
    pad = None if padding_idx is None or padding_idx == -1 else \
        padding_idx % rows
    return t.f.embedding(t.v(idx), t.v(w), padding_idx=pad)


def _conv2d(t, node, out, x, w, b=None, stride=1, padding=0, dilation=1,
            groups=1):
    """A convolution whose stride equals its kernel (ViT's patch embedding)
    is a linear map of non-overlapping patches: x [B, C, H, W] →
    patches [B·h·w, C·kh·kw] (C, kh, kw order, as the weight's) → linear
    with the weight as [O, C·kh·kw] → [B, O, h, w]."""
    def pair(v):
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return v * 2 if len(v) == 1 else v
    x, w = t.v(x), t.v(w)
    o, c, kh, kw = w.type.shape
    stride, padding, dilation = pair(stride), pair(padding), pair(dilation)
    bsz, _, height, width = x.type.shape
    if (stride != [kh, kw] or padding != [0, 0] or dilation != [1, 1]
            or groups != 1 or height % kh or width % kw):
        raise _Unsupported(
            f"conv2d other than non-overlapping patches (kernel {[kh, kw]}, "
            f"stride {stride}, padding {padding}, dilation {dilation}, "
            f"groups {groups}, input {height}x{width})")
    h, wd = height // kh, width // kw
    patches = t.reshape(x, [bsz, c, h, kh, wd, kw])
    patches = t.transpose(patches, [0, 2, 4, 1, 3, 5])
    patches = t.reshape(patches, [bsz * h * wd, c * kh * kw])
    y = t.f.linear(patches, t.reshape(w, [o, c * kh * kw]),
                   None if b is None else t.v(b))
    y = t.reshape(y, [bsz, h, wd, o])
    return t.transpose(y, [0, 3, 1, 2])


OPS: Dict[str, Callable] = {
    "linear.default": _linear,
    "addmm.default": _addmm,
    "mm.default": _mm,
    "bmm.default": _mm,
    "matmul.default": _mm,
    "embedding.default": _embedding,
    "conv2d.default": _conv2d,
}
