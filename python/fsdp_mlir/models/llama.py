"""Llama (Hugging Face's LlamaForCausalLM module names): token embedding,
pre-RMSNorm decoder layers of causal grouped-query attention with rotary
position embeddings and a SiLU-gated MLP (gate/up/down), no biases, a final
RMSNorm and an untied lm_head; cross-entropy over next-token targets."""

from __future__ import annotations

from typing import Optional

from ..ir import Init, Model, Module, tensor
from .kv_cache import (FIRST_CACHE_INPUT, cache_names, cache_positions,
                       cache_types, cached_attention, rope_at)
from .layers import embedding, linear, rms_norm


def llama_params(vocab: int, width: int, heads: int, kv_heads: int,
                 layers: int, ffn: int) -> int:
    """embed + L·(q, k, v, o, gate, up, down, 2 norms) + norm + lm_head."""
    C, hd = width, width // heads
    attn = C * heads * hd + 2 * C * kv_heads * hd + heads * hd * C
    return vocab * C + layers * (attn + 3 * C * ffn + 2 * C) + C + vocab * C


def _layer(index: int, B: int, T: int, C: int, H: int, KV: int, F: int,
           theta: float, eps: float, std: float,
           cache: Optional[int] = None) -> Module:
    """With `cache` (its length S) the decode step's layer (kv_cache.py):
    forward(x [B, 1, C], bias, onehot, past_k, past_v) -> (x, k, v)."""
    act = [B, T]
    hd = C // H
    extra = [] if cache is None else \
        [tensor(B, 1, 1, cache + 1), tensor(B, cache, 1),
         tensor(B, cache, KV * hd), tensor(B, cache, KV * hd)]
    init = Init.normal(0.0, std)

    def proj(name, din, dout):
        return linear(name, din, dout, act, bias=False, weight_init=init)

    layer = Module(str(index), "LlamaDecoderLayer")
    attn = layer.add(Module("self_attn", "LlamaAttention"))
    q_proj = attn.add(proj("q_proj", C, H * hd))
    k_proj = attn.add(proj("k_proj", C, KV * hd))
    v_proj = attn.add(proj("v_proj", C, KV * hd))
    o_proj = attn.add(proj("o_proj", H * hd, C))
    f = attn.forward(tensor(B, T, C), *extra)
    x = f.args[0]
    if cache is None:
        q = f.rope(f.call(q_proj, x, name="q"), H, theta, name="q_rot")
        k = f.rope(f.call(k_proj, x, name="k"), KV, theta, name="k_rot")
        v = f.call(v_proj, x, name="v")
        o = f.attention(q, k, v, num_heads=H, num_kv_heads=KV, causal=True,
                        name="o")
        f.ret(f.call(o_proj, o, name="y"))
    else:
        bias, onehot, past_k, past_v = f.args[1:]
        q = rope_at(f, f.call(q_proj, x, name="q"), onehot, H, theta,
                    name="q_rot")
        k = rope_at(f, f.call(k_proj, x, name="k"), onehot, KV, theta,
                    name="k_rot")
        v = f.call(v_proj, x, name="v")
        o = cached_attention(f, q, k, v, past_k, past_v, bias, H, KV,
                             name="o")
        f.ret(f.call(o_proj, o, name="y"), k, v)

    mlp = layer.add(Module("mlp", "LlamaMLP"))
    gate = mlp.add(proj("gate_proj", C, F))
    up = mlp.add(proj("up_proj", C, F))
    down = mlp.add(proj("down_proj", F, C))
    f = mlp.forward(tensor(B, T, C))
    x = f.args[0]
    g = f.silu(f.call(gate, x, name="gate"), name="act")
    h = f.mul(g, f.call(up, x, name="up"), name="h")
    f.ret(f.call(down, h, name="y"))

    ln_in = layer.add(rms_norm("input_layernorm", C, act, eps,
                               kind="LlamaRMSNorm"))
    ln_post = layer.add(rms_norm("post_attention_layernorm", C, act, eps,
                                 kind="LlamaRMSNorm"))
    f = layer.forward(tensor(B, T, C), *extra)
    x = f.args[0]
    if cache is None:
        x = f.add(x, f.call(attn, f.call(ln_in, x)))
    else:
        a, k, v = f.call_results(attn, f.call(ln_in, x), *f.args[1:])
        x = f.add(x, a)
    x = f.add(x, f.call(mlp, f.call(ln_post, x)))
    f.ret(*([x] if cache is None else [x, k, v]))
    return layer


