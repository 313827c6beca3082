"""fsdp_mlir.from_torch on Hugging Face `transformers` models: GPT2LMHeadModel,
LlamaForCausalLM (also with grouped k/v heads), GPTJForCausalLM,
Phi3ForCausalLM, BertForMaskedLM (also with a padding attention_mask),
RobertaForMaskedLM, T5ForConditionalGeneration,
ViTForImageClassification, GPT-2's and Llama's ForSequenceClassification
(padded rows) and BertForQuestionAnswering from tiny configs
with random weights, wrapped so that forward(*inputs, labels) returns the
model's own loss. Each is imported, compiled for 1 and 2 ranks (full-shard,
its blocks wrapped as units), trained STEPS steps from the module's own
weights (save_weights → fsdp-run --load) and compared with plain torch on
the same batches: losses within 1e-5, weights at the parity suite's bounds.

What the import has to get right for them: HF's attention masks and
rotary tables are computed from constants (folded at import: the causal
mask becomes nn.attention {causal}, BERT's all-true one no mask), GPT-2's
Conv1D is addmm, Llama's RMSNorm and rotate_half are decomposed element-wise
ops, the causal-LM loss pads and slices the labels, and both GPT-2 and BERT
tie their output projection to the word embeddings (read by a module
outside the embedding's subtree).

Run: PATH=build/bin:$PATH PYTHONPATH=python:python/tests \
    python3 -m pytest -q python/tests/test_hf_import.py
"""
from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
F = pytest.importorskip("torch.nn.functional")
transformers = pytest.importorskip("transformers")
np = pytest.importorskip("numpy")

from fsdp_mlir import driver, from_torch  # noqa: E402
from fsdp_mlir.torch_import import HFLoss  # noqa: E402
from test_torch_import import (NUM_SAMPLES, OPTIMIZERS,  # noqa: E402
                               PER_RANK, emulated_cuda, torch_losses,
                               train_imported)
from test_torch_oracle import (STEPS, _noise_only,  # noqa: E402
                               assert_state_matches)

LOSS_ATOL = 1e-5
VOCAB, SEQ = 64, 16
CLASSES = 5  # ViT's labels


def gpt2(vocab=VOCAB):
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=vocab, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
        activation_function="gelu_pytorch_tanh", resid_pdrop=0,
        embd_pdrop=0, attn_pdrop=0, use_cache=False,
        attn_implementation="sdpa"))


def gpt2_classifier():
    """GPT2ForSequenceClassification: the logits of each row's last
    non-padding token, the argmax of arange × (ids != pad) computed from
    the ids, picked by logits[arange(B), last] (advanced indexing by a
    run-time index beside a constant one)."""
    return transformers.GPT2ForSequenceClassification(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
        activation_function="gelu_pytorch_tanh", resid_pdrop=0,
        embd_pdrop=0, attn_pdrop=0, use_cache=False, num_labels=CLASSES,
        pad_token_id=0, attn_implementation="sdpa"))


def llama_classifier():
    return transformers.LlamaForSequenceClassification(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=SEQ, use_cache=False, num_labels=CLASSES,
        pad_token_id=0, attn_implementation="sdpa"))


def bert_question_answering():
    """BertForQuestionAnswering: start and end logits, their targets
    clamped to [0, SEQ] and SEQ ignored (a span outside the window)."""
    return transformers.BertForQuestionAnswering(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ, hidden_dropout_prob=0,
        attention_probs_dropout_prob=0, num_labels=2,
        attn_implementation="sdpa"))


def llama(kv_heads=4):
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=kv_heads, max_position_embeddings=SEQ,
        use_cache=False, attn_implementation="sdpa"))


def gptj():
    """GPT-J: rotary on the first rotary_dim = 4 of each head's 8 features,
    rotating interleaved pairs (x[..., ::2], x[..., 1::2]: strided slices),
    the rest passed through; parallel attention and MLP."""
    return transformers.GPTJForCausalLM(transformers.GPTJConfig(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
        rotary_dim=4, n_inner=64, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
        use_cache=False, bos_token_id=0, eos_token_id=0))


def phi3():
    """Phi-3: fused qkv and gate_up projections split at run time, and
    rotary over the whole head, so the pass-through part
    q[..., rotary_dim:] is a slice to an empty tensor (an empty constant
    that torch.cat skips)."""
    return transformers.Phi3ForCausalLM(transformers.Phi3Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=SEQ, original_max_position_embeddings=SEQ,
        resid_pdrop=0, embd_pdrop=0, attention_dropout=0, use_cache=False,
        pad_token_id=0, bos_token_id=0, eos_token_id=0,
        attn_implementation="sdpa"))


