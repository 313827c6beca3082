"""The decode step of a causal language model with a key/value cache
(`gpt2(..., kv_cache=True)`, `llama(..., kv_cache=True)`): one token per
row at a run-time position p, attending to the keys and values of
positions 0..p-1 held in per-layer cache tensors and to its own.

The step's contract with the runner (runtime/runner/KvCache.h), in the
root forward's signature and named outputs:

    inputs   0 idx [B, 1] i64, 1 targets [B, 1] i64, 2 pos [B, 1] i64,
             3 + j: cache tensor j [B, S, W] (layer l's keys at j = 2l,
             its values at j = 2l + 1; S the context, the cache's length)
    outputs  "loss", "logits" [B, 1, V], "cache.j" [B, 1, W]: the key or
             value of this token, which the runner writes into row p of
             input 3 + j before the next step.

Rows p..S-1 of the cache hold nothing yet: a bias of MASKED on them (and
0 on 0..p-1 and on the token's own key, concatenated at the end) is the
run-time length mask, computed in the step from `pos`. RoPE at a run-time
position rotates the token's vector placed in row p of an [B, S, W] zero
tensor (nn.rope turns row t by angle t) and sums the rows back: the
other rows stay exactly zero, so the sum is the rotated row itself.
"""

from __future__ import annotations

from typing import Optional, Tuple

from ..ir import Forward, Value, tensor
from .layers import MASKED

FIRST_CACHE_INPUT = 3


def cache_positions(f: Forward, pos: Value,
                    length: int) -> Tuple[Value, Value]:
    """From positions `pos` [B, 1] (i64): the attention bias
    [B, 1, 1, length + 1] over (cache rows, own key) and the one-hot
    row selector [B, length, 1] (1 at row pos), both f32."""
    B = pos.type.shape[0]
    where = f.cast(pos, "f32", name="pos_f")                # [B, 1]
    rows = f.cast(f.arange(length), "f32", name="rows")     # [S]
    empty = f.compare("ge", rows, where, name="empty_rows")  # [B, S]
    bias = f.pad(f.scale(empty, MASKED), 1, 0, 1, 0.0, name="cache_bias")
    bias = f.reshape(bias, [B, 1, 1, length + 1], name="bias")
    onehot = f.reshape(f.compare("eq", rows, where), [B, length, 1],
                       name="onehot")
    return bias, onehot


def rope_at(f: Forward, x: Value, onehot: Value, heads: int, theta: float,
            name: Optional[str] = None) -> Value:
    """nn.rope of `x` [B, 1, W] at the position `onehot` [B, S, 1]
    selects: x placed in that row of zeros, rotated, rows summed."""
    placed = f.mul(onehot, x)                               # [B, S, W]
    turned = f.rope(placed, heads, theta)
    return f.reduce_sum(turned, [1], keepdim=True, name=name)


def cached_attention(f: Forward, q: Value, k: Value, v: Value,
                     past_k: Value, past_v: Value, bias: Value,
                     heads: int, kv_heads: Optional[int] = None,
                     name: Optional[str] = None) -> Value:
    """Attention of the token's query `q` [B, 1, H·D] over the cache rows
    `past_k` / `past_v` [B, S, Hkv·D] and its own `k`, `v` [B, 1, Hkv·D];
    `bias` masks the rows not written yet."""
    keys = f.concat([past_k, k], 1, name=None if name is None
                    else name + "_keys")
    values = f.concat([past_v, v], 1, name=None if name is None
                      else name + "_values")
    return f.attention(q, keys, values, num_heads=heads,
                       num_kv_heads=kv_heads, bias=bias, name=name)


def cache_types(batch: int, length: int, width: int, layers: int):
    """The root forward's cache arguments: k and v of each layer."""
    t = tensor(batch, length, width)
    named = {}
    for layer in range(layers):
        named[f"past_k{layer}"] = t
        named[f"past_v{layer}"] = t
    return named


def cache_names(layers: int):
    return [f"cache.{j}" for j in range(2 * layers)]
