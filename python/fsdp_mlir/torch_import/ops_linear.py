"""Matrix products and the layers that are one: linear, addmm (GPT-2's
Conv1D), mm / bmm / matmul, embedding."""
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
    """mm / bmm / matmul. Batched operands whose batch dimensions differ
    (Mamba's dt_proj.weight @ a [B, r, T] activation) are broadcast to the
    result's batch shape first (nn.broadcast's VJP sums the gradient back):
    the GEMM runs on equal batches, or on a shared [k, n] right operand."""
    a, b = t.v(a), t.v(b)
    if a.type.rank >= 2 and b.type.rank > 2:
        batch = [int(d) for d in out.shape[:-2]]
        a, b = (x if list(x.type.shape[:-2]) == batch
                else t.f.broadcast(x, batch + list(x.type.shape[-2:]))
                for x in (a, b))
    return t.f.matmul(a, b)


def _embedding(t, node, out, w, idx, padding_idx=-1, scale_grad=False,
               sparse=False):
    if scale_grad or sparse:
        raise _Unsupported("embedding with scale_grad_by_freq or sparse")
    rows = w.type.shape[0] if isinstance(w, Value) else int(w.shape[0])
    pad = None if padding_idx is None or padding_idx == -1 else \
        padding_idx % rows
    return t.f.embedding(t.v(idx), t.v(w), padding_idx=pad)


OPS: Dict[str, Callable] = {
    "linear.default": _linear,
    "addmm.default": _addmm,
    "mm.default": _mm,
    "bmm.default": _mm,
    "matmul.default": _mm,
    "embedding.default": _embedding,
}
