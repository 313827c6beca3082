"""The architecture sweep (issue 38): real models from small configs with
random weights, each imported with fsdp_mlir.from_torch, trained STEPS
steps at 2 CPU ranks (full-shard, its block classes wrapped as units, AdamW)
and compared with plain torch on the same batches, as
test_hf_import.py compares its models: losses within 1e-5 absolute, the
final weights and optimizer state at the parity suite's bounds. A model
that stops at import is listed with the construct that stops it (the first
line of the importer's one report for the whole model).

    PYTHONPATH=python:python/tests python3 python/tests/arch_sweep.py \\
        [--only NAME,...] [--markdown FILE] [--jobs N]

prints one line per model and, with --markdown, writes the table kept in
docs/Python.md. test_arch_sweep.py runs a representative slice in CI.
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import transformers

from fsdp_mlir import from_torch
from fsdp_mlir.torch_import import (ClassifierLoss, HFLoss,
                                   UnsupportedModelError)
from test_hf_import import (CLASSES, SEQ, VOCAB, causal_lm_data,
                            gpt2, gptj, key_bias_noise, llama, masked_lm_data,
                            phi3, roberta, roberta_data, seq2seq_data, t5,
                            vit)
from test_torch_import import (NUM_SAMPLES, PER_RANK, torch_losses,
                               train_imported)
from test_torch_oracle import STEPS, assert_state_matches
from first_step_gradients import as_f64, first_step_gradients, float64_copy

LOSS_ATOL = 1e-5  # test_hf_import's bound: f32 reduction-order noise
RANKS = 2
OPTIMIZER = "adamw"
ADAMW_LR = 1e-3  # test_torch_import.OPTIMIZERS["adamw"]["lr"]


@dataclass
class Arch:
    family: str
    factory: Callable[[], torch.nn.Module]  # the loss module
    data: Callable[[np.random.Generator], list]
    kinds: list[str]  # the block classes wrapped as FSDP units
    noise: Callable | None = None  # zero-gradient elements (weight check)


def classified(*shape):
    """Random f32 inputs [N, *shape] and one class each."""
    def make(rng):
        x = rng.standard_normal((NUM_SAMPLES, *shape)).astype(np.float32)
        return [x, rng.integers(0, CLASSES, (NUM_SAMPLES,), np.int64)]
    return make


def images(size=32, channels=3):
    return classified(channels, size, size)


def clips(frames, size):
    """Video clips [N, 3, frames, size, size]."""
    return classified(3, frames, size, size)


def tv_video_resnet(conv, stem):
    """torchvision's VideoResNet, one BasicBlock per stage."""
    def make():
        from torchvision.models.video import resnet
        return ClassifierLoss(resnet.VideoResNet(
            resnet.BasicBlock, [getattr(resnet, conv)] * 4, [1, 1, 1, 1],
            getattr(resnet, stem), num_classes=CLASSES))
    return make


def audio_frames(mels, frames):
    """Log-mel-like features [N, mels, frames]."""
    return classified(mels, frames)


def waveform(samples):
    return classified(samples)


def whisper_data(rng):
    """Whisper: features [N, 8 mels, 2 * 8 frames] and seq2seq_data's
    decoder inputs and labels (given, as for T5: Whisper's own
    shift_tokens_right is a slice assignment)."""
    x = rng.standard_normal((NUM_SAMPLES, 8, 16)).astype(np.float32)
    return [x] + seq2seq_data(rng)[1:]


def speech_data(rng):
    """Speech2Text: filter-bank features [N, 16 frames, 8] and
    seq2seq_data's decoder inputs and labels."""
    x = rng.standard_normal((NUM_SAMPLES, 16, 8)).astype(np.float32)
    return [x] + seq2seq_data(rng)[1:]


class DenseLoss(torch.nn.Module):
    """Dense regression: the model's `output` (predicted_depth for depth
    estimation, reconstruction for super-resolution) against a target map
    by `loss` (mean squared error, or L1 as super-resolution trains)."""

    def __init__(self, model, output="predicted_depth", loss="mse_loss",
                 inputs="pixel_values"):
        super().__init__()
        self.model = model
        self.output, self.loss, self.inputs = output, loss, inputs

    def forward(self, x, target):
        predicted = getattr(self.model(**{self.inputs: x}), self.output)
        return getattr(torch.nn.functional, self.loss)(predicted, target)


def dense_data(image, target):
    """Random inputs [N, *image] and targets [N, *target] in [0.5, 2)
    (depth maps, or high-resolution images)."""
    def make(rng):
        x = rng.standard_normal((NUM_SAMPLES, *image)).astype(np.float32)
        y = rng.uniform(0.5, 2.0, (NUM_SAMPLES, *target)).astype(np.float32)
        return [x, y]
    return make


def segmentation_data(size):
    """Images [N, 3, size, size] and a class per pixel."""
    def make(rng):
        x = rng.standard_normal((NUM_SAMPLES, 3, size, size)).astype(
            np.float32)
        return [x, rng.integers(0, CLASSES, (NUM_SAMPLES, size, size),
                                np.int64)]
    return make


def classifier_data(rng):
    """Token ids and one class per sequence."""
    ids = rng.integers(2, VOCAB, (NUM_SAMPLES, SEQ), np.int64)
    return [ids, rng.integers(0, CLASSES, (NUM_SAMPLES,), np.int64)]


def fused_key_bias(suffix, k_part):
    """Noise mask of a key bias inside a fused projection's bias (keys
    ending in `suffix`): k_part(shape) -> the key elements' mask. A key
    bias shifts every score of a query's row alike, so softmax ignores it
    and its gradient is zero in exact arithmetic (test_hf_import's
    key_bias_noise, for separate key projections)."""
    def noise(key, shape):
        if key.endswith(suffix):
            return k_part(shape)
        return key_bias_noise(key, shape)
    return noise


def noise_of(*suffixes):
    """Whole tensors whose gradient is zero in exact arithmetic, by key
    suffix, besides attention key biases (key_bias_noise): a bias or
    scale that the next normalisation removes (a per-channel shift before
    a convolution and a training-mode batch norm; a per-token shift before
    a LayerNorm over channels; a key LayerNorm's bias, which shifts every
    key of a query's row alike; a batch norm's scale that a ReLU, a max
    pooling and another batch norm follow, while its bias is 0). AdamW
    turns such a gradient, f32 noise on both sides, into lr-sized steps."""
    def noise(key, shape):
        if key.endswith(suffixes):
            return np.ones(shape, bool)
        return key_bias_noise(key, shape)
    return noise


def thirds(shape):
    """[q | k | v], equal widths: the middle third."""
    mask = np.zeros(shape, bool)
    mask[shape[0] // 3:2 * shape[0] // 3] = True
    return mask


def per_head_qkv(heads):
    """GPT-NeoX's [heads, 3, head_dim] layout: each head's middle part."""
    def mask(shape):
        m = np.zeros((heads, 3, shape[0] // (3 * heads)), bool)
        m[:, 1] = True
        return m.reshape(shape)
    return mask


def multi_query(width, head_dim):
    """[q (width) | k (head_dim) | v (head_dim)] of one shared k / v head."""
    def mask(shape):
        m = np.zeros(shape, bool)
        m[width:width + head_dim] = True
        return m
    return mask


T = transformers
# Shared small dimensions: hidden 32, 2 layers, 4 heads, MLP 64.
DEC = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
           num_hidden_layers=2, num_attention_heads=4,
           max_position_embeddings=SEQ, use_cache=False,
           attn_implementation="sdpa")
# Special token ids inside the small vocabulary (the defaults lie past it).
TOKENS = dict(pad_token_id=1, bos_token_id=0, eos_token_id=0)


def hf(cls, config, inputs="input_ids", **kw):
    """A transformers model of `config(**kw)` whose loss takes `inputs`."""
    return lambda: HFLoss(cls(config(**kw)), inputs)


# wav2vec 2.0's family (HuBERT): a two-layer conv feature extractor.
SPEECH = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
              conv_kernel=(10, 3), num_conv_pos_embeddings=8,
              num_conv_pos_embedding_groups=4, hidden_dropout=0.0,
              attention_dropout=0.0, activation_dropout=0.0,
              feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0,
              num_labels=CLASSES, use_weighted_layer_sum=False)


# BART's family (mBART, Pegasus, Marian, M2M100) at the shared sizes.
S2S = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
           encoder_attention_heads=4, decoder_attention_heads=4,
           encoder_ffn_dim=64, decoder_ffn_dim=64,
           max_position_embeddings=SEQ, dropout=0.0, attention_dropout=0.0,
           activation_dropout=0.0, use_cache=False, pad_token_id=1,
           bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)


