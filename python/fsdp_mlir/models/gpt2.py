"""GPT-2 (nanoGPT's module names): token + learned position embeddings,
pre-LayerNorm blocks of causal multi-head attention and a tanh-GELU MLP, a
final LayerNorm and an lm_head tied to the token embedding; cross-entropy
over next-token targets. examples/gpt2.mlir and examples/char_gpt.mlir
are its output."""

from __future__ import annotations

import math
from typing import Optional

from ..ir import Init, Model, Module, tensor
from .kv_cache import (FIRST_CACHE_INPUT, cache_names, cache_positions,
                       cache_types, cached_attention)
from .layers import attention, embedding, layer_norm, linear


def _gpt_linear(name, din, dout, act, std):
    return linear(name, din, dout, act, weight_init=Init.normal(0.0, std),
                  bias_init=Init.zeros)


def _block(index: int, B: int, T: int, C: int, H: int, layers: int,
           dropout: float, decompose: bool,
           cache: Optional[int] = None) -> Module:
    """With `cache` (its length S) the decode step's block (kv_cache.py):
    forward(x [B, 1, C], bias, past_k, past_v) -> (x, k, v)."""
    act = [B, T]
    extra = [] if cache is None else \
        [tensor(B, 1, 1, cache + 1), tensor(B, cache, C), tensor(B, cache, C)]
    proj_std = 0.02 / math.sqrt(2 * layers)
    blk = Module(str(index), "Block")
    ln_1 = blk.add(layer_norm("ln_1", C, act))

    attn = blk.add(Module("attn", "CausalSelfAttention"))
    c_attn = attn.add(_gpt_linear("c_attn", C, 3 * C, act, 0.02))
    c_proj = attn.add(_gpt_linear("c_proj", C, C, act, proj_std))
    f = attn.forward(tensor(B, T, C), *extra)
    qkv = f.call(c_attn, f.args[0], name="qkv")
    q, k, v = f.split(qkv, [C, C, C], dim=2, names=["q", "k", "v"])
    if cache is None:
        o = attention(f, q, k, v, H, causal=True, dropout=dropout,
                      decompose=decompose or None, name="o")
    else:
        o = cached_attention(f, q, k, v, f.args[2], f.args[3], f.args[1], H,
                             name="o")
    y = f.call(c_proj, o, name="y")
    y = f.dropout(y, dropout, name="y_drop")  # resid_dropout
    f.ret(*([y] if cache is None else [y, k, v]))

    ln_2 = blk.add(layer_norm("ln_2", C, act))
    mlp = blk.add(Module("mlp", "MLP"))
    c_fc = mlp.add(_gpt_linear("c_fc", C, 4 * C, act, 0.02))
    c_proj2 = mlp.add(_gpt_linear("c_proj", 4 * C, C, act, proj_std))
    f = mlp.forward(tensor(B, T, C))
    h = f.call(c_fc, f.args[0], name="h")
    g = f.gelu(h, approximate="tanh", name="g")
    y = f.call(c_proj2, g, name="y")
    f.ret(f.dropout(y, dropout, name="y_drop"))

    f = blk.forward(tensor(B, T, C), *extra)
    x = f.args[0]
    if cache is None:
        x = f.add(x, f.call(attn, f.call(ln_1, x)))
    else:
        a, k, v = f.call_results(attn, f.call(ln_1, x), *f.args[1:])
        x = f.add(x, a)
    x = f.add(x, f.call(mlp, f.call(ln_2, x)))
    f.ret(*([x] if cache is None else [x, k, v]))
    return blk


def gpt2_params(vocab: int, ctx: int, width: int, layers: int) -> int:
    """nanoGPT's count (tied lm_head): V·C + T·C + L·(12C² + 13C) + 2C."""
    C = width
    return vocab * C + ctx * C + layers * (12 * C * C + 13 * C) + 2 * C


