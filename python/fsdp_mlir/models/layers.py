"""The torch.nn layers the zoo is made of, as `Module`s with their forward.

Each takes the activation shape in front of the feature dimension (`act`):
a Linear applied to [B, T, C] gets act=[B, T]. Default initializers are
PyTorch's; the builders override them where the model's own init differs
(GPT-2, Llama).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from ..ir import Forward, Init, Module, Value, tensor

SQRT5 = math.sqrt(5)


def linear(name: str, din: int, dout: int, act: Sequence[int],
           bias: bool = True, unit: bool = False,
           weight_init: Optional[Init] = None,
           bias_init: Optional[Init] = None) -> Module:
    """nn.Linear(din, dout, bias): weight kaiming_uniform(a=sqrt(5)), bias
    uniform(+-1/sqrt(din)) unless told otherwise."""
    m = Module(name, "Linear", unit=unit)
    w = m.param("weight", [dout, din], weight_init or Init.kaiming_uniform(SQRT5))
    b = None
    if bias:
        bound = 1 / math.sqrt(din)
        b = m.param("bias", [dout], bias_init or Init.uniform(-bound, bound))
    f = m.forward(tensor(*act, din))
    y = f.linear(f.args[0], f.get_param(w, "w"),
                 f.get_param(b, "b") if b is not None else None, name="y")
    f.ret(y)
    return m


def layer_norm(name: str, width: int, act: Sequence[int],
               eps: float = 1e-5) -> Module:
    """nn.LayerNorm(width): weight ones, bias zeros."""
    m = Module(name, "LayerNorm")
    w = m.param("weight", [width], Init.ones)
    b = m.param("bias", [width], Init.zeros)
    f = m.forward(tensor(*act, width))
    f.ret(f.layer_norm(f.args[0], f.get_param(w, "w"), f.get_param(b, "b"),
                       eps=eps, name="y"))
    return m


def rms_norm(name: str, width: int, act: Sequence[int], eps: float = 1e-6,
             kind: str = "RMSNorm") -> Module:
    """nn.RMSNorm(width, eps): weight ones."""
    m = Module(name, kind)
    w = m.param("weight", [width], Init.ones)
    f = m.forward(tensor(*act, width))
    f.ret(f.rms_norm(f.args[0], f.get_param(w, "w"), eps=eps, name="y"))
    return m


def embedding(name: str, num: int, width: int, ids_shape: Sequence[int],
              init: Optional[Init] = None) -> Module:
    """nn.Embedding(num, width): weight normal(0, 1) unless told otherwise."""
    m = Module(name, "Embedding")
    w = m.param("weight", [num, width], init or Init.normal(0.0, 1.0))
    f = m.forward(ids=tensor(*ids_shape, dtype="i64"))
    f.ret(f.embedding(f.args[0], f.get_param(w, "w"), name="e"))
    return m


# The causal mask's value where a key is in the future, relu(j - i)·MASKED
# (so a multiple of it): finite, since -inf would make 0·(-inf) = NaN where
# j <= i; softmax still gives exactly 0 there (exp(-1e30) underflows).
MASKED = -1e30


def attention(f: Forward, q: Value, k: Value, v: Value, num_heads: int,
              causal: bool = False, dropout: float = 0.0,
              decompose: Optional[bool] = None,
              name: Optional[str] = None) -> Value:
    """F.scaled_dot_product_attention(q, k, v, dropout_p=dropout,
    is_causal=causal) on packed heads: q [B, Tq, H·D], k and v [B, Tk, H·D],
    result [B, Tq, H·D] (scale 1/sqrt(D); the causal mask top-left aligned,
    key j > query i masked).

    Without dropout this is the fused `nn.attention` op. With dropout (or
    `decompose` True) it is written out, as PyTorch's math path and
    nn.MultiheadAttention do it, so that the probabilities can be dropped:

        S = (Q_h K_hᵀ)·scale [B, H, Tq, Tk] (+ the causal mask) ->
        P = softmax(S) -> dropout(P, p) -> P V_h [B, H, Tq, D] -> [B, Tq, H·D]

    Memory: the [B, H, Tq, Tk] scores and probabilities are activations the
    backward keeps, where the fused op keeps only O(B·H·Tq) statistics. The
    causal mask is built from two position constants (0..T-1, i64) as
    relu(j - i)·MASKED and added to S: a dense [Tq, Tk] literal would put
    T² numbers in the IR text (1M per attention module at T = 1024)."""
    if decompose is None:
        decompose = dropout > 0.0
    if not decompose:
        if dropout > 0.0:
            raise ValueError("nn.attention has no dropout: decompose it")
        return f.attention(q, k, v, num_heads=num_heads, causal=causal,
                           name=name)
    B, Tq, C = q.type.shape
    Tk = k.type.shape[1]
    H = num_heads
    if C % H or k.type.shape != (B, Tk, C) or v.type.shape != (B, Tk, C):
        raise ValueError(f"attention: {q.type}, {k.type}, {v.type} with "
                         f"{H} heads")
    D = C // H

    def heads(x, n, tag):  # [B, n, H·D] -> [B, H, n, D]
        return f.transpose(f.reshape(x, [B, n, H, D]), [0, 2, 1, 3],
                           name=tag)

    qh, kh, vh = heads(q, Tq, "qh"), heads(k, Tk, "kh"), heads(v, Tk, "vh")
    s = f.scale(f.matmul(qh, kh, transpose_rhs=True), 1.0 / math.sqrt(D),
                name="scores")
    if causal:
        # Positions in f32 (exact to 2^24; bf16 only to 256), the mask then
        # in q's type.
        cols = f.cast(f.arange(Tk), "f32", name="key_pos")
        rows = cols if Tq == Tk else f.cast(f.arange(Tq), "f32")
        rows = f.reshape(rows, [Tq, 1], name="query_pos")
        future = f.relu(f.sub(cols, rows), name="future")  # j - i where > 0
        mask = f.scale(future, MASKED, name="causal_mask")
        if q.type.dtype != "f32":
            mask = f.cast(mask, q.type.dtype)
        s = f.add(s, mask, name="masked_scores")
    p = f.softmax(s, -1, name="probs")
    p = f.dropout(p, dropout, name="probs_dropped" if dropout > 0 else None)
    o = f.matmul(p, vh, name="ctx")  # [B, H, Tq, D]
    return f.reshape(f.transpose(o, [0, 2, 1, 3]), [B, Tq, C], name=name)


def sequential(name: str, children: Sequence[Module],
               unit: bool = False) -> Module:
    """nn.Sequential: children "0", "1", ... called in order (their names
    are replaced by their positions)."""
    m = Module(name, "Sequential", unit=unit)
    for i, c in enumerate(children):
        c.name = str(i)
        m.add(c)
    first = children[0].fwd
    f = m.forward(first.args[0].type)
    h = f.args[0]
    for c in children:
        h = f.call(c, h)
    f.ret(h)
    return m