def llama(vocab: int = 256, ctx: int = 32, width: int = 64, heads: int = 4,
          kv_heads: int = 2, layers: int = 2, ffn: int = 172, batch: int = 4,
          rope_theta: float = 10000.0, eps: float = 1e-6,
          init_std: float = 0.02, kv_cache: bool = False,
          name: str = "llama") -> Model:
    """Llama with Hugging Face's module names (model.embed_tokens,
    model.layers.N.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
    input_layernorm, post_attention_layernorm}, model.norm, lm_head) and its
    initialization: every Linear and the embedding normal(0, init_std),
    RMSNorm weights ones. `kv_heads` < `heads` is grouped-query attention.
    nn.rope rotates interleaved pairs (Meta's reference layout; HF's
    checkpoints permute q/k rows for their rotate-half layout). `batch` is
    per rank.

    `kv_cache` builds the decode step instead (kv_cache.py): one token per
    row at a run-time position, keys and values of the `ctx` positions
    before it in cache inputs; for fsdp-run --generate."""
    if width % heads or heads % kv_heads:
        raise ValueError("width must be a multiple of heads, heads of kv_heads")
    if (width // heads) % 2:
        raise ValueError("the head dimension must be even for RoPE")
    B, T, C, V = batch, ctx, width, vocab
    cache = ctx if kv_cache else None
    if kv_cache:
        T = 1
    act = [B, T]
    init = Init.normal(0.0, init_std)
    root = Module("root", "LlamaForCausalLM")
    model = root.add(Module("model", "LlamaModel"))
    embed = model.add(embedding("embed_tokens", V, C, act, init=init))
    lst = model.add(Module("layers", "ModuleList"))
    blocks = [lst.add(_layer(i, B, T, C, heads, kv_heads, ffn, rope_theta,
                             eps, init_std, cache)) for i in range(layers)]
    norm = model.add(rms_norm("norm", C, act, eps, kind="LlamaRMSNorm"))
    lm_head = root.add(linear("lm_head", C, V, act, bias=False,
                              weight_init=init))

    idx_t = tensor(B, T, dtype="i64")
    hd = C // heads
    caches = cache_types(B, ctx, kv_heads * hd, layers) if kv_cache else {}
    if kv_cache:
        f = model.forward(idx=idx_t, pos=idx_t, **caches)
        bias, onehot = cache_positions(f, f.args[1], ctx)
    else:
        f = model.forward(idx=idx_t)
    x = f.call(embed, f.args[0], name="h0")
    new_cache = []
    for i, blk in enumerate(blocks):
        if kv_cache:
            past = f.args[2 + 2 * i:][:2]
            x, k, v = f.call_results(blk, x, bias, onehot, *past,
                                     names=[f"h{i + 1}", None, None])
            new_cache += [k, v]
        else:
            x = f.call(blk, x, name=f"h{i + 1}")
    f.ret(f.call(norm, x, name="y"), *new_cache)

    if kv_cache:
        f = root.forward(idx=idx_t, targets=idx_t, pos=idx_t, **caches)
        idx, targets, pos = f.args[:FIRST_CACHE_INPUT]
        out = f.call_results(model, idx, pos, *f.args[FIRST_CACHE_INPUT:],
                             names=["hidden"] + [None] * 2 * layers)
        hidden, new_cache = out[0], out[1:]
    else:
        f = root.forward(idx=idx_t, targets=idx_t)
        idx, targets = f.args
        hidden = f.call(model, idx, name="hidden")
    logits = f.call(lm_head, hidden, name="logits")
    flat_logits = f.reshape(logits, [B * T, V], name="flat_logits")
    flat_targets = f.reshape(targets, [B * T], name="flat_targets")
    f.ret(f.cross_entropy(flat_logits, flat_targets, name="loss"), logits,
          *new_cache, names=["loss", "logits"] + cache_names(layers)
          if kv_cache else ["loss", "logits"])

    gqa = (f"grouped-query attention ({heads} heads, {kv_heads} key/value "
           "heads)" if kv_heads != heads else
           f"multi-head attention ({heads} heads)")
    header = [
        "A Llama style language model, with Hugging Face's module names: "
        f"token embedding, {layers} pre-RMSNorm decoder layer"
        + ("s" if layers != 1 else "") + f" of causal {gqa} with rotary "
        f"embeddings (theta {rope_theta:g}) and a SiLU-gated MLP (width "
        f"{ffn}), no biases, a final RMSNorm and an untied lm_head; "
        "cross-entropy over next-token targets. "
        f"vocab {V}, context {ctx}, width {C}, batch {B}.",
        f"Initialization as Hugging Face's: normal(0, {init_std:g}), "
        "RMSNorm ones. "
        f"{llama_params(V, C, heads, kv_heads, layers, ffn)} parameters.",
    ]
    if kv_cache:
        header.append(f"The decode step: one token per row at a run-time "
                      f"position, a key/value cache of {ctx} positions per "
                      "layer in its inputs.")
    return Model(name, root, header)