def bert():
    return transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ, hidden_dropout_prob=0,
        attention_probs_dropout_prob=0, attn_implementation="sdpa"))


def yoso():
    """YOSO in its expectation mode (transformers' default): attention as
    the collision probability of q and k's random hashes, (1 - acos(q·k) /
    π)^9, through transformers' YosoCumulation, whose hand-written
    backward is an approximation (hash_code_len / 2 · exp where the
    derivative has the acos's), not the forward's derivative."""
    return transformers.YosoForMaskedLM(transformers.YosoConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ + 2, hidden_dropout_prob=0,
        attention_probs_dropout_prob=0))


def roberta():
    """RoBERTa: position ids computed at run time from the input ids
    (transformers' create_position_ids_from_input_ids: the padding mask
    ne(1).int(), its cumsum, times the mask, .long() + padding_idx) and
    looked up in a position table whose padding_idx row gets no gradient."""
    return transformers.RobertaForMaskedLM(transformers.RobertaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=SEQ + 2, hidden_dropout_prob=0,
        attention_probs_dropout_prob=0, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, attn_implementation="sdpa"))


def roberta_data(rng):
    """masked_lm_data with RoBERTa's padding id 1 at the end of each row
    (after 8 to SEQ tokens) and once inside some rows: the position ids
    stop counting there, differently in every row."""
    ids, labels = masked_lm_data(rng)
    ids = np.where(ids == 1, 3, ids)
    lengths = rng.integers(8, SEQ + 1, NUM_SAMPLES)
    ids[np.arange(SEQ)[None, :] >= lengths[:, None]] = 1
    ids[::3, 4] = 1
    return [ids, np.where(ids == 1, -100, labels)]


def t5():
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
        num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
        relative_attention_max_distance=SEQ, dropout_rate=0.0,
        feed_forward_proj="relu", use_cache=False, pad_token_id=0,
        decoder_start_token_id=0))


def vit():
    return transformers.ViTForImageClassification(transformers.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        num_labels=CLASSES, hidden_dropout_prob=0,
        attention_probs_dropout_prob=0, attn_implementation="sdpa"))


def image_data(rng):
    """Images [N, 3, 16, 16] and one class label each."""
    pixels = rng.standard_normal((NUM_SAMPLES, 3, 16, 16)).astype(np.float32)
    return [pixels, rng.integers(0, CLASSES, (NUM_SAMPLES,), np.int64)]


def causal_lm_data(rng):
    """Token ids, labels = ids (the model shifts them)."""
    ids = rng.integers(0, VOCAB, (NUM_SAMPLES, SEQ), np.int64)
    return [ids, ids.copy()]


def padded_rows_data(rng):
    """Ids padded with 0 after each row's length (4 to SEQ tokens), one
    class label per row."""
    ids = rng.integers(1, VOCAB, (NUM_SAMPLES, SEQ), np.int64)
    lengths = rng.integers(4, SEQ + 1, NUM_SAMPLES)
    ids = np.where(np.arange(SEQ)[None, :] < lengths[:, None], ids, 0)
    return [ids, rng.integers(0, CLASSES, (NUM_SAMPLES,), np.int64)]


def span_data(rng):
    """Ids and each row's answer span (start, end); some past the window:
    clamped to SEQ, which the loss ignores."""
    ids = rng.integers(1, VOCAB, (NUM_SAMPLES, SEQ), np.int64)
    start = rng.integers(0, SEQ + 3, NUM_SAMPLES)
    start[::PER_RANK] = 0  # every rank's batch has a start counted
    return [ids, start, np.minimum(start + rng.integers(0, 4, NUM_SAMPLES),
                                   SEQ + 3)]


def masked_lm_data(rng):
    """Ids including 0, BERT's padding_idx (its row gets no gradient);
    labels -100 but on ~15% of the positions, where they are the ids."""
    ids = rng.integers(0, VOCAB, (NUM_SAMPLES, SEQ), np.int64)
    chosen = rng.random((NUM_SAMPLES, SEQ)) < 0.15
    chosen[:, 0] = True  # every rank's batch has targets
    return [ids, np.where(chosen, ids, -100).astype(np.int64)]


