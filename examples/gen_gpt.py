#!/usr/bin/env python3
"""Writes a GPT-2 style language model as an `fsdp.model` (nanoGPT's module
names, learned positions, pre-LayerNorm blocks, tanh-GELU MLP, tied lm_head,
cross-entropy over next-token targets, GPT-2 initialization).

    python3 examples/gen_gpt.py --name char_gpt --vocab 128 --ctx 64 \
        --width 128 --heads 4 --layers 4 --batch 8 \
        --description "Character-level GPT demo, trained on data/shakespeare.txt: one token per ASCII code." \
        -o examples/char_gpt.mlir
    python3 examples/gen_gpt.py --name gpt2 --vocab 64 --ctx 16 \
        --width 32 --heads 4 --layers 2 --batch 4

The second prints examples/gpt2.mlir's model: the same IR, only the header
comment differs (test/Examples/char-gpt.mlir checks both).
"""

import argparse
import math
import shlex
import sys


def fmt_float(x):
    """Python's shortest round-trip form; MLIR parses it to the same double."""
    s = repr(float(x))
    return s if ("." in s or "e" in s) else s + ".0"


def tensor(shape, dtype="f32"):
    return "tensor<" + "x".join(str(d) for d in shape) + "x" + dtype + ">" \
        if shape else "tensor<" + dtype + ">"


class Writer:
    def __init__(self):
        self.lines = []
        self.depth = 0

    def __call__(self, text=""):
        self.lines.append("  " * self.depth + text if text else "")

    def open(self, text):
        self(text + " {")
        self.depth += 1

    def close(self):
        self.depth -= 1
        self("}")


def linear(w, name, din, dout, act, std):
    """nn.Linear(din, dout) applied to activations of shape act + [din]."""
    x, y = tensor(act + [din]), tensor(act + [dout])
    wt, bt = tensor([dout, din]), tensor([dout])
    w.open(f'fsdp.module @{name} kind "Linear"')
    w(f"fsdp.param @weight : {wt} init <normal(0.0, {fmt_float(std)})>")
    w(f"fsdp.param @bias : {bt} init <zeros>")
    w.open(f"fsdp.forward (%x: {x}) -> {y}")
    w(f"%w = fsdp.get_param @weight : {wt}")
    w(f"%b = fsdp.get_param @bias : {bt}")
    w(f"%y = nn.linear %x, %w, %b : ({x}, {wt}, {bt}) -> {y}")
    w(f"fsdp.return %y : {y}")
    w.close()
    w.close()


def layer_norm(w, name, width, act):
    x, p = tensor(act + [width]), tensor([width])
    w.open(f'fsdp.module @{name} kind "LayerNorm"')
    w(f"fsdp.param @weight : {p} init <ones>")
    w(f"fsdp.param @bias : {p} init <zeros>")
    w.open(f"fsdp.forward (%x: {x}) -> {x}")
    w(f"%w = fsdp.get_param @weight : {p}")
    w(f"%b = fsdp.get_param @bias : {p}")
    w(f"%y = nn.layer_norm %x weight %w bias %b {{epsilon = 1.0e-05 : f64}} "
      f": ({x}, {p}, {p}) -> {x}")
    w(f"fsdp.return %y : {x}")
    w.close()
    w.close()


def embedding(w, name, num, width, ids_shape):
    ids, wt = tensor(ids_shape, "i64"), tensor([num, width])
    e = tensor(ids_shape + [width])
    w.open(f'fsdp.module @{name} kind "Embedding"')
    w(f"fsdp.param @weight : {wt} init <normal(0.0, 0.02)>")
    w.open(f"fsdp.forward (%ids: {ids}) -> {e}")
    w(f"%w = fsdp.get_param @weight : {wt}")
    w(f"%e = nn.embedding %ids, %w : ({ids}, {wt}) -> {e}")
    w(f"fsdp.return %e : {e}")
    w.close()
    w.close()


def block(w, index, a):
    B, T, C, H = a.batch, a.ctx, a.width, a.heads
    act = [B, T]
    x, x3, x4 = tensor(act + [C]), tensor(act + [3 * C]), tensor(act + [4 * C])
    proj_std = 0.02 / math.sqrt(2 * a.layers)
    w.open(f'fsdp.module @"{index}" kind "Block"')
    layer_norm(w, "ln_1", C, act)
    w.open('fsdp.module @attn kind "CausalSelfAttention"')
    linear(w, "c_attn", C, 3 * C, act, 0.02)
    linear(w, "c_proj", C, C, act, proj_std)
    w.open(f"fsdp.forward (%x: {x}) -> {x}")
    w(f"%qkv = fsdp.call @c_attn(%x) : ({x}) -> {x3}")
    w(f"%q, %k, %v = nn.split %qkv {{dim = 2 : i64, sizes = array<i64: {C}, {C}, {C}>}} "
      f": ({x3}) -> ({x}, {x}, {x})")
    w(f"%o = nn.attention %q, %k, %v {{causal, num_heads = {H} : i64}} "
      f": ({x}, {x}, {x}) -> {x}")
    w(f"%y = fsdp.call @c_proj(%o) : ({x}) -> {x}")
    w(f"fsdp.return %y : {x}")
    w.close()
    w.close()
    layer_norm(w, "ln_2", C, act)
    w.open('fsdp.module @mlp kind "MLP"')
    linear(w, "c_fc", C, 4 * C, act, 0.02)
    linear(w, "c_proj", 4 * C, C, act, proj_std)
    w.open(f"fsdp.forward (%x: {x}) -> {x}")
    w(f"%h = fsdp.call @c_fc(%x) : ({x}) -> {x4}")
    w(f"%g = nn.gelu %h {{approximate = #nn.approximation<tanh>}} : {x4}")
    w(f"%y = fsdp.call @c_proj(%g) : ({x4}) -> {x}")
    w(f"fsdp.return %y : {x}")
    w.close()
    w.close()
    w.open(f"fsdp.forward (%x: {x}) -> {x}")
    w(f"%0 = fsdp.call @ln_1(%x) : ({x}) -> {x}")
    w(f"%1 = fsdp.call @attn(%0) : ({x}) -> {x}")
    w(f"%2 = nn.add %x, %1 : ({x}, {x}) -> {x}")
    w(f"%3 = fsdp.call @ln_2(%2) : ({x}) -> {x}")
    w(f"%4 = fsdp.call @mlp(%3) : ({x}) -> {x}")
    w(f"%5 = nn.add %2, %4 : ({x}, {x}) -> {x}")
    w(f"fsdp.return %5 : {x}")
    w.close()
    w.close()


