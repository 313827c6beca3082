"""TransformerWithSharedParams of PyTorch's FSDP tests
(torch/testing/_internal/common_fsdp.py): an nn.Transformer encoder-decoder
between a token embedding and an output projection tied to it, a
BatchNorm1d on the decoder input and two buffers (one of them i64)."""

from __future__ import annotations

import math
from typing import Sequence

from ..ir import Init, Model, Module, tensor
from .layers import attention, embedding, layer_norm, linear


def _mha(name: str, B: int, T: int, S: int, d: int, heads: int,
         cross: bool, dropout: float = 0.0,
         decompose: bool = False) -> Module:
    """nn.MultiheadAttention(d, heads) (batch_first=False in PyTorch; here
    [B, T, d]): packed in_proj_weight [3d, d] / in_proj_bias [3d] and an
    out_proj Linear. Self-attention (`cross` False) takes x [B, T, d];
    cross-attention takes (x [B, T, d], memory [B, S, d]) and projects the
    query with rows [0, d) of in_proj and key/value with rows [d, 3d) applied
    to the memory, as F.multi_head_attention_forward does. No masks.
    `dropout` is its dropout on the attention probabilities (training
    mode), which writes the attention out (layers.attention)."""
    m = Module(name, "MultiheadAttention")
    # MultiheadAttention._reset_parameters: xavier_uniform_ in_proj_weight,
    # zero in_proj_bias and out_proj.bias. out_proj.weight: nn.Transformer's
    # _reset_parameters re-draws every parameter of dim > 1 with
    # xavier_uniform_ (it comes after the layers' own init).
    w_in = m.param("in_proj_weight", [3 * d, d], Init.xavier_uniform())
    b_in = m.param("in_proj_bias", [3 * d], Init.zeros)
    out_proj = m.add(linear("out_proj", d, d, [B, T],
                            weight_init=Init.xavier_uniform(),
                            bias_init=Init.zeros))
    out_proj.kind = "NonDynamicallyQuantizableLinear"
    if not cross:
        f = m.forward(tensor(B, T, d))
        x = f.args[0]
        qkv = f.linear(x, f.get_param(w_in, "w_in"), f.get_param(b_in, "b_in"),
                       name="qkv")
        q, k, v = f.split(qkv, [d, d, d], dim=2, names=["q", "k", "v"])
    else:
        f = m.forward(x=tensor(B, T, d), memory=tensor(B, S, d))
        x, mem = f.args
        w_q, w_kv = f.split(f.get_param(w_in, "w_in"), [d, 2 * d], dim=0,
                            names=["w_q", "w_kv"])
        b_q, b_kv = f.split(f.get_param(b_in, "b_in"), [d, 2 * d], dim=0,
                            names=["b_q", "b_kv"])
        q = f.linear(x, w_q, b_q, name="q")
        kv = f.linear(mem, w_kv, b_kv, name="kv")
        k, v = f.split(kv, [d, d], dim=2, names=["k", "v"])
    o = attention(f, q, k, v, heads, dropout=dropout,
                  decompose=decompose or None, name="o")
    f.ret(f.call(out_proj, o, name="y"))
    return m


def _ffn_linears(layer: Module, act: Sequence[int], d: int, ffn: int):
    # nn.Transformer's reset: xavier_uniform_ weights; the biases keep
    # nn.Linear's uniform(+-1/sqrt(fan_in)).
    l1 = layer.add(linear("linear1", d, ffn, act,
                          weight_init=Init.xavier_uniform()))
    l2 = layer.add(linear("linear2", ffn, d, act,
                          weight_init=Init.xavier_uniform()))
    return l1, l2


def _feed_forward(f, l1, l2, x, p):
    """linear2(dropout(relu(linear1(x)))), then the layer's last dropout
    (dropout2 of an encoder layer, dropout3 of a decoder layer)."""
    h = f.dropout(f.relu(f.call(l1, x)), p)
    return f.dropout(f.call(l2, h), p)