def padded_masked_lm_data(rng):
    """masked_lm_data with each row padded after a random length (8 to
    SEQ tokens): the attention_mask marks the padding, which no query
    attends to and no label targets."""
    ids, labels = masked_lm_data(rng)
    lengths = rng.integers(8, SEQ + 1, NUM_SAMPLES)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int64)
    ids = np.where(mask == 1, ids, 0)
    return [ids, mask, np.where(mask == 1, labels, -100)]


def seq2seq_data(rng):
    """Source ids, the decoder's inputs (the labels shifted right after
    decoder_start_token_id 0, as T5's _shift_right makes them) and labels
    of half the source's length."""
    ids = rng.integers(1, VOCAB, (NUM_SAMPLES, SEQ), np.int64)
    labels = rng.integers(1, VOCAB, (NUM_SAMPLES, SEQ // 2), np.int64)
    decoder = np.concatenate(
        [np.zeros((NUM_SAMPLES, 1), np.int64), labels[:, :-1]], axis=1)
    return [ids, decoder, labels]


def key_bias_noise(key, shape):
    """An attention key bias has a zero gradient in exact arithmetic
    (softmax is shift-invariant per query)."""
    return np.full(shape, key.endswith(("key.bias", "k_proj.bias")))


def span_noise(key, shape):
    """key_bias_noise, and what adds one constant to all of a row's start
    (or end) logits, which their softmax over the positions cancels: the
    last LayerNorm's bias and qa_outputs' bias."""
    return key_bias_noise(key, shape) | np.full(shape, key.endswith((
        "layer.1.output.LayerNorm.bias", "qa_outputs.bias")))


# name: (factory, data, wrapped kind, noise mask of the AdamW weight check,
# the HF model's input keyword)
MODELS = {
    "gpt2": (gpt2, causal_lm_data, "GPT2Block",
             lambda key, shape: _noise_only("gpt2", key, shape), "input_ids"),
    # A vocabulary fsdp-pad-vocab pads (4099 -> 4160 columns): HF's lm_head
    # is a child module, so the padded logits cross its call.
    "gpt2-vocab": (lambda: gpt2(vocab=4099), causal_lm_data, "GPT2Block",
                   lambda key, shape: _noise_only("gpt2", key, shape),
                   "input_ids"),
    "llama": (llama, causal_lm_data, "LlamaDecoderLayer", None, "input_ids"),
    "llama-gqa": (lambda: llama(kv_heads=2), causal_lm_data,
                  "LlamaDecoderLayer", None, "input_ids"),
    "gptj": (gptj, causal_lm_data, "GPTJBlock", None, "input_ids"),
    "phi3": (phi3, causal_lm_data, "Phi3DecoderLayer", None, "input_ids"),
    "bert": (bert, masked_lm_data, "BertLayer", key_bias_noise, "input_ids"),
    "yoso": (yoso, masked_lm_data, "YosoLayer", None, "input_ids"),
    "roberta": (roberta, roberta_data, "RobertaLayer", key_bias_noise,
                "input_ids"),
    # attention_mask given at run time: padding masked in every layer's
    # attention (PyTorch's math SDPA with the additive mask).
    "bert-padded": (bert, padded_masked_lm_data, "BertLayer", key_bias_noise,
                    ("input_ids", "attention_mask")),
    # Encoder-decoder: each block's attention adds the relative-position
    # bias (a learned table, gathered by constant bucket ids) to its scores
    # without scaling; the first block returns it to the others beside its
    # output (a module with two results).
    "t5": (t5, seq2seq_data, "T5Block", None,
           ("input_ids", "decoder_input_ids")),
    # The patch embedding is a conv2d whose stride is its kernel: imported
    # as patches + linear; the class token is a select.
    "vit": (vit, image_data, "ViTLayer", key_bias_noise, "pixel_values"),
    # Sequence classification: the last non-padding token's logits.
    "gpt2-classifier": (gpt2_classifier, padded_rows_data, "GPT2Block",
                        lambda key, shape: _noise_only("gpt2", key, shape),
                        "input_ids"),
    "llama-classifier": (llama_classifier, padded_rows_data,
                         "LlamaDecoderLayer", None, "input_ids"),
    "bert-qa": (bert_question_answering, span_data, "BertLayer", span_noise,
                ("input_ids", "start_positions", "end_positions")),
}

CASES = [("gpt2", 1, "adamw"), ("gpt2", 2, "adamw"), ("gpt2", 2, "sgd"),
         ("gpt2-vocab", 2, "adamw"),
         ("llama", 1, "adamw"), ("llama", 2, "adamw"),
         ("llama-gqa", 2, "adamw"),
         ("gptj", 1, "adamw"), ("gptj", 2, "adamw"),
         ("phi3", 1, "adamw"), ("phi3", 2, "adamw"),
         ("bert", 1, "adamw"), ("bert", 2, "adamw"),
         ("yoso", 1, "adamw"), ("yoso", 2, "sgd"),
         ("roberta", 1, "adamw"), ("roberta", 2, "adamw"),
         ("roberta", 2, "sgd"),
         ("bert-padded", 1, "adamw"), ("bert-padded", 2, "sgd"),
         ("t5", 1, "adamw"), ("t5", 2, "adamw"), ("t5", 2, "sgd"),
         ("vit", 1, "adamw"), ("vit", 2, "adamw"),
         ("gpt2-classifier", 1, "adamw"), ("gpt2-classifier", 2, "sgd"),
         ("llama-classifier", 2, "adamw"),
         ("bert-qa", 1, "adamw"), ("bert-qa", 2, "adamw")]


def import_model(module, data, name):
    example = [torch.from_numpy(d[:PER_RANK]) for d in data]
    return from_torch(module, example, name=name.replace("-", "_"))


@pytest.mark.parametrize("name,ranks,optimizer", CASES)
def test_trains_like_torch(tmp_path, name, ranks, optimizer):
    _check_trains_like_torch(tmp_path, name, ranks, optimizer)


@pytest.mark.parametrize("name", ["bert-padded", "t5", "gptj", "roberta"])
def test_cuda_backend_trains_like_torch(tmp_path, name):
    """Attention with an additive bias (BERT's padding mask, T5's relative
    positions) through the CUDA backend's per-head attention, GPT-J's
    strided slices and their scatter, RoBERTa's integer casts, cumsum and
    arithmetic, on the tests' host emulation of the backend
    (fsdprt-run-cuda-emu)."""
    _check_trains_like_torch(tmp_path, name, 1, "adamw",
                             runner=emulated_cuda())


def _check_trains_like_torch(tmp_path, name, ranks, optimizer, runner=None):
    torch.manual_seed(0)
    factory, make_data, kind, noise, inputs = MODELS[name]
    module = HFLoss(factory(), inputs)
    data = make_data(np.random.default_rng(3))
    model = import_model(module, data, name)
    got, saved = train_imported(tmp_path, module, model, data, ranks,
                                optimizer, runner=runner, wrap_kinds=[kind])
    want = torch_losses(module, data, ranks, optimizer)
    assert len(got) == STEPS
    worst = max(abs(a - b) for a, b in zip(got, want))
    print(f"{name} x{ranks} {optimizer}: max |loss diff| {worst:.3g}")
    assert worst <= LOSS_ATOL, (got, want)
    adamw = optimizer == "adamw"
    assert_state_matches(
        saved, {n: p.detach().numpy() for n, p in module.named_parameters()},
        adamw_lr=OPTIMIZERS["adamw"]["lr"] if adamw else None,
        noise_mask=noise)


def _imported(name):
    torch.manual_seed(0)
    factory, make_data, _, _, inputs = MODELS[name]
    module = HFLoss(factory(), inputs)
    return module, import_model(module, make_data(np.random.default_rng(3)),
                                name)


def test_lm_head_is_padded_across_its_call(tmp_path):
    """The step test_trains_like_torch trains for gpt2-vocab holds the
    padded logits and the losses told the vocabulary."""
    _, model = _imported("gpt2-vocab")
    step = driver.compile(model, tmp_path / "step.mlir", world_size=1,
                          optimizer="sgd", wrap_kinds=["GPT2Block"],
                          lower=False).read_text()
    assert "num_classes = 4099" in step and "x4160xf32>" in step
    assert "num_classes" not in driver.compile(
        model, tmp_path / "unpadded.mlir", world_size=1, optimizer="sgd",
        wrap_kinds=["GPT2Block"], lower=False, pad_vocab=0).read_text()


def test_constant_masks_fold_into_attention():
    """The HF mask, computed from aranges at import, is the causal one in
    GPT-2 and Llama (nn.attention {causal}) and all-true in BERT (no mask);
    no boolean tensor reaches the IR."""
    for name, causal in (("gpt2", True), ("llama-gqa", True),
                         ("bert", False)):
        text = _imported(name)[1].text()
        attention = [l for l in text.splitlines() if "nn.attention" in l]
        assert len(attention) == 2, name
        for line in attention:
            assert ("{causal," in line) == causal, line
        assert "xi1>" not in text and "tensor<i1>" not in text


def test_gpt2_tree_wraps_by_kind():
    """The HF module tree, names and classes kept: wrap-kinds=GPT2Block
    makes transformer.h.0 and .1 the units."""
    module, model = _imported("gpt2")
    text = model.text()
    nesting = [r'fsdp\.module @m kind "GPT2LMHeadModel"',
               r'fsdp\.module @transformer kind "GPT2Model"',
               r'fsdp\.module @h kind "ModuleList"',
               r'fsdp\.module @"0" kind "GPT2Block"',
               r'fsdp\.module @attn kind "GPT2Attention"',
               r'fsdp\.module @c_attn kind "Conv1D"']
    assert re.search(r"[\s\S]*".join(nesting), text), text[:2000]
    assert 'fsdp.module @"1" kind "GPT2Block"' in text
    assert dict(model.named_parameters()).keys() == \
        dict(module.named_parameters()).keys()
    report = driver.report(model, world_size=2, wrap_kinds=["GPT2Block"])
    units = {c["unit"] for c in report["collectives"]}
    assert {"m.transformer.h.0", "m.transformer.h.1"} <= units, units


def test_tied_weights_are_passed_down():
    """lm_head reads transformer.wte.weight (declared once, where
    named_parameters() names it): its forward takes it as an argument and
    the lowest module whose subtree declares it reads it. BERT's decoder
    gets both its tied weight and its tied bias (cls.predictions.bias) so."""
    text = _imported("gpt2")[1].text()
    assert re.search(r"fsdp\.module @lm_head kind \"Linear\" \{\s*"
                     r"fsdp\.forward \(%alias: tensor<4x16x32xf32>, "
                     r"%m\.transformer\.wte\.weight: tensor<64x32xf32>\)",
                     text), text
    assert "fsdp.get_param @transformer::@wte::@weight" in text
    assert text.count("fsdp.param @weight : tensor<64x32xf32>") == 1
    text = _imported("bert")[1].text()
    assert re.search(r"fsdp\.module @decoder kind \"Linear\" \{\s*"
                     r"fsdp\.forward \(%\w+: tensor<4x16x32xf32>, "
                     r"%m\.bert\.embeddings\.word_embeddings\.weight: "
                     r"tensor<64x32xf32>, %m\.cls\.predictions\.bias: "
                     r"tensor<64xf32>\)", text), text


def test_padding_idx_is_kept():
    """BERT's word embeddings keep padding_idx=0, whose row gets no
    gradient (the parity runs feed id 0)."""
    torch.manual_seed(0)
    ids = torch.ones(PER_RANK, SEQ, dtype=torch.long)
    text = from_torch(HFLoss(bert()), [ids, ids]).text()
    assert re.search(r"nn\.embedding %\S+, %\S+ \{padding_idx = 0 : i64\}",
                     text), text


class MaskedAttention(torch.nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, 8, 3, 2, 8).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, self.mask)
        return o.sum()


def test_attention_masks():
    """A constant causal mask (a non-persistent buffer) is nn.attention
    {causal}; any other (here a band) is its additive bias, folded into a
    constant: 0 where attended, -inf elsewhere (test_torch_import.Attended
    trains run-time masks and biases against torch)."""
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    text = from_torch(MaskedAttention(causal), [torch.zeros(2, 8, 16)]).text()
    assert "{causal, num_heads = 2 : i64}" in text
    banded = causal & ~torch.ones(8, 8, dtype=torch.bool).tril(-3)
    text = from_torch(MaskedAttention(banded), [torch.zeros(2, 8, 16)]).text()
    bias = re.search(r"nn\.attention %\S+, %\S+, %\S+ bias (%\S+) "
                     r"\{num_heads = 2 : i64\} : .*tensor<1x1x8x8xf32>\)", text)
    assert bias, text
    assert re.search(re.escape(bias.group(1)) +
                     r" = nn\.reshape %\S+ : tensor<8x8xf32>", text), text
    assert 'arith.constant dense<"0x00000000000080FF' in text  # 0, -inf
    assert "nn.softmax" not in text and "nn.keep" not in text


@pytest.mark.parametrize("layout", ["model.safetensors", "sharded index"])
def test_save_pretrained_loads_with_torchs_first_loss(tmp_path, layout):
    """`--load` of what Hugging Face's save_pretrained wrote (one file, or
    shards behind model.safetensors.index.json), found by name although the
    imported module wraps the model (`m.transformer...` reads
    `transformer...`): the first loss at 2 ranks is torch's on the same
    batch (1e-5: f32 summation order)."""
    from safetensors import numpy as st_numpy
    module, model = _imported("gpt2")
    data = causal_lm_data(np.random.default_rng(3))
    shard = "30KB" if layout == "sharded index" else "1GB"
    module.m.save_pretrained(tmp_path / "hf", safe_serialization=True,
                             max_shard_size=shard)
    has_index = (tmp_path / "hf" / "model.safetensors.index.json").exists()
    assert has_index == (layout == "sharded index")
    dataset = tmp_path / "data.safetensors"
    st_numpy.save_file({f"input.{i}": d for i, d in enumerate(data)},
                       str(dataset))
    prog = driver.compile(model, tmp_path / "step.mlir", world_size=2,
                          optimizer="adamw", **OPTIMIZERS["adamw"],
                          wrap_kinds=["GPT2Block"])
    got = driver.run(prog, nproc=2, steps=1, data=dataset,
                     load=tmp_path / "hf", timeout=180).metrics[0]["loss"]
    want = torch_losses(module, data, 2, "adamw")[0]
    assert abs(got - want) <= LOSS_ATOL, (got, want)


def test_pretrained_weights_of_another_model_are_one_error(tmp_path):
    """Llama's save_pretrained directory loaded into the GPT-2 program: one
    error naming what is missing and what is left over."""
    torch.manual_seed(0)
    llama().save_pretrained(tmp_path / "llama", safe_serialization=True)
    _, model = _imported("gpt2")
    prog = driver.compile(model, tmp_path / "step.mlir", world_size=1,
                          optimizer="adamw")
    with pytest.raises(driver.RunError) as e:
        driver.run(prog, nproc=1, steps=1, load=tmp_path / "llama",
                   timeout=180)
    message = str(e.value)
    assert "does not hold model 'gpt2': missing m.transformer.wte.weight" \
        in message, message
    unexpected = message[message.index("; unexpected "):]
    assert "model.embed_tokens.weight" in unexpected, message
    assert " more" in unexpected, message  # long lists are cut


def _checkpointed_gpt2():
    torch.manual_seed(0)
    model = gpt2()
    model.activation_checkpointing_enable()  # gradient_checkpointing_ before v5
    model.train()
    return HFLoss(model, "input_ids")


def _is_block(path, module):
    return type(module).__name__ == "GPT2Block"


def test_activation_checkpointing_enable_checkpoints_the_units(tmp_path):
    """transformers' activation_checkpointing_enable() on blocks that are
    FSDP units: they recompute their forward in the backward, as torch's
    checkpointed layers do (torch.export alone would trace through the
    checkpoint), and train as torch does."""
    module = _checkpointed_gpt2()
    data = causal_lm_data(np.random.default_rng(3))
    example = [torch.from_numpy(d[:PER_RANK]) for d in data]
    model = from_torch(module, example, name="gpt2_checkpointed",
                       auto_wrap_policy=_is_block)
    assert str(model).count("activation_checkpointing = true") == 2
    got, _ = train_imported(tmp_path, module, model, data, 2, "adamw")
    want = torch_losses(module, data, 2, "adamw")
    assert max(abs(a - b) for a, b in zip(got, want)) <= LOSS_ATOL, \
        (got, want)


def test_gradient_checkpointing_on_layers_that_are_not_units_warns():
    """Checkpointing applies to units: checkpointed layers that are not
    units are said, not silently left holding their activations."""
    module = _checkpointed_gpt2()
    data = causal_lm_data(np.random.default_rng(3))
    example = [torch.from_numpy(d[:PER_RANK]) for d in data]
    with pytest.warns(UserWarning, match=r"gradient checkpointing is enabled "
                      r"on 2 layers, but 2 of them \('m\.transformer\.h\.0', "
                      r"\.\.\.\) are no FSDP unit"):
        model = from_torch(module, example)
    assert "activation_checkpointing" not in str(model)
