"""Generation with a KV cache (fsdp-run --generate on a decode step, the
gpt2 and llama builders' kv_cache=True) against Hugging Face's `generate`:
GPT2LMHeadModel and LlamaForCausalLM (grouped key/value heads) from tiny
configs with random weights, their weights loaded into our builders'
decode step at 2 ranks (full-shard, blocks as units), greedy tokens equal
token for token. GPT-2's eval program (the recompute path) draws the same
tokens. The runner's errors for a prompt longer than the compiled context
and for more new tokens than the cache holds come before any step runs.

Run: PATH=build/bin:$PATH PYTHONPATH=python:python/tests \
    python3 -m pytest -q python/tests/test_kv_cache.py
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from fsdp_mlir import driver  # noqa: E402
from fsdp_mlir.driver import REPO_ROOT  # noqa: E402
from fsdp_mlir.models import gpt2, llama  # noqa: E402

VOCAB, CTX, WIDTH, HEADS, LAYERS = 64, 16, 32, 4, 2
KV_HEADS = 2  # Llama: grouped-query attention
PROMPT = [5, 17, 3, 42]
NEW_TOKENS = CTX - len(PROMPT) + 1  # fills the cache: P + N - 1 = CTX
RANKS = 2
# Greedy decoding compares argmaxes: where HF's top two logits are closer
# than f32 rounding of a differently ordered computation (~1e-6 here) the
# comparison would test the rounding, not the model. Every step's gap must
# exceed this for the test to mean anything.
MIN_TOP2_GAP = 1e-4


def hf_gpt2():
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=CTX, n_embd=WIDTH, n_layer=LAYERS,
        n_head=HEADS, activation_function="gelu_pytorch_tanh",
        resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
        initializer_range=0.2)).eval()


def hf_llama():
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=WIDTH, intermediate_size=64,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS, max_position_embeddings=CTX,
        rms_norm_eps=1e-6, initializer_range=0.2)).eval()


def gpt2_weights(model):
    """nanoGPT's names and Linear layouts (HF's Conv1D is [in, out]); the
    lm_head is tied to wte."""
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
              "mlp.c_proj.weight")
    out = {}
    for name, p in model.named_parameters():
        if name == "lm_head.weight":
            continue
        t = p.detach()
        out[name] = (t.t() if name.endswith(conv1d) else t).contiguous()
    return out


def llama_weights(model):
    """HF's names; q/k rows from HF's rotate-half pairs (i, i + D/2) to
    nn.rope's interleaved pairs (2i, 2i + 1), per head."""
    hd = WIDTH // HEADS

    def interleave(w, heads):
        w = w.reshape(heads, 2, hd // 2, WIDTH)  # [h, half, i, in]
        return w.transpose(1, 2).reshape(heads * hd, WIDTH)

    out = {}
    for name, p in model.named_parameters():
        t = p.detach()
        if name.endswith("q_proj.weight"):
            t = interleave(t, HEADS)
        elif name.endswith("k_proj.weight"):
            t = interleave(t, KV_HEADS)
        out[name] = t.contiguous()
    return out


CASES = {
    "gpt2": (hf_gpt2, gpt2_weights, ["Block"],
             lambda **kw: gpt2(vocab=VOCAB, ctx=CTX, width=WIDTH, heads=HEADS,
                               layers=LAYERS, batch=1, **kw)),
    "llama": (hf_llama, llama_weights, ["LlamaDecoderLayer"],
              lambda **kw: llama(vocab=VOCAB, ctx=CTX, width=WIDTH,
                                 heads=HEADS, kv_heads=KV_HEADS,
                                 layers=LAYERS, ffn=64, batch=1, **kw)),
}


def hf_greedy(model, prompt, new_tokens):
    """HF generate: greedy, with its own KV cache; and the smallest gap
    between the top two logits over the steps. No end-of-sequence token:
    every step's argmax is kept, unfiltered."""
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), do_sample=False,
                             max_new_tokens=new_tokens, use_cache=True,
                             output_scores=True, return_dict_in_generate=True,
                             pad_token_id=0)
    gap = min(float((s[0].topk(2).values[0] - s[0].topk(2).values[1]))
              for s in out.scores)
    return out.sequences[0, len(prompt):].tolist(), gap


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    """(name, work dir, weights file, builder, wrap kinds, HF's tokens)."""
    name = request.param
    make_hf, weights, kinds, build = CASES[name]
    work = tmp_path_factory.mktemp(name)
    model = make_hf()
    path = work / "weights.safetensors"
    safetensors_torch.save_file(weights(model), str(path))
    tokens, gap = hf_greedy(model, PROMPT, NEW_TOKENS)
    assert gap > MIN_TOP2_GAP, f"{name}: near-tie in HF's logits ({gap})"
    return name, work, path, build, kinds, tokens


def generate(case, program, new_tokens=NEW_TOKENS, prompt=PROMPT):
    _, _, weights, _, _, _ = case
    return driver.run(program, nproc=RANKS, load=weights, seed=0,
                      generate=new_tokens, temperature=0,
                      prompt_ids=",".join(map(str, prompt)), quiet=False,
                      timeout=300)


def decode_step(case):
    name, work, _, build, kinds, _ = case
    path = work / "decode.mlir"
    if not path.exists():
        driver.compile(build(kv_cache=True), path, world_size=RANKS,
                       wrap_kinds=kinds, mode="eval")
    return path