def _encoder_layer(index: int, B: int, S: int, d: int, heads: int,
                   ffn: int, eps: float, p: float = 0.0,
                   decompose: bool = False) -> Module:
    """nn.TransformerEncoderLayer, post-norm (norm_first=False), ReLU;
    dropout p (training mode) on the attention probabilities, after the
    self-attention (dropout1), inside the FFN (dropout) and after it
    (dropout2)."""
    act = [B, S]
    layer = Module(str(index), "TransformerEncoderLayer", unit=True)
    sa = layer.add(_mha("self_attn", B, S, S, d, heads, cross=False,
                        dropout=p, decompose=decompose))
    l1, l2 = _ffn_linears(layer, act, d, ffn)
    n1 = layer.add(layer_norm("norm1", d, act, eps))
    n2 = layer.add(layer_norm("norm2", d, act, eps))
    f = layer.forward(tensor(B, S, d))
    x = f.args[0]
    x = f.call(n1, f.add(x, f.dropout(f.call(sa, x), p)))
    x = f.call(n2, f.add(x, _feed_forward(f, l1, l2, x, p)))
    f.ret(x)
    return layer


def _decoder_layer(index: int, B: int, T: int, S: int, d: int, heads: int,
                   ffn: int, eps: float, p: float = 0.0,
                   decompose: bool = False) -> Module:
    """nn.TransformerDecoderLayer, post-norm, ReLU; self-attention without
    a mask (the test passes no tgt_mask), then attention over the memory;
    dropout p (training mode) on both attentions' probabilities, after them
    (dropout1, dropout2), inside the FFN and after it (dropout3)."""
    act = [B, T]
    layer = Module(str(index), "TransformerDecoderLayer", unit=True)
    sa = layer.add(_mha("self_attn", B, T, T, d, heads, cross=False,
                        dropout=p, decompose=decompose))
    ca = layer.add(_mha("multihead_attn", B, T, S, d, heads, cross=True,
                        dropout=p, decompose=decompose))
    l1, l2 = _ffn_linears(layer, act, d, ffn)
    n1 = layer.add(layer_norm("norm1", d, act, eps))
    n2 = layer.add(layer_norm("norm2", d, act, eps))
    n3 = layer.add(layer_norm("norm3", d, act, eps))
    f = layer.forward(x=tensor(B, T, d), memory=tensor(B, S, d))
    x, mem = f.args
    x = f.call(n1, f.add(x, f.dropout(f.call(sa, x), p)))
    x = f.call(n2, f.add(x, f.dropout(f.call(ca, x, mem), p)))
    x = f.call(n3, f.add(x, _feed_forward(f, l1, l2, x, p)))
    f.ret(x)
    return layer


def _batch_norm(name: str, channels: int, shape: Sequence[int],
                training: bool, eps: float = 1e-5,
                momentum: float = 0.1) -> Module:
    """nn.BatchNorm1d(channels) on an input [N, C, L]: weight ones, bias
    zeros, running_mean zeros, running_var ones, num_batches_tracked 0 (i64).
    In training mode it normalises with the batch statistics, stores the new
    running statistics (fsdp.set_buffer) and counts the forward; in eval
    mode it uses the running ones and changes nothing."""
    m = Module(name, "BatchNorm1d")
    w = m.param("weight", [channels], Init.ones)
    b = m.param("bias", [channels], Init.zeros)
    rm = m.buffer("running_mean", [channels], Init.zeros)
    rv = m.buffer("running_var", [channels], Init.ones)
    tracked = m.buffer("num_batches_tracked", [], Init.zeros, dtype="i64")
    f = m.forward(tensor(*shape))
    y, new_mean, new_var = f.batch_norm(
        f.args[0], f.get_param(w, "w"), f.get_param(b, "b"),
        f.get_buffer(rm, "rm"), f.get_buffer(rv, "rv"), eps=eps,
        momentum=momentum, training=training, names=["y", "mean", "var"])
    if training:
        f.set_buffer(rm, new_mean)
        f.set_buffer(rv, new_var)
        f.set_buffer(tracked, f.increment(f.get_buffer(tracked, "n"),
                                          name="n1"))
    f.ret(y)
    return m