def command_line(a):
    out = a.output if a.output != "-" else None
    cmd = (f"python3 examples/gen_gpt.py --name {a.name} --vocab {a.vocab} "
           f"--ctx {a.ctx} --width {a.width} --heads {a.heads} "
           f"--layers {a.layers} --batch {a.batch}")
    if a.description:
        cmd += " --description " + shlex.quote(a.description)
    return cmd + (f" -o {out}" if out else "")


def header(a):
    blocks = f"{a.layers} pre-LayerNorm block" + ("s" if a.layers != 1 else "")
    lines = []
    if a.description:
        lines.append(a.description)
    lines += [
        "A GPT-2 style language model, with nanoGPT's module names:",
        "token + learned position embeddings, "
        f"{blocks} of causal",
        f"multi-head attention ({a.heads} heads) and a GELU (tanh) MLP, a final "
        "LayerNorm",
        "and an output projection tied to the token embedding; cross-entropy "
        "over",
        f"next-token targets. vocab {a.vocab}, context {a.ctx}, width "
        f"{a.width}, batch {a.batch}.",
        "Initialization as GPT-2: normal(0, 0.02), residual projections",
        "normal(0, 0.02/sqrt(2 * n_layer)), zero biases, LayerNorm (1, 0).",
        "Generated by: " + command_line(a),
    ]
    return ["// " + l for l in lines]


def generate(a):
    B, T, C, V = a.batch, a.ctx, a.width, a.vocab
    act = [B, T]
    x = tensor(act + [C])
    idx = tensor(act, "i64")
    w = Writer()
    w.lines += header(a)
    w.open(f"fsdp.model @{a.name}")
    w.open('fsdp.module @root kind "GPT"')
    w.open('fsdp.module @transformer kind "ModuleDict"')
    embedding(w, "wte", V, C, act)
    embedding(w, "wpe", T, C, [T])
    w.open('fsdp.module @h kind "ModuleList"')
    for i in range(a.layers):
        block(w, i, a)
    w.close()
    layer_norm(w, "ln_f", C, act)
    w.close()
    logits = tensor(act + [V])
    flat_logits, flat_targets = tensor([B * T, V]), tensor([B * T], "i64")
    pos, pos_emb = tensor([T], "i64"), tensor([T, C])
    w.open(f"fsdp.forward (%idx: {idx}, %targets: {idx}) -> tensor<f32>")
    w(f"%tok = fsdp.call @transformer::@wte(%idx) : ({idx}) -> {x}")
    w(f"%pos = arith.constant dense<[{', '.join(str(i) for i in range(T))}]> : {pos}")
    w(f"%pos_emb = fsdp.call @transformer::@wpe(%pos) : ({pos}) -> {pos_emb}")
    w(f"%h0 = nn.add %tok, %pos_emb : ({x}, {pos_emb}) -> {x}")
    for i in range(a.layers):
        w(f'%h{i + 1} = fsdp.call @transformer::@h::@"{i}"(%h{i}) : ({x}) -> {x}')
    w(f"%x = fsdp.call @transformer::@ln_f(%h{a.layers}) : ({x}) -> {x}")
    w("// lm_head shares its weight with wte (weight tying): reading it here makes")
    w("// the root the lowest module enclosing both uses.")
    wte = tensor([V, C])
    w(f"%wte = fsdp.get_param @transformer::@wte::@weight : {wte}")
    w(f"%logits = nn.linear %x, %wte : ({x}, {wte}) -> {logits}")
    w(f"%flat_logits = nn.reshape %logits : {logits} to {flat_logits}")
    w(f"%flat_targets = nn.reshape %targets : {idx} to {flat_targets}")
    w(f"%loss = nn.cross_entropy %flat_logits, %flat_targets "
      f": ({flat_logits}, {flat_targets}) -> tensor<f32>")
    w("fsdp.return %loss : tensor<f32>")
    w.close()
    w.close()
    w.close()
    return "\n".join(w.lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", default="gpt", help="symbol of the fsdp.model")
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--ctx", type=int, required=True, help="context length")
    p.add_argument("--width", type=int, required=True, help="n_embd")
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--batch", type=int, required=True, help="per rank")
    p.add_argument("--description", default="",
                   help="a first header comment line")
    p.add_argument("-o", "--output", default="-")
    a = p.parse_args(argv)
    if a.width % a.heads:
        p.error("--width must be a multiple of --heads")
    text = generate(a)
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