def gpt2(vocab: int = 64, ctx: int = 16, width: int = 32, heads: int = 4,
         layers: int = 2, batch: int = 4, dropout: float = 0.0,
         decompose_attention: bool = False, kv_cache: bool = False,
         name: str = "gpt2") -> Model:
    """GPT-2 with nanoGPT's module names and GPT-2's initialization:
    normal(0, 0.02), residual projections normal(0, 0.02/sqrt(2·layers)),
    zero biases, LayerNorm (1, 0); lm_head tied to transformer.wte. The
    defaults are examples/gpt2.mlir's model; `batch` is per rank.

    `dropout` is nanoGPT's (GPTConfig.dropout, in training mode): on
    wte + wpe (transformer.drop), on the attention probabilities
    (attn_dropout, SDPA's dropout_p), after attn.c_proj (resid_dropout)
    and after mlp.c_proj. 0 (the default) emits no dropout and the fused
    nn.attention; > 0 writes the attention out (layers.attention: the
    [B, H, T, T] probabilities are kept for the backward).
    `decompose_attention` forces that form without dropout.

    `kv_cache` builds the decode step instead (kv_cache.py): one token per
    row at a run-time position, keys and values of the `ctx` positions
    before it in cache inputs; for fsdp-run --generate."""
    if width % heads:
        raise ValueError("width must be a multiple of heads")
    if kv_cache and (dropout > 0.0 or decompose_attention):
        raise ValueError("kv_cache: the decode step is for inference, "
                         "without dropout or decomposed attention")
    B, T, C, V = batch, ctx, width, vocab
    cache = ctx if kv_cache else None
    if kv_cache:
        T = 1
    act = [B, T]
    root = Module("root", "GPT")
    tr = root.add(Module("transformer", "ModuleDict"))
    wte = tr.add(embedding("wte", V, C, act, init=Init.normal(0.0, 0.02)))
    wpe = tr.add(embedding("wpe", ctx, C, [B, 1] if kv_cache else [T],
                           init=Init.normal(0.0, 0.02)))
    h = tr.add(Module("h", "ModuleList"))
    blocks = [h.add(_block(i, B, T, C, heads, layers, dropout,
                           decompose_attention, cache))
              for i in range(layers)]
    ln_f = tr.add(layer_norm("ln_f", C, act))

    idx_t = tensor(B, T, dtype="i64")
    if kv_cache:
        f = root.forward(idx=idx_t, targets=idx_t, pos=idx_t,
                         **cache_types(B, ctx, C, layers))
        idx, targets, pos = f.args[:FIRST_CACHE_INPUT]
        bias, _ = cache_positions(f, pos, ctx)
    else:
        f = root.forward(idx=idx_t, targets=idx_t)
        idx, targets = f.args
    tok = f.call(wte, idx, name="tok")
    if not kv_cache:
        pos = f.arange(T, name="pos")
    pos_emb = f.call(wpe, pos, name="pos_emb")
    x = f.add(tok, pos_emb, name="h0")
    x = f.dropout(x, dropout, name="h0_drop")  # transformer.drop
    new_cache = []
    for i, blk in enumerate(blocks):
        if kv_cache:
            past = f.args[FIRST_CACHE_INPUT + 2 * i:][:2]
            x, k, v = f.call_results(blk, x, bias, *past,
                                     names=[f"h{i + 1}", None, None])
            new_cache += [k, v]
        else:
            x = f.call(blk, x, name=f"h{i + 1}")
    x = f.call(ln_f, x, name="x")
    f.comment("lm_head shares its weight with wte (weight tying): reading it "
              "here makes")
    f.comment("the root the lowest module enclosing both uses.")
    w = f.get_param(wte.params["weight"], name="wte")
    logits = f.linear(x, w, name="logits")
    flat_logits = f.reshape(logits, [B * T, V], name="flat_logits")
    flat_targets = f.reshape(targets, [B * T], name="flat_targets")
    f.ret(f.cross_entropy(flat_logits, flat_targets, name="loss"), logits,
          *new_cache, names=["loss", "logits"] + cache_names(len(new_cache) // 2))

    header = [
        "A GPT-2 style language model, with nanoGPT's module names: token + "
        f"learned position embeddings, {layers} pre-LayerNorm block"
        + ("s" if layers != 1 else "") + f" of causal multi-head attention "
        f"({heads} heads) and a GELU (tanh) MLP, a final LayerNorm and an "
        "output projection tied to the token embedding; cross-entropy over "
        f"next-token targets. vocab {V}, context {ctx}, width {C}, batch {B}.",
        "Initialization as GPT-2: normal(0, 0.02), residual projections "
        "normal(0, 0.02/sqrt(2 * n_layer)), zero biases, LayerNorm (1, 0).",
    ]
    if dropout > 0.0:
        header.append(
            f"Training-mode dropout p = {dropout} (nanoGPT's): on the "
            "embeddings, the attention probabilities (attention written out: "
            "[B, H, T, T] probabilities kept for the backward), after "
            "attn.c_proj and after mlp.c_proj.")
    elif kv_cache:
        header.append(f"The decode step: one token per row at a run-time "
                      f"position, a key/value cache of {ctx} positions per "
                      "layer in its inputs.")
    elif decompose_attention:
        header.append("Attention written out (Q·Kᵀ, causal mask, softmax, "
                      "·V) instead of nn.attention.")
    header += [
        f"{gpt2_params(V, ctx, C, layers)} parameters.",
    ]
    return Model(name, root, header)