def test_kv_cache_greedy_equals_hf_generate(case):
    name, _, _, _, _, want = case
    result = generate(case, decode_step(case))
    assert [row["tokens"] for row in result.metrics] == [want]
    # The report's cache line: k and v of each layer, [1, CTX, W] f32.
    width = WIDTH if name == "gpt2" else KV_HEADS * WIDTH // HEADS
    cache_bytes = 2 * LAYERS * CTX * width * 4
    assert (f"kv cache: {2 * LAYERS} tensors of [1, {CTX}, {width}] f32 "
            f"(keys and values, {CTX} positions), {cache_bytes} bytes per "
            "rank in the persistent buffer") in result.stdout


def _kept_whole(program):
    """Per unit: are its weights whole on every rank?"""
    return [u["shard_numel"] == u["padded_numel"]
            for u in driver.program_info(program)["units"]]


def test_units_kept_whole_draw_hf_tokens(case):
    """memory-budget's choice for the decode step (mode=eval) where every
    unit's whole weights fit: no collective per token, HF's greedy tokens
    from the same checkpoint."""
    name, work, _, build, kinds, want = case
    program = driver.compile(build(kv_cache=True), work / "whole.mlir",
                             world_size=RANKS, wrap_kinds=kinds, mode="eval",
                             memory_budget="1GiB")
    assert all(_kept_whole(program))
    result = generate(case, program)
    assert [row["tokens"] for row in result.metrics] == [want]
    assert "collectives per step: 0, 0 bytes" in result.stdout


def test_some_units_kept_whole_draw_the_gathered_tokens(tmp_path):
    """A budget just under the all-whole arena of a 4-Block GPT-2 decode
    step keeps some units whole beside units gathered at every token (a
    layout mixing whole and sharded flat parameters): from the same seeded
    weights, at 2 ranks, the greedy tokens of the step that gathers every
    unit."""
    model = gpt2(kv_cache=True, vocab=VOCAB, ctx=CTX, width=WIDTH,
                 heads=HEADS, layers=4, batch=1)

    def compiled(tag, **budget):
        return driver.compile(model, tmp_path / f"{tag}.mlir",
                              world_size=RANKS, wrap_kinds=["Block"],
                              mode="eval", **budget)

    every = compiled("whole", memory_budget="1GiB")
    below = driver.program_info(every)["arena_bytes"] - 1
    some = compiled("some", memory_budget=str(below))
    assert any(_kept_whole(some)) and not all(_kept_whole(some))
    tokens = []
    for program in (compiled("gathered"), some):
        tokens.append(driver.run(program, nproc=RANKS, seed=0, generate=8,
                                 temperature=0, prompt_ids="5,17",
                                 timeout=300).metrics[0]["tokens"])
    assert tokens[0] == tokens[1]


def test_recompute_path_draws_the_same_tokens(case):
    """The eval program (the whole window per token) as the reference the
    cache replaces: the same greedy tokens while the context fits."""
    name, work, _, build, kinds, want = case
    program = driver.compile(build(), work / "eval.mlir", world_size=RANKS,
                             wrap_kinds=kinds, mode="eval")
    result = generate(case, program)
    assert [row["tokens"] for row in result.metrics] == [want]
    assert "kv cache:" not in result.stdout


@pytest.mark.parametrize("prompt, new_tokens, message", [
    (list(range(CTX + 1)), 1,
     f"the prompt has {CTX + 1} tokens, more than the {CTX} positions of "
     "the compiled context (the KV cache's length)"),
    (PROMPT, NEW_TOKENS + 1,
     f"{len(PROMPT)} prompt tokens and {NEW_TOKENS + 1} new ones need "
     f"{CTX + 1} positions, but the KV cache holds {CTX}; at most "
     f"{NEW_TOKENS} new tokens fit"),
])
def test_cache_overflow_is_a_clear_error(case, prompt, new_tokens, message):
    with pytest.raises(driver.RunError) as e:
        generate(case, decode_step(case), new_tokens, prompt)
    assert message in e.value.stderr
    assert "sample 1/1" not in e.value.stdout


def test_a_program_breaking_the_decode_contract_is_an_error(tmp_path):
    """examples/gpt2.mlir's eval program with its [B, T, V] logits also
    returned as "cache.0": a decode step by its outputs, but with T = 16
    tokens per row. The launcher's report says why, before any rank runs."""
    text = (REPO_ROOT / "examples" / "gpt2.mlir").read_text()
    logits = "tensor<4x16x64xf32>"
    for old, new in (
            (f"-> (tensor<f32>, {logits}) {{",
             f"-> (tensor<f32>, {logits}, {logits}) {{"),
            (f'{{names = ["loss", "logits"]}} %loss, %logits : tensor<f32>, '
             f'{logits}',
             f'{{names = ["loss", "logits", "cache.0"]}} %loss, %logits, '
             f'%logits : tensor<f32>, {logits}, {logits}')):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    program = driver.compile(text, tmp_path / "broken.mlir", mode="eval")
    with pytest.raises(driver.RunError) as e:
        driver.run(program, nproc=1, generate=3, prompt_ids="1,2",
                   quiet=False, timeout=120)
    assert ("--generate: the decode step takes one token per row, not 16"
            in e.value.stderr)