class SentenceEmbeddingLoss(torch.nn.Module):
    """sentence-transformers' training of a dual encoder: one model embeds
    queries and (longer) documents, mean-pooled over their attention masks
    and normalised; each query is ranked against the rank's documents
    (in-batch negatives, MultipleNegativesRankingLoss at scale 20)."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def embed(self, ids, mask):
        hidden = self.encoder(input_ids=ids, attention_mask=mask)[0]
        weights = mask[..., None].float()
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def forward(self, queries, query_mask, documents, document_mask):
        q = self.embed(queries, query_mask)
        d = self.embed(documents, document_mask)
        return torch.nn.functional.cross_entropy(
            20.0 * q @ d.T, torch.arange(q.shape[0]))


def query_document_data(rng):
    """Queries of 6 tokens and documents of SEQ, each with a padding mask
    keeping a random prefix (at least half)."""
    def padded(length):
        ids = rng.integers(1, VOCAB, (NUM_SAMPLES, length), np.int64)
        kept = rng.integers(length // 2, length + 1, (NUM_SAMPLES, 1))
        return [ids, (np.arange(length)[None] < kept).astype(np.int64)]
    return padded(6) + padded(SEQ)


def seq2seq(cls, config, **kw):
    return lambda: HFLoss(cls(config(**{**S2S, **kw})),
                          ("input_ids", "decoder_input_ids"))


def torchvision_model(name, **kw):
    def make():
        import torchvision
        return ClassifierLoss(getattr(torchvision.models, name)(**kw))
    return make


def CNBlockConfig(*args):
    from torchvision.models.convnext import CNBlockConfig as config
    return config(*args)


def timm_model(name, **kw):
    def make():
        import timm
        return ClassifierLoss(timm.create_model(name, pretrained=False, **kw))
    return make


def timm_byoanet(block, **cfg):
    """A small timm ByobNet (the family of HaloNet, LambdaNet, BAT): a
    bottleneck stage, then one of `block` (its attention from cfg)."""
    def make():
        from timm.models.byobnet import ByobNet, ByoBlockCfg, ByoModelCfg
        stages = (ByoBlockCfg(type="bottle", d=1, c=32, s=1, br=0.25),
                  ByoBlockCfg(type=block, d=2, c=64, s=2, br=0.25))
        return ClassifierLoss(ByobNet(ByoModelCfg(
            blocks=stages, stem_chs=16, stem_type="tiered",
            stem_pool="maxpool", **cfg), num_classes=CLASSES))
    return make


ENC = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
           num_attention_heads=4, intermediate_size=64,
           max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
           attention_probs_dropout_prob=0.0, attn_implementation="sdpa")

# T5's family (mT5, UMT5) at the shared sizes.
T5_SIZES = dict(inputs=("input_ids", "decoder_input_ids"), vocab_size=VOCAB,
                d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                dropout_rate=0.0, use_cache=False, decoder_start_token_id=0,
                pad_token_id=0, relative_attention_num_buckets=8)

# ViT's family at the shared sizes: 16 x 16 images in 4 x 4 patches.
PATCHES = dict(inputs="pixel_values", image_size=16, patch_size=4,
               hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
               num_labels=CLASSES)

ARCHS: dict[str, Arch] = {
    # Decoders
    "gpt2": Arch("decoder", lambda: HFLoss(gpt2()), causal_lm_data,
                 ["GPT2Block"], fused_key_bias("c_attn.bias", thirds)),
    "llama": Arch("decoder", lambda: HFLoss(llama()), causal_lm_data,
                  ["LlamaDecoderLayer"]),
    "mistral": Arch("decoder", hf(
        T.MistralForCausalLM, T.MistralConfig, num_key_value_heads=2,
        **DEC), causal_lm_data, ["MistralDecoderLayer"]),
    "qwen2": Arch("decoder", hf(
        T.Qwen2ForCausalLM, T.Qwen2Config, num_key_value_heads=2, **DEC),
        causal_lm_data, ["Qwen2DecoderLayer"]),
    "qwen3": Arch("decoder", hf(
        T.Qwen3ForCausalLM, T.Qwen3Config, num_key_value_heads=2,
        head_dim=8, **DEC), causal_lm_data, ["Qwen3DecoderLayer"]),
    "gemma": Arch("decoder", hf(
        T.GemmaForCausalLM, T.GemmaConfig, num_key_value_heads=1,
        head_dim=8, **DEC), causal_lm_data, ["GemmaDecoderLayer"]),
    "phi": Arch("decoder", hf(
        T.PhiForCausalLM, T.PhiConfig, resid_pdrop=0.0, embd_pdrop=0.0,
        partial_rotary_factor=0.5, **DEC), causal_lm_data,
        ["PhiDecoderLayer"], key_bias_noise),
    "phi3": Arch("decoder", lambda: HFLoss(phi3()), causal_lm_data,
                 ["Phi3DecoderLayer"]),
    "gptj": Arch("decoder", lambda: HFLoss(gptj()), causal_lm_data,
                 ["GPTJBlock"]),
    "gpt_neox": Arch("decoder", hf(
        T.GPTNeoXForCausalLM, T.GPTNeoXConfig, hidden_dropout=0.0,
        rotary_pct=0.5, **DEC), causal_lm_data, ["GPTNeoXLayer"],
        fused_key_bias("query_key_value.bias", per_head_qkv(4))),
    "gpt_neo": Arch("decoder", hf(
        T.GPTNeoForCausalLM, T.GPTNeoConfig, vocab_size=VOCAB,
        hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ, attention_types=[[["global", "local"], 1]],
        window_size=8, resid_dropout=0.0, embed_dropout=0.0,
        attention_dropout=0.0, use_cache=False), causal_lm_data,
        ["GPTNeoBlock"]),
    "opt": Arch("decoder", hf(
        T.OPTForCausalLM, T.OPTConfig, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
        word_embed_proj_dim=32, max_position_embeddings=SEQ, dropout=0.0,
        attention_dropout=0.0, use_cache=False, pad_token_id=1,
        attn_implementation="sdpa"), causal_lm_data, ["OPTDecoderLayer"],
        key_bias_noise),
    "bloom": Arch("decoder", hf(
        T.BloomForCausalLM, T.BloomConfig, vocab_size=VOCAB, hidden_size=32,
        n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0,
        use_cache=False), causal_lm_data, ["BloomBlock"]),
    "falcon": Arch("decoder", hf(
        T.FalconForCausalLM, T.FalconConfig, vocab_size=VOCAB,
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_kv_heads=1, new_decoder_architecture=False, multi_query=True,
        parallel_attn=True, bias=False, alibi=False, hidden_dropout=0.0,
        attention_dropout=0.0, max_position_embeddings=SEQ,
        use_cache=False), causal_lm_data, ["FalconDecoderLayer"]),
    "codegen": Arch("decoder", hf(
        T.CodeGenForCausalLM, T.CodeGenConfig, vocab_size=VOCAB,
        n_positions=SEQ, n_ctx=SEQ, n_embd=32, n_layer=2, n_head=4,
        rotary_dim=4, n_inner=64, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, use_cache=False, bos_token_id=0, eos_token_id=0),
        causal_lm_data, ["CodeGenBlock"]),
    "stablelm": Arch("decoder", hf(
        T.StableLmForCausalLM, T.StableLmConfig, num_key_value_heads=4,
        partial_rotary_factor=0.5, hidden_dropout=0.0, **DEC),
        causal_lm_data, ["StableLmDecoderLayer"]),
    "olmo": Arch("decoder", hf(
        T.OlmoForCausalLM, T.OlmoConfig, num_key_value_heads=4,
        **TOKENS, **DEC),
        causal_lm_data, ["OlmoDecoderLayer"]),
    "starcoder2": Arch("decoder", hf(
        T.Starcoder2ForCausalLM, T.Starcoder2Config, num_key_value_heads=2,
        residual_dropout=0.0, embedding_dropout=0.0, **DEC),
        causal_lm_data, ["Starcoder2DecoderLayer"]),
    "gpt_bigcode": Arch("decoder", hf(
        T.GPTBigCodeForCausalLM, T.GPTBigCodeConfig, vocab_size=VOCAB,
        n_positions=SEQ, n_embd=32, n_layer=2, n_head=4, n_inner=64,
        multi_query=True, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        use_cache=False, attn_implementation="sdpa"), causal_lm_data,
        ["GPTBigCodeBlock"], fused_key_bias("c_attn.bias", multi_query(32, 8))),
    "mixtral": Arch("decoder", hf(
        T.MixtralForCausalLM, T.MixtralConfig, num_key_value_heads=2,
        num_local_experts=4, num_experts_per_tok=2, **DEC), causal_lm_data,
        ["MixtralDecoderLayer"]),
    # With its load-balancing loss (histc of the router's choices times
    # its mean probabilities) added to the loss.
    "mixtral_aux": Arch("decoder", hf(
        T.MixtralForCausalLM, T.MixtralConfig, num_key_value_heads=2,
        num_local_experts=4, num_experts_per_tok=2, output_router_logits=True,
        router_aux_loss_coef=0.02, **DEC), causal_lm_data,
        ["MixtralDecoderLayer"]),
    # Gemma 2: logits and attention scores soft-capped (tanh), sliding
    # windows on alternate layers; transformers runs it with eager attention.
    "gemma2": Arch("decoder", hf(
        T.Gemma2ForCausalLM, T.Gemma2Config, num_key_value_heads=2,
        head_dim=8, sliding_window=8, **{**DEC, "attn_implementation": "eager"}),
        causal_lm_data, ["Gemma2DecoderLayer"]),
    "gemma3": Arch("decoder", hf(
        T.Gemma3ForCausalLM, T.Gemma3TextConfig, num_key_value_heads=2,
        head_dim=8, sliding_window=8, **DEC), causal_lm_data,
        ["Gemma3DecoderLayer"]),
    "olmo2": Arch("decoder", hf(
        T.Olmo2ForCausalLM, T.Olmo2Config, num_key_value_heads=4,
        **TOKENS, **DEC),
        causal_lm_data, ["Olmo2DecoderLayer"]),
    "granite": Arch("decoder", hf(
        T.GraniteForCausalLM, T.GraniteConfig, num_key_value_heads=2,
        embedding_multiplier=2.0, residual_multiplier=0.5,
        attention_multiplier=0.1, logits_scaling=4.0, **DEC),
        causal_lm_data, ["GraniteDecoderLayer"]),
    "cohere": Arch("decoder", hf(
        T.CohereForCausalLM, T.CohereConfig, num_key_value_heads=2,
        **TOKENS, **DEC),
        causal_lm_data, ["CohereDecoderLayer"]),
    "nemotron": Arch("decoder", hf(
        T.NemotronForCausalLM, T.NemotronConfig, num_key_value_heads=2,
        **TOKENS, **DEC),
        causal_lm_data, ["NemotronDecoderLayer"]),
    "persimmon": Arch("decoder", hf(
        T.PersimmonForCausalLM, T.PersimmonConfig, vocab_size=VOCAB,
        hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=SEQ, use_cache=False,
        hidden_dropout=0.0, **TOKENS),
        causal_lm_data, ["PersimmonDecoderLayer"],
        noise_of("k_layernorm.bias")),
    "smollm3": Arch("decoder", hf(
        T.SmolLM3ForCausalLM, T.SmolLM3Config, num_key_value_heads=2,
        **TOKENS, **DEC),
        causal_lm_data, ["SmolLM3DecoderLayer"]),
    "glm": Arch("decoder", hf(
        T.GlmForCausalLM, T.GlmConfig, num_key_value_heads=2, head_dim=8,
        pad_token_id=1, eos_token_id=0, **DEC), causal_lm_data,
        ["GlmDecoderLayer"], key_bias_noise),
    "mpt": Arch("decoder", hf(
        T.MptForCausalLM, T.MptConfig, vocab_size=VOCAB, d_model=32,
        n_heads=4, n_layers=2, expansion_ratio=2, max_seq_len=SEQ,
        use_cache=False), causal_lm_data, ["MptBlock"]),
    # Mixtures of experts beyond Mixtral's: a shared expert behind a
    # sigmoid gate (Qwen2-MoE), unnormalised top-k weights (OLMoE).
    "qwen2_moe": Arch("decoder", hf(
        T.Qwen2MoeForCausalLM, T.Qwen2MoeConfig, num_key_value_heads=2,
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        shared_expert_intermediate_size=64, **DEC), causal_lm_data,
        ["Qwen2MoeDecoderLayer"]),
    "qwen3_moe": Arch("decoder", hf(
        T.Qwen3MoeForCausalLM, T.Qwen3MoeConfig, num_key_value_heads=2,
        head_dim=8, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, **DEC), causal_lm_data,
        ["Qwen3MoeDecoderLayer"]),
    # Multi-head latent attention (low-rank q and kv, keys built from a
    # rotary and a plain part by slice assignment) and group-limited
    # routing (the chosen groups' mask scattered, scores gathered), with a
    # shared expert; the first layer dense.
    "deepseek_v3": Arch("decoder", hf(
        T.DeepseekV3ForCausalLM, T.DeepseekV3Config, num_key_value_heads=4,
        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        n_shared_experts=1, first_k_dense_replace=1, n_group=2,
        topk_group=1, kv_lora_rank=16, q_lora_rank=16, qk_rope_head_dim=4,
        qk_nope_head_dim=4, v_head_dim=8, **DEC), causal_lm_data,
        ["DeepseekV3DecoderLayer"]),
    "olmoe": Arch("decoder", hf(
        T.OlmoeForCausalLM, T.OlmoeConfig, num_key_value_heads=4,
        num_experts=4, num_experts_per_tok=2, **TOKENS, **DEC), causal_lm_data,
        ["OlmoeDecoderLayer"]),
    # Attention sinks (a learned logit per head, max-subtracted), clamped
    # SwiGLU experts, alternating sliding windows; eager attention.
    "gpt_oss": Arch("decoder", hf(
        T.GptOssForCausalLM, T.GptOssConfig, num_key_value_heads=2,
        head_dim=8, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=8, **{**DEC, "attn_implementation": "eager"}),
        causal_lm_data, ["GptOssDecoderLayer"]),
    "granitemoe": Arch("decoder", hf(
        T.GraniteMoeForCausalLM, T.GraniteMoeConfig, num_key_value_heads=2,
        num_local_experts=4, num_experts_per_tok=2, **DEC), causal_lm_data,
        ["GraniteMoeDecoderLayer"]),
    "biogpt": Arch("decoder", hf(
        T.BioGptForCausalLM, T.BioGptConfig, vocab_size=VOCAB,
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=SEQ + 2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        layerdrop=0.0, use_cache=False, **TOKENS), causal_lm_data,
        ["BioGptDecoderLayer"], key_bias_noise),
    "xglm": Arch("decoder", hf(
        T.XGLMForCausalLM, T.XGLMConfig, vocab_size=VOCAB, d_model=32,
        num_layers=2, attention_heads=4, ffn_dim=64,
        max_position_embeddings=SEQ, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, layerdrop=0.0, use_cache=False, **TOKENS),
        causal_lm_data, ["XGLMDecoderLayer"], key_bias_noise),
    # A state-space model: the selective scan unrolled over the sequence
    # (transformers' path without its CUDA kernels), a depthwise causal
    # conv1d, a weight times a batch of activations (broadcast matmul).
    "mamba": Arch("decoder", hf(
        T.MambaForCausalLM, T.MambaConfig, vocab_size=VOCAB, hidden_size=32,
        state_size=4, num_hidden_layers=2, expand=2, conv_kernel=4,
        use_cache=False), causal_lm_data, ["MambaBlock"]),
    # Mamba-2's state-space duality: the chunked scan (chunk 8 of the 16
    # tokens) as segment sums, masks and matmuls, heads sharing B and C.
    "mamba2": Arch("decoder", hf(
        T.Mamba2ForCausalLM, T.Mamba2Config, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, num_heads=8, head_dim=8, n_groups=1,
        state_size=8, expand=2, chunk_size=8, use_cache=False),
        causal_lm_data, ["Mamba2Block"]),
    # RWKV-4's WKV recurrence unrolled over the sequence (transformers'
    # path without its CUDA kernel), token shift by zero-padding.
    "rwkv": Arch("decoder", hf(
        T.RwkvForCausalLM, T.RwkvConfig, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64,
        context_length=SEQ, use_cache=False), causal_lm_data, ["RwkvBlock"]),
    # Griffin: RG-LRU recurrent blocks (a gated linear recurrence) with
    # local attention every third layer.
    "recurrent_gemma": Arch("decoder", hf(
        T.RecurrentGemmaForCausalLM, T.RecurrentGemmaConfig,
        vocab_size=VOCAB, hidden_size=32, lru_width=32, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=1, head_dim=8,
        intermediate_size=64, attention_window_size=8, use_cache=False),
        causal_lm_data, ["RecurrentGemmaDecoderLayer"]),
    # A Mamba / attention hybrid with a mixture of experts every other
    # layer.
    "jamba": Arch("decoder", hf(
        T.JambaForCausalLM, T.JambaConfig, num_key_value_heads=2,
        num_experts=2, num_experts_per_tok=1, mamba_d_state=8,
        attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
        expert_layer_offset=1, **DEC), causal_lm_data,
        ["JambaAttentionDecoderLayer", "JambaMambaDecoderLayer"]),
    # LFM2: gated short convolutions (depthwise causal conv1d) and
    # grouped-query attention layers.
    "lfm2": Arch("decoder", hf(
        T.Lfm2ForCausalLM, T.Lfm2Config, num_key_value_heads=2,
        layer_types=["conv", "full_attention"], **DEC), causal_lm_data,
        ["Lfm2DecoderLayer"]),
    "bamba": Arch("decoder", hf(
        T.BambaForCausalLM, T.BambaConfig, num_key_value_heads=2,
        mamba_n_heads=8, mamba_d_head=8, mamba_d_state=8, mamba_n_groups=1,
        mamba_chunk_size=8, attn_layer_indices=[1], **DEC), causal_lm_data,
        ["BambaDecoderLayer"]),
    "falcon_mamba": Arch("decoder", hf(
        T.FalconMambaForCausalLM, T.FalconMambaConfig, vocab_size=VOCAB,
        hidden_size=32, state_size=4, num_hidden_layers=2, expand=2,
        conv_kernel=4, use_cache=False), causal_lm_data,
        ["FalconMambaBlock"]),
    # Lightning attention (linear attention with per-head decay, chunked)
    # in every layer but the last, softmax attention there; MoE MLPs.
    "minimax": Arch("decoder", hf(
        T.MiniMaxForCausalLM, T.MiniMaxConfig, num_key_value_heads=2,
        num_local_experts=2, num_experts_per_tok=1, block_size=8,
        layer_types=["linear_attention", "full_attention"], **DEC),
        causal_lm_data, ["MiniMaxDecoderLayer"]),
    # Hybrid sliding-window and global attention, QK norms after the
    # projections.
    "exaone4": Arch("decoder", hf(
        T.Exaone4ForCausalLM, T.Exaone4Config, num_key_value_heads=2,
        sliding_window=8, **DEC), causal_lm_data, ["Exaone4DecoderLayer"]),
    "hunyuan": Arch("decoder", hf(
        T.HunYuanDenseV1ForCausalLM, T.HunYuanDenseV1Config,
        num_key_value_heads=2, head_dim=8, **TOKENS, **DEC), causal_lm_data,
        ["HunYuanDenseV1DecoderLayer"]),
    "ernie4_5": Arch("decoder", hf(
        T.Ernie4_5ForCausalLM, T.Ernie4_5Config, num_key_value_heads=2,
        head_dim=8, **TOKENS, **DEC), causal_lm_data,
        ["Ernie4_5DecoderLayer"]),
    # Encoders
    "bert": Arch("encoder", hf(T.BertForMaskedLM, T.BertConfig, **ENC),
                 masked_lm_data, ["BertLayer"], key_bias_noise),
    "roberta": Arch("encoder", lambda: HFLoss(roberta()), roberta_data,
                    ["RobertaLayer"], key_bias_noise),
    # A dual encoder: BERT run on queries and on longer documents, each
    # length a forward of its own (the position ids' lengths as arguments).
    "sbert": Arch("encoder", lambda: SentenceEmbeddingLoss(T.BertModel(
        T.BertConfig(**ENC), add_pooling_layer=False)), query_document_data,
        ["BertLayer"], key_bias_noise),
    # ESM-2 (protein language model): rotary positions, erf-GELU, token
    # dropout's rescaling by the share of mask tokens (id 3 here) per row.
    "esm": Arch("encoder", hf(
        T.EsmForMaskedLM, T.EsmConfig, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ + 2, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, position_embedding_type="rotary",
        token_dropout=True, mask_token_id=3, pad_token_id=0,
        emb_layer_norm_before=False), masked_lm_data, ["EsmLayer"],
        key_bias_noise),
    # Characters hashed into buckets (remainder of integer ids), a strided
    # downsampling conv and an upsampling back to characters.
    "canine": Arch("encoder", hf(
        T.CanineForSequenceClassification, T.CanineConfig, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        num_hash_functions=2, num_hash_buckets=64, downsampling_rate=2,
        max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, num_labels=CLASSES),
        classifier_data, ["CanineLayer"], key_bias_noise),
    # BigBird at full attention (its block-sparse pattern needs longer
    # sequences than 16 tokens).
    "big_bird": Arch("encoder", hf(
        T.BigBirdForMaskedLM, T.BigBirdConfig, attention_type="original_full",
        **{**ENC, "attn_implementation": "eager"}), masked_lm_data,
        ["BigBirdLayer"], key_bias_noise),
    # Rotary position embeddings in an encoder.
    "roformer": Arch("encoder", hf(
        T.RoFormerForMaskedLM, T.RoFormerConfig, embedding_size=32,
        **{**ENC, "attn_implementation": "eager"}), masked_lm_data,
        ["RoFormerLayer"], key_bias_noise),
    # Input embeddings narrower than the hidden size, an untied wider
    # output embedding.
    "rembert": Arch("encoder", hf(
        T.RemBertForMaskedLM, T.RemBertConfig, input_embedding_size=16,
        output_embedding_size=48, **{**ENC, "attn_implementation": "eager"}),
        masked_lm_data, ["RemBertLayer"], key_bias_noise),
    "distilbert": Arch("encoder", hf(
        T.DistilBertForMaskedLM, T.DistilBertConfig, vocab_size=VOCAB,
        dim=32, n_layers=2, n_heads=4, hidden_dim=64,
        max_position_embeddings=SEQ, dropout=0.0, attention_dropout=0.0,
        attn_implementation="sdpa"), masked_lm_data, ["TransformerBlock"],
        key_bias_noise),
    "albert": Arch("encoder", hf(
        T.AlbertForMaskedLM, T.AlbertConfig, vocab_size=VOCAB,
        embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0,
        attn_implementation="sdpa"), masked_lm_data, ["AlbertLayer"],
        key_bias_noise),
    "electra": Arch("encoder", hf(
        T.ElectraForMaskedLM, T.ElectraConfig, embedding_size=16, **ENC),
        masked_lm_data, ["ElectraLayer"], key_bias_noise),
    # Token mixing by Re(fftn(x, dim=(1, 2))) instead of attention: the
    # DFT's cosine and sine matrices applied along each dim.
    "fnet": Arch("encoder", hf(
        T.FNetForMaskedLM, T.FNetConfig, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, intermediate_size=64,
        max_position_embeddings=SEQ, hidden_dropout_prob=0.0),
        masked_lm_data, ["FNetLayer"]),
    "deberta_v2": Arch("encoder", hf(
        T.DebertaV2ForMaskedLM, T.DebertaV2Config, vocab_size=VOCAB,
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=SEQ,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        relative_attention=True, position_buckets=8,
        pos_att_type=["p2c", "c2p"]), masked_lm_data, ["DebertaV2Layer"]),
    "modernbert": Arch("encoder", lambda: HFLoss(T.ModernBertForSequenceClassification(
        T.ModernBertConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=4,
            max_position_embeddings=SEQ, global_attn_every_n_layers=1,
            attention_dropout=0.0, mlp_dropout=0.0, embedding_dropout=0.0,
            num_labels=CLASSES, pad_token_id=0, attn_implementation="sdpa"))),
        classifier_data, ["ModernBertEncoderLayer"]),
    "xlm_roberta": Arch("encoder", hf(
        T.XLMRobertaForMaskedLM, T.XLMRobertaConfig, pad_token_id=1,
        **{**ENC, "max_position_embeddings": SEQ + 2}), masked_lm_data,
        ["XLMRobertaLayer"], key_bias_noise),
    "mobilebert": Arch("encoder", hf(
        T.MobileBertForMaskedLM, T.MobileBertConfig, vocab_size=VOCAB,
        hidden_size=32, embedding_size=16, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=32,
        intra_bottleneck_size=16, true_hidden_size=16,
        num_feedforward_networks=2, max_position_embeddings=SEQ,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
        masked_lm_data, ["MobileBertLayer"], key_bias_noise),
    # Pooling by strided slices whose results are written back into the
    # positions (slice_scatter).
    "funnel": Arch("encoder", hf(
        T.FunnelForMaskedLM, T.FunnelConfig, vocab_size=VOCAB, d_model=32,
        n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1],
        hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0),
        masked_lm_data, ["FunnelLayer"], noise_of("k_head.bias")),
    # Grouped 1x1 conv1d projections.
    "squeezebert": Arch("encoder", hf(
        T.SqueezeBertForMaskedLM, T.SqueezeBertConfig, vocab_size=VOCAB,
        hidden_size=32, embedding_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, q_groups=2, k_groups=2,
        v_groups=2, post_attention_groups=2, intermediate_groups=2,
        output_groups=2), masked_lm_data, ["SqueezeBertModule"],
        key_bias_noise),
    "mpnet": Arch("encoder", hf(
        T.MPNetForMaskedLM, T.MPNetConfig, vocab_size=VOCAB, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ + 2, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0), masked_lm_data, ["MPNetLayer"],
        key_bias_noise),
    "ernie": Arch("encoder", hf(T.ErnieForMaskedLM, T.ErnieConfig, **ENC),
                  masked_lm_data, ["ErnieLayer"], key_bias_noise),
    # Encoder-decoders
    "t5": Arch("encoder-decoder", lambda: HFLoss(t5(), ("input_ids", "decoder_input_ids")),
               seq2seq_data, ["T5Block"]),
    # T5 with a relative-position bias of its own in every layer.
    "umt5": Arch("encoder-decoder", hf(
        T.UMT5ForConditionalGeneration, T.UMT5Config, **T5_SIZES),
        seq2seq_data, ["UMT5Block"]),
    "bart": Arch("encoder-decoder", lambda: HFLoss(T.BartForConditionalGeneration(
        T.BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2,
                     decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=64,
                     decoder_ffn_dim=64, max_position_embeddings=SEQ,
                     dropout=0.0, attention_dropout=0.0,
                     activation_dropout=0.0, use_cache=False,
                     pad_token_id=1, bos_token_id=0, eos_token_id=2,
                     decoder_start_token_id=2)),
        ("input_ids", "decoder_input_ids")), seq2seq_data,
        ["BartEncoderLayer", "BartDecoderLayer"]),
    "mbart": Arch("encoder-decoder", seq2seq(
        T.MBartForConditionalGeneration, T.MBartConfig), seq2seq_data,
        ["MBartEncoderLayer", "MBartDecoderLayer"], key_bias_noise),
    "pegasus": Arch("encoder-decoder", seq2seq(
        T.PegasusForConditionalGeneration, T.PegasusConfig), seq2seq_data,
        ["PegasusEncoderLayer", "PegasusDecoderLayer"], key_bias_noise),
    "marian": Arch("encoder-decoder", seq2seq(
        T.MarianMTModel, T.MarianConfig), seq2seq_data,
        ["MarianEncoderLayer", "MarianDecoderLayer"], key_bias_noise),
    # Sinusoidal positions looked up by ids computed at run time, detached.
    "m2m100": Arch("encoder-decoder", seq2seq(
        T.M2M100ForConditionalGeneration, T.M2M100Config,
        encoder_layerdrop=0.0, decoder_layerdrop=0.0), seq2seq_data,
        ["M2M100EncoderLayer", "M2M100DecoderLayer"], key_bias_noise),
    "mt5": Arch("encoder-decoder", hf(
        T.MT5ForConditionalGeneration, T.MT5Config, **T5_SIZES),
        seq2seq_data, ["MT5Block"]),
    "blenderbot": Arch("encoder-decoder", seq2seq(
        T.BlenderbotForConditionalGeneration, T.BlenderbotConfig),
        seq2seq_data, ["BlenderbotEncoderLayer", "BlenderbotDecoderLayer"],
        key_bias_noise),
    # Vision
    "vit": Arch("vision", lambda: HFLoss(vit(), "pixel_values"),
                images(16), ["ViTLayer"], key_bias_noise),
    "deit": Arch("vision", hf(
        T.DeiTForImageClassification, T.DeiTConfig, inputs="pixel_values", image_size=16,
        patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, num_labels=CLASSES,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        attn_implementation="sdpa"), images(16), ["DeiTLayer"],
        key_bias_noise),
    "convnext_hf": Arch("vision", hf(
        T.ConvNextForImageClassification, T.ConvNextConfig, inputs="pixel_values",
        num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32],
        depths=[1, 1], num_labels=CLASSES, drop_path_rate=0.0),
        images(32), ["ConvNextLayer"]),
    "resnet_hf": Arch("vision", hf(
        T.ResNetForImageClassification, T.ResNetConfig, inputs="pixel_values", num_channels=3,
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
        layer_type="basic", num_labels=CLASSES), images(32),
        ["ResNetBasicLayer"]),
    "tv_resnet18": Arch("vision", torchvision_model(
        "resnet18", num_classes=CLASSES), images(32), ["BasicBlock"]),
    "tv_mobilenet_v2": Arch("vision", torchvision_model(
        "mobilenet_v2", num_classes=CLASSES, width_mult=0.25, dropout=0.0),
        images(32),
        ["InvertedResidual"]),
    "timm_convnext": Arch("vision", timm_model(
        "convnext_atto", num_classes=CLASSES), images(32), ["ConvNeXtBlock"]),
    "timm_vit": Arch("vision", timm_model(
        "vit_tiny_patch16_224", num_classes=CLASSES, img_size=32,
        patch_size=8, embed_dim=32, depth=2, num_heads=4), images(32),
        ["Block"], fused_key_bias("qkv.bias", thirds)),
    "swinv2": Arch("vision", hf(
        T.Swinv2ForImageClassification, T.Swinv2Config, inputs="pixel_values",
        image_size=32, patch_size=4, num_channels=3, embed_dim=16,
        depths=[1, 1], num_heads=[2, 4], window_size=4, mlp_ratio=2.0,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        drop_path_rate=0.0, num_labels=CLASSES), images(32),
        ["Swinv2Layer"]),
    # Spatial-reduction attention (keys and values from a strided conv).
    "pvt_v2": Arch("vision", hf(
        T.PvtV2ForImageClassification, T.PvtV2Config, inputs="pixel_values",
        image_size=32, hidden_sizes=[16, 32], depths=[1, 1],
        num_encoder_blocks=2, sr_ratios=[2, 1], num_attention_heads=[1, 2],
        patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2],
        drop_path_rate=0.0, num_labels=CLASSES), images(32),
        ["PvtV2BlockLayer"]),
    # Focal modulation: depthwise convs at growing windows, gated.
    "focalnet": Arch("vision", hf(
        T.FocalNetForImageClassification, T.FocalNetConfig,
        inputs="pixel_values", image_size=32, patch_size=4, embed_dim=16,
        depths=[1, 1], focal_levels=[2, 2], focal_windows=[3, 3],
        hidden_sizes=[16, 32], drop_path_rate=0.0, num_labels=CLASSES),
        images(32), ["FocalNetLayer"]),
    "data2vec_vision": Arch("vision", hf(
        T.Data2VecVisionForImageClassification, T.Data2VecVisionConfig,
        intermediate_size=64, drop_path_rate=0.0, **PATCHES), images(16),
        ["Data2VecVisionLayer"], key_bias_noise),
    "dinov2_registers": Arch("vision", hf(
        T.Dinov2WithRegistersForImageClassification,
        T.Dinov2WithRegistersConfig, mlp_ratio=2, num_register_tokens=2,
        drop_path_rate=0.0, **PATCHES), images(16),
        ["Dinov2WithRegistersLayer"], key_bias_noise),
    "ijepa": Arch("vision", hf(
        T.IJepaForImageClassification, T.IJepaConfig, intermediate_size=64,
        **PATCHES), images(16), ["IJepaLayer"], key_bias_noise),
    "vit_msn": Arch("vision", hf(
        T.ViTMSNForImageClassification, T.ViTMSNConfig, intermediate_size=64,
        **PATCHES), images(16), ["ViTMSNLayer"], key_bias_noise),
    # Average pooling as the token mixer.
    "poolformer_hf": Arch("vision", hf(
        T.PoolFormerForImageClassification, T.PoolFormerConfig,
        inputs="pixel_values", hidden_sizes=[16, 32], depths=[1, 1],
        num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2],
        padding=[2, 1], drop_path_rate=0.0, num_labels=CLASSES), images(32),
        ["PoolFormerLayer"]),
    # Global response normalisation.
    "convnextv2_hf": Arch("vision", hf(
        T.ConvNextV2ForImageClassification, T.ConvNextV2Config,
        inputs="pixel_values", patch_size=4, num_stages=2,
        hidden_sizes=[16, 32], depths=[1, 1], drop_path_rate=0.0,
        num_labels=CLASSES), images(32), ["ConvNextV2Layer"]),
    # Efficient additive attention (no T x T scores).
    "swiftformer": Arch("vision", hf(
        T.SwiftFormerForImageClassification, T.SwiftFormerConfig,
        inputs="pixel_values", depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32],
        drop_path_rate=0.0, num_labels=CLASSES), images(32),
        ["SwiftFormerEncoderBlock"]),
    "pvt": Arch("vision", hf(
        T.PvtForImageClassification, T.PvtConfig, inputs="pixel_values",
        image_size=32, hidden_sizes=[16, 32], depths=[1, 1],
        num_encoder_blocks=2, sequence_reduction_ratios=[2, 1],
        num_attention_heads=[1, 2], patch_sizes=[4, 2], strides=[4, 2],
        mlp_ratios=[2, 2], drop_path_rate=0.0, num_labels=CLASSES),
        images(32), ["PvtLayer"]),
    "swin": Arch("vision", hf(
        T.SwinForImageClassification, T.SwinConfig, inputs="pixel_values",
        image_size=32, patch_size=4, num_channels=3, embed_dim=16,
        depths=[1, 1], num_heads=[2, 4], window_size=4, mlp_ratio=2.0,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        drop_path_rate=0.0, num_labels=CLASSES), images(32), ["SwinLayer"],
        key_bias_noise),
    # Its relative-position table resized (bilinear) to the window it has.
    "beit": Arch("vision", hf(
        T.BeitForImageClassification, T.BeitConfig, inputs="pixel_values",
        image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        drop_path_rate=0.0, use_relative_position_bias=True,
        num_labels=CLASSES), images(16), ["BeitLayer"], key_bias_noise),
    "dinov2": Arch("vision", hf(
        T.Dinov2ForImageClassification, T.Dinov2Config,
        inputs="pixel_values", image_size=16, patch_size=4, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        drop_path_rate=0.0, num_labels=CLASSES), images(16), ["Dinov2Layer"],
        key_bias_noise),
    # Overlapping patch embeddings (strided 7x7 and 3x3 convs), spatial
    # reduction attention.
    "segformer": Arch("vision", hf(
        T.SegformerForImageClassification, T.SegformerConfig,
        inputs="pixel_values", num_channels=3, num_encoder_blocks=2,
        depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
        patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
        mlp_ratios=[2, 2], hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0,
        drop_path_rate=0.0, num_labels=CLASSES), images(32),
        ["SegformerLayer"], key_bias_noise),
    # A ViT backbone reassembled at four scales (transposed convolutions
    # upsample two of them), fused and upsampled to a depth map.
    "dpt": Arch("vision", lambda: DenseLoss(T.DPTForDepthEstimation(
        T.DPTConfig(hidden_size=32, num_hidden_layers=4,
                    num_attention_heads=4, intermediate_size=64,
                    image_size=32, patch_size=8,
                    backbone_out_indices=[0, 1, 2, 3],
                    neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16,
                    reassemble_factors=[4, 2, 1, 0.5],
                    hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0))),
        dense_data((3, 32, 32), (64, 64)), ["DPTViTLayer"], key_bias_noise),
    # DPT's neck and head on a DINOv2 backbone.
    "depth_anything": Arch("vision", lambda: DenseLoss(
        T.DepthAnythingForDepthEstimation(T.DepthAnythingConfig(
            backbone_config=T.Dinov2Config(
                image_size=16, patch_size=4, hidden_size=32,
                num_hidden_layers=4, num_attention_heads=4, mlp_ratio=2,
                out_indices=[1, 2, 3, 4], reshape_hidden_states=False),
            neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16,
            head_hidden_size=8, reassemble_hidden_size=32, patch_size=4,
            reassemble_factors=[4, 2, 1, 0.5]))),
        dense_data((3, 16, 16), (16, 16)), ["Dinov2Layer"], key_bias_noise),
    # A hierarchical (SegFormer-like) encoder and a depth decoder.
    "glpn": Arch("vision", lambda: DenseLoss(T.GLPNForDepthEstimation(
        T.GLPNConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                     hidden_sizes=[16, 32], patch_sizes=[7, 3],
                     strides=[4, 2], num_attention_heads=[1, 2],
                     mlp_ratios=[2, 2], decoder_hidden_size=16,
                     hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0,
                     drop_path_rate=0.0))),
        dense_data((3, 32, 32), (32, 32)), ["GLPNLayer"],
        # The fusion's convolutions feed batch norms.
        noise_of("convolutional_layer1.0.bias",
                 "convolutional_layer2.0.bias")),
    # Super-resolution: Swin V2 blocks, pixel shuffle, an L1 loss.
    "swin2sr": Arch("vision", lambda: DenseLoss(
        T.Swin2SRForImageSuperResolution(T.Swin2SRConfig(
            image_size=16, patch_size=1, embed_dim=16, depths=[2],
            num_heads=[2], window_size=4, upscale=2,
            upsampler="pixelshuffle", drop_path_rate=0.0)),
        output="reconstruction", loss="l1_loss"),
        dense_data((3, 16, 16), (3, 32, 32)), ["Swin2SRLayer"],
        key_bias_noise),
    # Semantic segmentation: a ConvNeXt backbone, pyramid pooling, a
    # per-pixel cross-entropy on logits upsampled to the image, and an
    # auxiliary head.
    "upernet": Arch("vision", hf(
        T.UperNetForSemanticSegmentation, T.UperNetConfig,
        inputs="pixel_values", backbone_config=T.ConvNextConfig(
            hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
            out_features=["stage1", "stage2", "stage3", "stage4"]),
        hidden_size=16, auxiliary_in_channels=32, num_labels=CLASSES),
        segmentation_data(64), ["ConvNextLayer"]),
    # Cross-attention from learned latents to the pixels.
    "perceiver": Arch("vision", hf(
        T.PerceiverForImageClassificationLearned, T.PerceiverConfig,
        inputs="inputs", num_latents=8, d_latents=32, d_model=16,
        num_blocks=1, num_self_attends_per_block=1,
        num_self_attention_heads=2, num_cross_attention_heads=1,
        image_size=8, num_labels=CLASSES, attention_probs_dropout_prob=0.0),
        images(8), ["PerceiverLayer"], key_bias_noise),
    "clip_vision": Arch("vision", hf(
        T.CLIPForImageClassification, T.CLIPConfig, inputs="pixel_values",
        vision_config=dict(image_size=16, patch_size=4, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64), num_labels=CLASSES),
        images(16), ["CLIPEncoderLayer"], key_bias_noise),
    "siglip_vision": Arch("vision", hf(
        T.SiglipForImageClassification, T.SiglipConfig,
        inputs="pixel_values",
        vision_config=dict(image_size=16, patch_size=4, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64), num_labels=CLASSES),
        images(16), ["SiglipEncoderLayer"], key_bias_noise),
    "regnet_hf": Arch("vision", hf(
        T.RegNetForImageClassification, T.RegNetConfig,
        inputs="pixel_values", embedding_size=8, hidden_sizes=[8, 16],
        depths=[1, 1], groups_width=4, num_labels=CLASSES), images(32),
        ["RegNetYLayer", "RegNetXLayer"]),
    # Depthwise convs, squeeze-excitation, SiLU, 'same' padding.
    "efficientnet_hf": Arch("vision", hf(
        T.EfficientNetForImageClassification, T.EfficientNetConfig,
        inputs="pixel_values", image_size=32, width_coefficient=0.25,
        depth_coefficient=0.25, hidden_dim=320, dropout_rate=0.0,
        drop_connect_rate=0.0, num_labels=CLASSES), images(32),
        ["EfficientNetBlock"], noise_of("project_bn.bias")),
    # 64 x 64 images (also for RegNet, EfficientNet, MnasNet and ResNeXt
    # below): at 32 the last stage's batch norms see one pixel of four
    # samples, so that torch's own f32 first-step gradients are 2% off
    # float64's.
    "tv_resnet50": Arch("vision", torchvision_model(
        "resnet50", num_classes=CLASSES, width_per_group=16), images(64),
        ["Bottleneck"]),
    "tv_regnet": Arch("vision", torchvision_model(
        "regnet_y_400mf", num_classes=CLASSES), images(64),
        ["ResBottleneckBlock"]),
    "tv_efficientnet_b0": Arch("vision", torchvision_model(
        "efficientnet_b0", num_classes=CLASSES, stochastic_depth_prob=0.0,
        dropout=0.0), images(64), ["MBConv"]),
    # Concatenated features; norm0's scale, before ReLU, max pooling and
    # the next batch norm, has no gradient while its bias is 0 (at init).
    "tv_densenet": Arch("vision", lambda: ClassifierLoss(
        __import__("torchvision").models.DenseNet(
            growth_rate=8, block_config=(2, 2), num_init_features=16,
            num_classes=CLASSES)), images(32), ["_DenseLayer"],
        noise_of("features.norm0.weight")),
    # Channel shuffle (a transpose between reshapes).
    "tv_shufflenet": Arch("vision", torchvision_model(
        "shufflenet_v2_x0_5", num_classes=CLASSES), images(32),
        ["InvertedResidual"]),
    # Max pooling with ceil_mode.
    "tv_squeezenet": Arch("vision", torchvision_model(
        "squeezenet1_1", num_classes=CLASSES, dropout=0.0), images(32),
        ["Fire"]),
    # Hardswish, hardsigmoid squeeze-excitation.
    "tv_mobilenet_v3": Arch("vision", torchvision_model(
        "mobilenet_v3_small", num_classes=CLASSES, width_mult=0.25,
        dropout=0.0), images(32), ["InvertedResidual"]),
    "timm_resnet": Arch("vision", timm_model(
        "resnet10t", num_classes=CLASSES), images(32), ["BasicBlock"]),
    "timm_efficientnet": Arch("vision", timm_model(
        "efficientnet_b0", num_classes=CLASSES, drop_rate=0.0,
        drop_path_rate=0.0), images(32),
        ["InvertedResidual", "DepthwiseSeparableConv"]),
    "timm_mobilenetv3": Arch("vision", timm_model(
        "mobilenetv3_small_050", num_classes=CLASSES), images(32),
        ["InvertedResidual"]),
    # Token mixing: its fc2 bias shifts each token alike across channels,
    # which the next LayerNorm removes.
    "timm_mixer": Arch("vision", lambda: ClassifierLoss(
        __import__("timm").models.mlp_mixer.MlpMixer(
            num_classes=CLASSES, img_size=32, patch_size=8, embed_dim=32,
            num_blocks=2)), images(32), ["MixerBlock"],
        noise_of("mlp_tokens.fc2.bias")),
    "timm_convnextv2": Arch("vision", timm_model(
        "convnextv2_atto", num_classes=CLASSES), images(32),
        ["ConvNeXtBlock"]),
    "timm_poolformer": Arch("vision", timm_model(
        "poolformerv2_s12", num_classes=CLASSES), images(32),
        ["MetaFormerBlock"]),
    "timm_swin": Arch("vision", timm_model(
        "swin_tiny_patch4_window7_224", num_classes=CLASSES, img_size=32,
        window_size=4, embed_dim=16, depths=(1, 1), num_heads=(2, 4),
        drop_path_rate=0.0), images(32), ["SwinTransformerBlock"],
        fused_key_bias("qkv.bias", thirds)),
    "timm_eva": Arch("vision", timm_model(
        "eva02_tiny_patch14_224", num_classes=CLASSES, img_size=28,
        embed_dim=32, depth=2, num_heads=4), images(28), ["EvaBlock"]),
    "mobilevit": Arch("vision", hf(
        T.MobileViTForImageClassification, T.MobileViTConfig,
        inputs="pixel_values", image_size=32, patch_size=2,
        hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
        num_attention_heads=2, num_labels=CLASSES, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0),
        images(32), ["MobileViTLayer"], key_bias_noise),
    # Attention with a learned bias per offset, reshape_as, batch norms
    # after every linear layer.
    "levit": Arch("vision", hf(
        T.LevitForImageClassification, T.LevitConfig, inputs="pixel_values",
        image_size=32, hidden_sizes=[16, 32, 48],
        num_attention_heads=[1, 2, 3], depths=[1, 1, 1], key_dim=[8, 8, 8],
        num_labels=CLASSES), images(32), ["LevitResidualLayer"]),
    "tv_convnext": Arch("vision", lambda: ClassifierLoss(
        __import__("torchvision").models.convnext.ConvNeXt(
            [CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)],
            num_classes=CLASSES)), images(32), ["CNBlock"]),
    "tv_mnasnet": Arch("vision", torchvision_model(
        "mnasnet0_5", num_classes=CLASSES, dropout=0.0), images(64),
        ["_InvertedResidual"]),
    "tv_resnext": Arch("vision", torchvision_model(
        "resnext50_32x4d", num_classes=CLASSES), images(64), ["Bottleneck"]),
    # nn.MultiheadAttention (one in_proj), unflatten.
    "tv_vit": Arch("vision", lambda: ClassifierLoss(
        __import__("torchvision").models.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=4,
            hidden_dim=32, mlp_dim=64, num_classes=CLASSES)), images(32),
        ["EncoderBlock"], fused_key_bias("in_proj_bias", thirds)),
    # Inception blocks: four branches concatenated.
    "tv_googlenet": Arch("vision", torchvision_model(
        "googlenet", num_classes=CLASSES, aux_logits=False, init_weights=True,
        dropout=0.0), images(32), ["Inception"]),
    "timm_levit": Arch("vision", timm_model(
        "levit_128s", num_classes=CLASSES, img_size=32), images(32),
        ["LevitBlock"]),
    # Block and grid attention over windows, MBConv blocks.
    "timm_maxvit": Arch("vision", timm_model(
        "maxvit_nano_rw_256", num_classes=CLASSES, img_size=64,
        drop_path_rate=0.0), images(64), ["MaxxVitBlock"]),
    "timm_convmixer": Arch("vision", lambda: ClassifierLoss(
        __import__("timm").models.convmixer.ConvMixer(
            dim=32, depth=2, kernel_size=3, patch_size=4,
            num_classes=CLASSES)), images(32), ["Sequential"]),
    "timm_regnet": Arch("vision", timm_model(
        "regnety_002", num_classes=CLASSES), images(32), ["Bottleneck"]),
    # YOLO's backbones: conv-BN-LeakyReLU (decomposed, so PyTorch
    # functionalises the program and BatchNorm arrives in its functional
    # form), cross-stage partial splits.
    "timm_darknet": Arch("vision", timm_model(
        "darknet17", num_classes=CLASSES), images(32), ["DarkBlock"]),
    "timm_cspdarknet": Arch("vision", timm_model(
        "cspdarknet53", num_classes=CLASSES), images(32), ["CrossStage"]),
    # Anti-aliased downsampling: a blur after a reflect pad.
    "timm_resnetblur": Arch("vision", timm_model(
        "resnetblur18", num_classes=CLASSES), images(32), ["BasicBlock"]),
    # Efficient channel attention (a conv1d over the pooled channels,
    # expand_as back).
    "timm_ecaresnet": Arch("vision", timm_model(
        "ecaresnet26t", num_classes=CLASSES), images(32), ["Bottleneck"]),
    # Normaliser-free: weight-standardised convolutions (F.batch_norm with
    # no running statistics over each filter), no batch norm.
    "timm_nfnet": Arch("vision", timm_model(
        "nf_resnet26", num_classes=CLASSES), images(32),
        ["NormFreeBlock"]),
    # Linear attention in an autocast(enabled=False) block.
    "timm_efficientvit": Arch("vision", timm_model(
        "efficientvit_b0", num_classes=CLASSES), images(64),
        ["EfficientVitBlock"]),
    # Locally-grouped attention on [B, windows, H, T, D] heads.
    "timm_twins": Arch("vision", timm_model(
        "twins_svt_small", num_classes=CLASSES, img_size=64), images(64),
        ["Block"]),
    # Class attention: the class token attends to the patches in the last
    # blocks; layer scales.
    "timm_cait": Arch("vision", timm_model(
        "cait_xxs24_224", num_classes=CLASSES, img_size=32, patch_size=8,
        embed_dim=32, depth=2, num_heads=4, depth_token_only=1), images(32),
        ["LayerScaleBlock"], key_bias_noise),
    "timm_deit3": Arch("vision", timm_model(
        "deit3_small_patch16_224", num_classes=CLASSES, img_size=32,
        patch_size=8, embed_dim=32, depth=2, num_heads=4), images(32),
        ["Block"], fused_key_bias("qkv.bias", thirds)),
    # Attention over windows: HaloNet's blocks with halos (Tensor.unfold),
    # LambdaNet's position lambdas (a (r, r, 1) conv3d), BAT's
    # bilinear attention transforms (adaptive max pooling).
    "timm_halonet": Arch("vision", timm_byoanet(
        "self_attn", self_attn_layer="halo",
        self_attn_kwargs=dict(block_size=4, halo_size=1)), images(32),
        ["BottleneckBlock", "SelfAttnBlock"]),
    "timm_lambda": Arch("vision", timm_byoanet(
        "self_attn", self_attn_layer="lambda", self_attn_kwargs=dict(r=3)),
        images(32), ["BottleneckBlock", "SelfAttnBlock"]),
    "timm_bat": Arch("vision", timm_byoanet(
        "bottle", attn_layer="bat", attn_kwargs=dict(block_size=4)),
        images(32), ["BottleneckBlock"]),
    # Outlook attention (F.unfold, F.fold) and class attention.
    "timm_volo": Arch("vision", lambda: ClassifierLoss(
        __import__("timm").models.volo.VOLO(
            layers=(1, 1, 1, 1), img_size=32, embed_dims=(32, 64, 64, 64),
            num_heads=(2, 4, 4, 4), stem_hidden_dim=16,
            num_classes=CLASSES)), images(32),
        ["Outlooker", "Transformer", "ClassBlock"]),
    # Attention biases picked by a buffer of relative positions (over a
    # fixed 7 x 7 grid: 224-pixel images).
    "timm_efficientformer": Arch("vision", timm_model(
        "efficientformer_l1", num_classes=CLASSES, depths=(1, 1, 1, 2),
        embed_dims=(8, 16, 24, 32)), images(224),
        ["MetaBlock2d", "MetaBlock1d"]),
    # Video: 3-D convolutions (sums of 2-D ones over the time taps),
    # BatchNorm3d, global 3-D pooling.
    # transformers' video models take [N, frames, 3, H, W].
    "videomae": Arch("video", hf(
        T.VideoMAEForVideoClassification, T.VideoMAEConfig,
        inputs="pixel_values", image_size=16, patch_size=4, num_frames=4,
        tubelet_size=2, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        num_labels=CLASSES), classified(4, 3, 16, 16), ["VideoMAELayer"],
        key_bias_noise),
    # Divided space-time attention.
    "timesformer": Arch("video", hf(
        T.TimesformerForVideoClassification, T.TimesformerConfig,
        inputs="pixel_values", image_size=16, patch_size=4, num_frames=2,
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=CLASSES), classified(2, 3, 16, 16), ["TimesformerLayer"],
        fused_key_bias("qkv.bias", thirds)),
    # Time-series forecasting: patches of each channel, an MSE on the
    # forecast.
    "patchtst": Arch("time series", lambda: DenseLoss(
        T.PatchTSTForPrediction(T.PatchTSTConfig(
            num_input_channels=3, context_length=32, patch_length=8,
            patch_stride=8, prediction_length=8, d_model=16,
            num_attention_heads=2, num_hidden_layers=2, ffn_dim=32,
            dropout=0.0, attention_dropout=0.0, ff_dropout=0.0,
            positional_dropout=0.0, path_dropout=0.0, head_dropout=0.0)),
        output="prediction_outputs", inputs="past_values"),
        dense_data((32, 3), (8, 3)), ["PatchTSTEncoderLayer"]),
    "tv_r3d": Arch("video", tv_video_resnet("Conv3DSimple", "BasicStem"),
                   clips(4, 32), ["BasicBlock"]),
    # (2+1)D: each 3x3x3 factorised into (1, 3, 3) then (3, 1, 1).
    "tv_r2plus1d": Arch("video", tv_video_resnet("Conv2Plus1D",
                                                 "R2Plus1dStem"),
                        clips(4, 32), ["BasicBlock"]),
    # Audio
    "whisper": Arch("audio", lambda: HFLoss(T.WhisperForConditionalGeneration(
        T.WhisperConfig(vocab_size=VOCAB, num_mel_bins=8, d_model=32,
                        encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=4, decoder_attention_heads=4,
                        encoder_ffn_dim=64, decoder_ffn_dim=64,
                        max_source_positions=8, max_target_positions=SEQ,
                        dropout=0.0, attention_dropout=0.0,
                        activation_dropout=0.0, use_cache=False,
                        pad_token_id=0, bos_token_id=0, eos_token_id=0,
                        decoder_start_token_id=0, suppress_tokens=None,
                        begin_suppress_tokens=None)),
        ("input_features", "decoder_input_ids")), whisper_data,
        ["WhisperEncoderLayer", "WhisperDecoderLayer"]),
    "wav2vec2": Arch("audio", lambda: HFLoss(T.Wav2Vec2ForSequenceClassification(
        T.Wav2Vec2Config(**SPEECH)), "input_values"), waveform(400),
        ["Wav2Vec2EncoderLayer"]),
    "hubert": Arch("audio", lambda: HFLoss(T.HubertForSequenceClassification(
        T.HubertConfig(**SPEECH)), "input_values"), waveform(400),
        ["HubertEncoderLayer"], key_bias_noise),
    # DeBERTa-v2's disentangled attention over wav2vec 2.0's features, the
    # sequence squeezed 2x through the layers: the query and key
    # projections run on the hidden states and on the relative position
    # embeddings, one forward for each shape.
    "sew_d": Arch("audio", lambda: HFLoss(T.SEWDForSequenceClassification(
        T.SEWDConfig(**SPEECH, squeeze_factor=2, max_position_embeddings=64,
                     position_buckets=16)), "input_values"), waveform(400),
        ["SEWDLayer"], key_bias_noise),
    # Gated relative position bias, shared from the first layer.
    "wavlm": Arch("audio", lambda: HFLoss(T.WavLMForSequenceClassification(
        T.WavLMConfig(**SPEECH, num_buckets=16, max_bucket_distance=32)),
        "input_values"), waveform(400), ["WavLMEncoderLayer"],
        key_bias_noise),
    "data2vec_audio": Arch("audio", lambda: HFLoss(
        T.Data2VecAudioForSequenceClassification(T.Data2VecAudioConfig(
            **{**SPEECH, "num_conv_pos_embeddings": 2},
            conv_pos_kernel_size=5)),
        "input_values"), waveform(400), ["Data2VecAudioEncoderLayer"],
        key_bias_noise),
    "unispeech_sat": Arch("audio", lambda: HFLoss(
        T.UniSpeechSatForSequenceClassification(T.UniSpeechSatConfig(**SPEECH)),
        "input_values"), waveform(400), ["UniSpeechSatEncoderLayer"],
        key_bias_noise),
    "ast": Arch("audio", lambda: HFLoss(T.ASTForAudioClassification(
        T.ASTConfig(hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64,
                    patch_size=4, frequency_stride=4, time_stride=4,
                    max_length=16, num_mel_bins=16, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, num_labels=CLASSES)),
        "input_values"), audio_frames(16, 16), ["ASTLayer"], key_bias_noise),
    # Conv1d subsampling; sinusoidal positions from run-time ids, detached.
    "speech2text": Arch("audio", lambda: HFLoss(
        T.Speech2TextForConditionalGeneration(T.Speech2TextConfig(
            vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=64,
            max_target_positions=SEQ, input_feat_per_channel=8,
            conv_channels=16, dropout=0.0, attention_dropout=0.0,
            activation_dropout=0.0, use_cache=False, pad_token_id=1,
            bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)),
        ("input_features", "decoder_input_ids")), speech_data,
        ["Speech2TextEncoderLayer", "Speech2TextDecoderLayer"],
        key_bias_noise),
}


@dataclass
class Outcome:
    name: str
    family: str
    status: str  # "matches", "chaotic", "differs", "stops", "fails"
    loss_diff: float | None = None
    detail: str = ""
    seconds: float = 0.0


def constructs(message: str) -> str:
    """The importer's one report, shortened to its distinct constructs in
    order ("module 'm.conv1': conv2d other than ... (kernel ...)" ->
    "conv2d other than ...")."""
    seen: list[str] = []
    for line in message.splitlines():
        m = re.match(r"\s*module '[^']*': (?:unsupported op )?(.*)", line)
        if m:
            what = re.sub(r" \(.*\)$", "", m.group(1)).strip()
            if what not in seen:
                seen.append(what)
    return ", ".join(seen) if seen else message.strip().splitlines()[0]


def _flipped(flipped: bool) -> str:
    return (" once one ReLU input within f32 noise of zero is taken the "
            "other way in float64" if flipped else "")


def run_arch(name: str, workdir: Path | None = None, runner=None) -> Outcome:
    """`runner`: (fsdprt-run binary, backend), as train_imported takes it
    (default: the CPU backend)."""
    arch, start = ARCHS[name], time.time()

    def outcome(status, diff=None, detail=""):
        return Outcome(name, arch.family, status, diff, detail,
                       time.time() - start)

    torch.manual_seed(0)
    module = arch.factory()
    data = arch.data(np.random.default_rng(3))
    try:
        example = [torch.from_numpy(d[:PER_RANK]) for d in data]
        model = from_torch(module, example, name=name)
    except UnsupportedModelError as e:
        return outcome("stops", detail=constructs(str(e)))
    except Exception as e:  # torch.export itself, or an importer bug
        return outcome("fails", detail=f"import: {type(e).__name__}: "
                       f"{str(e).splitlines()[0][:140] if str(e) else ''}")
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        try:
            got, saved = train_imported(Path(tmp), module, model, data,
                                        RANKS, OPTIMIZER, runner=runner,
                                        wrap_kinds=arch.kinds)
        except Exception as e:
            return outcome("fails", detail=f"compile/run: {type(e).__name__}: "
                           f"{str(e).strip().splitlines()[-1][:140] if str(e) else ''}")
    exact = float64_copy(module)  # before torch trains `module`
    want = torch_losses(module, data, RANKS, OPTIMIZER)
    diff = max(abs(a - b) for a, b in zip(got, want))
    if len(got) != STEPS or diff > LOSS_ATOL:
        # Some models are chaotic in f32 (BatchNorm over a few values per
        # channel, AdamW turning gradient noise into whole steps): torch's
        # own f32 run then drifts from its f64 run by far more than 1e-5,
        # and the 1e-5 comparison cannot tell a bug from rounding. Then
        # the first loss (the forward of the same weights) must be within
        # twice torch's own f32 error on it, and our first gradients about
        # as exact as torch's f32 ones against float64
        # (first_step_gradients).
        exact_losses = torch_losses(exact, as_f64(data), RANKS, OPTIMIZER)
        drift = max(abs(a - b) for a, b in zip(want, exact_losses))
        first = max(LOSS_ATOL, 2 * abs(want[0] - exact_losses[0]))
        if (len(got) == STEPS and abs(got[0] - want[0]) <= first
                and drift > LOSS_ATOL):
            ratio, flipped = first_step_gradients(arch, name, workdir)
            if ratio <= 1:
                return outcome("chaotic", diff,
                               f"torch's own f32 run drifts {drift:.1e} from "
                               "its f64 run; our first-step gradients are "
                               "about as exact as torch's f32 ones"
                               + _flipped(flipped))
        return outcome("differs", diff, f"losses {got} vs torch {want} "
                       f"(torch f32 vs f64: {drift:.1e})")
    try:
        assert_state_matches(
            saved, {n: p.detach().numpy()
                    for n, p in module.named_parameters()},
            adamw_lr=ADAMW_LR, noise_mask=arch.noise)
    except AssertionError as e:
        # The losses match but AdamW has moved some weights apart: it
        # normalises each gradient, so elements whose gradient is near
        # zero take lr-sized steps whose sign is rounding noise. Chaotic
        # when our first gradients are about as exact as torch's.
        ratio, flipped = first_step_gradients(arch, name, workdir)
        if ratio <= 1:
            return outcome("chaotic", diff,
                           "losses match; AdamW weights beyond the bound, "
                           "our first-step gradients about as exact as "
                           "torch's f32 ones" + _flipped(flipped))
        return outcome("differs", diff,
                       "weights: " + str(e).splitlines()[0][:140])
    return outcome("matches", diff)


def safe_run(name: str) -> Outcome:
    try:
        return run_arch(name)
    except Exception as e:
        return Outcome(name, ARCHS[name].family, "fails",
                       detail=f"{type(e).__name__}: {e}"[:160] + "\n" +
                       traceback.format_exc()[-400:])


def markdown(outcomes: list[Outcome]) -> str:
    rows = ["| model | family | status | max \\|loss − torch\\| | what stops it |",
            "|---|---|---|---|---|"]
    for o in outcomes:
        diff = "" if o.loss_diff is None else f"{o.loss_diff:.1e}"
        detail = o.detail.splitlines()[0].replace("|", "\\|") if o.detail else ""
        rows.append(f"| {o.name} | {o.family} | {o.status} | {diff} | "
                    f"{detail if o.status != 'matches' else ''} |")
    n = sum(o.status == "matches" for o in outcomes)
    chaotic = sum(o.status == "chaotic" for o in outcomes)
    rows.append("")
    rows.append(f"{n} of {len(outcomes)} match torch"
                + (f"; {chaotic} more are chaotic in f32, their first "
                   "gradients about as exact as torch's" if chaotic else "")
                + ".")
    return "\n".join(rows) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated names (default: all)")
    p.add_argument("--markdown", help="write the table to this file")
    p.add_argument("--jobs", type=int, default=1,
                   help="models run side by side (each uses 2 ranks)")
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else list(ARCHS)
    unknown = [n for n in names if n not in ARCHS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; known: {', '.join(ARCHS)}")
    with ProcessPoolExecutor(args.jobs) as pool:
        outcomes = []
        for o in pool.map(safe_run, names):
            print(f"{o.name:20} {o.family:16} {o.status:8} "
                  f"{'' if o.loss_diff is None else f'{o.loss_diff:.1e}':8} "
                  f"{o.seconds:5.0f}s {o.detail.splitlines()[0] if o.detail else ''}",
                  flush=True)
            outcomes.append(o)
    table = markdown(outcomes)
    if args.markdown:
        Path(args.markdown).write_text(table)
    print(table.splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
