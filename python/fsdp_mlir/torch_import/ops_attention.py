"""scaled_dot_product_attention: the fused nn.attention between the
[B, H, T, D] <-> [B, T, H*D] reshapes (grouped k/v heads, any scale, keys
of another length), a constant all-true or causal mask as nn.attention's
own, any other mask as its additive bias; with dropout, PyTorch's math
backend written out (matmul, mask, softmax, dropout, matmul)."""
from __future__ import annotations

import math
from typing import Callable, Dict

from ..ir import Value
from .common import (_Unsupported, _as_f32, _keep_either, _mask_not,
                     _scalar)


def _sdpa(t, node, out, q, k, v, attn_mask=None, dropout_p=0.0,
          is_causal=False, scale=None, enable_gqa=False):
    """[B, H, T, D] heads → nn.attention on [B, T, H*D] and back. A mask
    other than all-true or causal becomes its additive bias (a bool one:
    −inf where it is false); dropout takes PyTorch's math backend."""
    import torch
    q, k, v = t.v(q), t.v(k), t.v(v)
    if q.type.rank != 4:
        return _sdpa_flattened(t, node, out, q, k, v, attn_mask, dropout_p,
                               is_causal, scale)
    B, H, T, D = q.type.shape
    kv_heads, S = k.type.shape[1], k.type.shape[2]
    causal = bool(is_causal)
    dropout_p = float(dropout_p)
    scale = 1 / math.sqrt(D) if scale is None else float(scale)
    is_bool = False
    if isinstance(attn_mask, Value):
        # A run-time bool tensor is an f32 mask here: ask the graph.
        arg = node.kwargs.get("attn_mask",
                              node.args[3] if len(node.args) > 3 else None)
        is_bool = arg.meta["val"].dtype == torch.bool
    elif attn_mask is not None:
        kind = _fused_mask_kind(attn_mask, B, H, T, S, causal)
        if kind:  # nn.attention's own mask: none, or causal
            causal = causal or kind == "causal"
            attn_mask = None
        elif attn_mask.dtype == torch.bool:  # its bias, folded
            attn_mask = t.constant(torch.zeros(attn_mask.shape).masked_fill(
                ~attn_mask, float("-inf")))
        else:
            attn_mask = t.constant(attn_mask.to(torch.float32))
    if dropout_p:
        return _sdpa_math(t, q, k, v, attn_mask, is_bool, causal, scale,
                          dropout_p)
    bias = None if attn_mask is None else _attention_bias(
        t, attn_mask, is_bool, [B, H, T, S], q.type.dtype)

    def packed(x, heads, length):
        return t.reshape(t.transpose(x, [0, 2, 1, 3]),
                         [B, length, heads * D])

    default = math.isclose(scale, 1 / math.sqrt(D), rel_tol=1e-9)
    o = t.f.attention(packed(q, H, T), packed(k, kv_heads, S),
                      packed(v, kv_heads, S), H, num_kv_heads=kv_heads,
                      causal=causal, scale=None if default else scale,
                      bias=bias)
    return t.transpose(t.reshape(o, [B, T, H, D]), [0, 2, 1, 3])


def _sdpa_flattened(t, node, out, q, k, v, attn_mask, dropout_p, is_causal,
                    scale):
    """SDPA on [..., T, D] other than [B, H, T, D] (Twins' windows as
    [B, windows, H, T, D], or [B, T, D]): every leading index one batch
    row of a single head, then the leading dims back."""
    lead = list(q.type.shape[:-2])
    if [list(x.type.shape[:-2]) for x in (k, v)] != [lead, lead]:
        raise _Unsupported("attention whose q, k and v leading dims differ "
                           f"({q.type.shape}, {k.type.shape}, "
                           f"{v.type.shape})")
    rank = getattr(attn_mask, "ndim", None) or getattr(
        getattr(attn_mask, "type", None), "rank", 0)
    if rank > 2:
        raise _Unsupported(f"a {rank}-D attention mask on {len(lead) + 2}-D "
                           "heads")
    rows = math.prod(lead)

    def heads(x):
        return t.reshape(x, [rows, 1] + list(x.type.shape[-2:]))
    o = _sdpa(t, node, out, heads(q), heads(k), heads(v), attn_mask,
              dropout_p, is_causal, scale)
    return t.reshape(o, lead + list(o.type.shape[-2:]))