def transformer_with_shared_params_count(vocab: int = 23, d_model: int = 16,
                                         encoder_layers: int = 2,
                                         decoder_layers: int = 2,
                                         ffn: int = 8, batch: int = 2,
                                         add_bn: bool = True) -> int:
    """PyTorch's unique parameter count (output_proj.weight is tied)."""
    d = d_model
    mha = 3 * d * d + 3 * d + d * d + d
    ff = d * ffn + ffn + ffn * d + d
    enc = mha + ff + 2 * 2 * d
    dec = 2 * mha + ff + 3 * 2 * d
    tr = encoder_layers * enc + decoder_layers * dec + 2 * 2 * d
    return vocab * d + vocab + tr + (2 * batch if add_bn else 0)


def transformer_with_shared_params(
        vocab: int = 23, d_model: int = 16, heads: int = 8,
        encoder_layers: int = 2, decoder_layers: int = 2, ffn: int = 8,
        batch: int = 2, src_len: int = 6, tgt_len: int = 4,
        training: bool = False, add_bn: bool = True, dropout: float = 0.0,
        decompose_attention: bool = False,
        name: str = "transformer_with_shared_params") -> Model:
    """PyTorch's TransformerWithSharedParams (common_fsdp.py) with its
    parameter and buffer names: embed_tokens, nn.Transformer(d_model,
    nhead=heads, encoder/decoder layers, dim_feedforward=ffn) with
    post-norm ReLU layers and no masks, output_proj tied to embed_tokens,
    buffers vocab_bias (ones) and long_buffer (i64 zeros), and BatchNorm1d
    (`add_bn`) over the decoder input in PyTorch's (T, B, d) layout, i.e.
    over channel = batch (so `batch` is its channel count). Loss:
    cross_entropy(output, tgt_ids, reduction="sum").

    Inputs are batch-first ids [batch, src_len] and [batch, tgt_len] (the
    data loader splits dim 0); the model transposes where PyTorch's
    (T, B, d) layout matters (the BatchNorm). FSDP units: every encoder and
    decoder layer (ModuleWrapPolicy({TransformerEncoderLayer,
    TransformerDecoderLayer})) plus the root. Initialisers are PyTorch's:
    embedding normal(0, 1); nn.Transformer's xavier_uniform_ on every matrix
    in `transformer`; zero attention biases; nn.Linear's uniform biases;
    LayerNorm/BatchNorm ones and zeros.

    `training` False is the test's deterministic mode (model.eval()): no
    dropout, BatchNorm normalises with its running statistics. `training`
    True: BatchNorm uses batch statistics and updates its running
    statistics (set_buffer), and `dropout` applies: training=True with
    dropout=0.1 is PyTorch's model, nn.Transformer(dropout=0.1), in train
    mode (every MultiheadAttention's attention-probability dropout, the
    encoder layers' dropout1 / FFN dropout / dropout2, the decoder layers'
    dropout1/2/3 and FFN dropout). Dropout > 0 writes the attention out
    (layers.attention: the [B, H, T, S] probabilities are kept for the
    backward); the default 0.0 keeps the fused nn.attention, and is
    nn.Transformer(dropout=0.0) in train mode. `decompose_attention`
    writes the attention out without dropout."""
    if d_model % heads:
        raise ValueError("d_model must be a multiple of heads")
    if dropout and not training:
        raise ValueError("dropout needs training=True (model.eval() has "
                         "none)")
    p = dropout
    B, S, T, d, V = batch, src_len, tgt_len, d_model, vocab
    eps = 1e-5
    root = Module("root", "TransformerWithSharedParams", unit=True)
    embed = root.add(embedding("embed_tokens", V, d, [B, S]))
    tr = root.add(Module("transformer", "Transformer"))

    encoder = tr.add(Module("encoder", "TransformerEncoder"))
    enc_layers = encoder.add(Module("layers", "ModuleList"))
    enc = [enc_layers.add(_encoder_layer(i, B, S, d, heads, ffn, eps, p,
                                         decompose_attention))
           for i in range(encoder_layers)]
    enc_norm = encoder.add(layer_norm("norm", d, [B, S], eps))
    f = encoder.forward(tensor(B, S, d))
    x = f.args[0]
    for layer in enc:
        x = f.call(layer, x)
    f.ret(f.call(enc_norm, x))

    decoder = tr.add(Module("decoder", "TransformerDecoder"))
    dec_layers = decoder.add(Module("layers", "ModuleList"))
    dec = [dec_layers.add(_decoder_layer(i, B, T, S, d, heads, ffn, eps, p,
                                         decompose_attention))
           for i in range(decoder_layers)]
    dec_norm = decoder.add(layer_norm("norm", d, [B, T], eps))
    f = decoder.forward(x=tensor(B, T, d), memory=tensor(B, S, d))
    x, mem = f.args
    for layer in dec:
        x = f.call(layer, x, mem)
    f.ret(f.call(dec_norm, x))

    f = tr.forward(src=tensor(B, S, d), tgt=tensor(B, T, d))
    src, tgt = f.args
    memory = f.call(encoder, src, name="memory")
    f.ret(f.call(decoder, tgt, memory, name="y"))

    # output_proj: its weight is embed_tokens.weight, read by the root.
    out_proj = root.add(Module("output_proj", "Linear"))
    out_bias = out_proj.param("bias", [V],
                              Init.uniform(-1 / math.sqrt(d), 1 / math.sqrt(d)))
    vocab_bias = root.buffer("vocab_bias", [d], Init.ones)
    long_buffer = root.buffer("long_buffer", [d], Init.zeros, dtype="i64")
    bn = root.add(_batch_norm("bn", B, [T, B, d], training)) if add_bn \
        else None

    ids = lambda n: tensor(B, n, dtype="i64")  # noqa: E731
    f = root.forward(src_ids=ids(S), tgt_ids=ids(T))
    src_ids, tgt_ids = f.args
    src = f.call(embed, src_ids, name="src_emb")
    src = f.add(src, f.get_buffer(vocab_bias, "vocab_bias"), name="src_vb")
    lb = f.cast(f.get_buffer(long_buffer, "long_buffer"), "f32", name="lb")
    src = f.add(src, lb, name="src")
    f.comment("the same embedding module for the target ids (shared)")
    w_emb = f.get_param(embed.params["weight"], name="w_emb")
    tgt = f.embedding(tgt_ids, w_emb, name="tgt_emb")
    if bn is not None:
        f.comment("BatchNorm1d(batch) on PyTorch's (T, B, d) layout: channel "
                  "= batch")
        tbd = f.transpose(tgt, [1, 0, 2], name="tgt_tbd")
        tgt = f.transpose(f.call(bn, tbd, name="tgt_bn"), [1, 0, 2],
                          name="tgt")
    x = f.call(tr, src, tgt, name="x")
    f.comment("output_proj: weight tied to embed_tokens.weight")
    logits = f.linear(x, w_emb, f.get_param(out_bias, "out_b"), name="logits")
    flat = f.reshape(logits, [B * T, V], name="flat_logits")
    targets = f.reshape(tgt_ids, [B * T], name="flat_targets")
    f.ret(f.cross_entropy(flat, targets, reduction="sum", name="loss"))

    n = transformer_with_shared_params_count(V, d, encoder_layers,
                                             decoder_layers, ffn, B, add_bn)
    assert root.num_params() == n, (root.num_params(), n)
    header = [
        "TransformerWithSharedParams of PyTorch's FSDP tests "
        "(torch/testing/_internal/common_fsdp.py): nn.Transformer("
        f"d_model={d}, nhead={heads}, num_encoder_layers={encoder_layers}, "
        f"num_decoder_layers={decoder_layers}, dim_feedforward={ffn}) "
        "between embed_tokens and an output_proj tied to it, buffers "
        "vocab_bias and long_buffer (i64)"
        + (f", BatchNorm1d({B}) on the decoder input" if add_bn else "")
        + f". vocab {V}, batch {B}, source {S}, target {T} tokens; "
        "loss cross_entropy(reduction=sum).",
        f"{'Training' if training else 'Eval (deterministic)'} mode"
        + (" (BatchNorm batch statistics, running statistics updated)"
           if training and add_bn else "")
        + (f"; dropout {p} (nn.Transformer's sites, attention written out)"
           if p else "; no dropout")
        + (" (attention written out)" if decompose_attention and not p
           else "")
        + ". Units: the encoder and decoder layers and the root "
        f"({encoder_layers + decoder_layers + 1}); {n} parameters.",
    ]
    return Model(name, root, header)