def _attention_bias(t, mask: Value, is_bool: bool, full, dtype) -> Value:
    """An SDPA mask as nn.attention's additive bias [1 or B, 1 or H, T, S]:
    a bool mask is 0 where true, −inf where false; a float one as it is."""
    if is_bool:
        mask = t.f.keep(_scalar(t, float("-inf"), "f32"), _mask_not(t, mask))
    shape = [1] * (4 - mask.type.rank) + list(mask.type.shape)
    mask = t.reshape(mask, shape)
    if any(shape[d] not in (1, full[d]) for d in (0, 1)):
        raise _Unsupported(f"attention mask of shape {shape}")
    want = shape[:2] + full[2:]
    if shape != want:
        mask = t.f.broadcast(mask, want)
    return mask if mask.type.dtype == dtype else t.f.cast(mask, dtype)


def _fused_mask_kind(mask, B, H, T, S, causal):
    """"all" for a constant mask that is all-true, "causal" for one that is
    (without is_causal, T = S) exactly causal: nn.attention's own masks;
    None for any other."""
    import torch
    if mask.dtype != torch.bool and not bool(
            ((mask == 0) | torch.isneginf(mask)).all()):
        return None
    try:
        m = torch.broadcast_to(mask, (B, H, T, S))
    except RuntimeError:
        raise _Unsupported(f"attention mask of shape "
                           f"{list(mask.shape)}") from None
    keep = m if m.dtype == torch.bool else m == 0
    if bool(keep.all()):
        return "all"
    lower = torch.ones(T, S, dtype=torch.bool).tril()
    if T == S and not causal and bool((keep == lower).all()):
        return "causal"
    return None


def _sdpa_math(t, q, k, v, mask, is_bool, causal, scale, dropout_p):
    """PyTorch's math SDPA: the [B, H, T, S] scores materialised. A bool
    mask selects (masked scores are -inf), a float one is added: a padding
    mask, or a bias whose gradient flows back (T5's relative positions).
    Dropout applies to the probabilities, as PyTorch's does (its masks are
    our Philox ones, not torch's)."""
    import torch
    B, H, T, D = q.type.shape
    kv_heads, S = k.type.shape[1], k.type.shape[2]
    if kv_heads != H:  # grouped-query: each k/v head serves H / kv heads
        def repeat(x):
            x = t.reshape(x, [B, kv_heads, 1, S, D])
            x = t.f.broadcast(x, [B, kv_heads, H // kv_heads, S, D])
            return t.reshape(x, [B, H, S, D])
        k, v = repeat(k), repeat(v)
    dtype = q.type.dtype
    scores = t.f.scale(t.f.matmul(q, k, transpose_rhs=True), scale)
    ninf = _scalar(t, float("-inf"), "f32")
    if causal:
        lower = torch.ones(T, S, dtype=torch.float32).tril()
        scores = _keep_either(t, t.constant(lower), scores, ninf, dtype)
    if mask is not None and is_bool:
        scores = _keep_either(t, _as_f32(t, mask), scores, ninf, dtype)
    elif mask is not None:
        scores = t.f.add(scores, mask if mask.type.dtype == dtype
                         else t.f.cast(mask, dtype))
    p = t.f.dropout(t.f.softmax(scores, -1), dropout_p)
    return t.f.matmul(p, v)


OPS: Dict[str, Callable] = {
    "scaled_dot_product_attention.default": _sdpa,
}
