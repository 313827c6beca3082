"""The model builders of fsdp_mlir.models against the real tools.

Every builder's IR must parse (fsdp-opt round trip), have the parameter and
unit counts PyTorch's formulas give, reproduce the examples it stands for,
and the small GPT-2 and Llama must compile for 2 ranks and train 3 steps
with fsdp-run. The tools are found as the driver finds them (FSDP_OPT /
FSDP_RUN, else <repo>/build/bin, else PATH); the tests skip without them.
"""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = PYTHON_DIR.parent
EXAMPLES = REPO_ROOT / "examples"
sys.path.insert(0, str(PYTHON_DIR))

from fsdp_mlir import driver  # noqa: E402
from fsdp_mlir.ir import Init, Model, Module, tensor  # noqa: E402
from fsdp_mlir.models import PRESETS, build  # noqa: E402
from fsdp_mlir.models.__main__ import main as cli_main  # noqa: E402


def _tool(name):
    try:
        return driver.find_tool(name)
    except driver.ToolNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def fsdp_opt():
    return _tool("fsdp-opt")


@pytest.fixture(scope="session")
def fsdp_run():
    return _tool("fsdp-run")


def opt(tool, text, *args):
    r = subprocess.run([str(tool), "-", *args], input=text,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def summary(tool, text, *pipeline):
    """(parameters, units) from --fsdp-model-summary."""
    out = opt(tool, text, *pipeline, "--fsdp-model-summary", "-o", "/dev/null")
    m = re.search(r"model \S+: (\d+) parameters .* (\d+) FSDP units", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


# PyTorch's counts, by hand from the hyper-parameters.
def linear_params(din, dout, bias=True):
    return din * dout + (dout if bias else 0)


def gpt2_count(V, T, C, L):
    # wte + wpe + L x (ln_1, c_attn, c_proj, ln_2, c_fc, c_proj) + ln_f;
    # lm_head is tied to wte.
    block = (2 * C + linear_params(C, 3 * C) + linear_params(C, C) + 2 * C
             + linear_params(C, 4 * C) + linear_params(4 * C, C))
    assert block == 12 * C * C + 13 * C
    return V * C + T * C + L * block + 2 * C


def llama_count(V, C, H, KV, L, F):
    hd = C // H
    attn = (linear_params(C, H * hd, False) + 2 * linear_params(C, KV * hd, False)
            + linear_params(H * hd, C, False))
    mlp = 2 * linear_params(C, F, False) + linear_params(F, C, False)
    return V * C + L * (attn + mlp + 2 * C) + C + V * C  # untied lm_head


def transformer_count(V, d, enc, dec, ffn, bn_channels):
    # TransformerWithSharedParams: embed_tokens (output_proj.weight is tied
    # to it) + output_proj.bias + nn.Transformer + BatchNorm1d.
    mha = linear_params(d, 3 * d) + linear_params(d, d)  # in_proj + out_proj
    ff = linear_params(d, ffn) + linear_params(ffn, d)
    enc_layer = mha + ff + 2 * 2 * d
    dec_layer = 2 * mha + ff + 3 * 2 * d
    return V * d + V + enc * enc_layer + dec * dec_layer + 2 * 2 * d \
        + 2 * bn_channels


NESTED = (linear_params(8, 4) + linear_params(4, 16) + linear_params(16, 16)
          + linear_params(16, 4) + linear_params(4, 8))
# MixtureOfExperts: Linear(8, 12), shared Linear(12, 23), expert
# Linear(23, 12), Linear(12, 8).
MOE = (linear_params(8, 12) + linear_params(12, 23) + linear_params(23, 12)
       + linear_params(12, 8))

GPT_SMALL = dict(vocab=64, ctx=16, width=32, heads=4, layers=2, batch=4)
LLAMA_SMALL = dict(vocab=96, ctx=16, width=32, heads=4, kv_heads=2, layers=2,
                   ffn=64, batch=4)

# name, builder kwargs, parameters, units
CASES = [
    ("mlp", {}, linear_params(16, 32) + linear_params(32, 32)
     + linear_params(32, 4), 1),
    ("mlp", dict(sizes=[5, 7, 3], batch=2),
     linear_params(5, 7) + linear_params(7, 3), 1),
    ("nested_wrapped", {}, NESTED, 4),
    ("always_wrap_nested_wrapped", {}, NESTED, 8),
    ("mixture_of_experts", {}, MOE, 3),
    ("gpt2", GPT_SMALL, gpt2_count(64, 16, 32, 2), 1),
    ("char_gpt", {}, gpt2_count(128, 64, 128, 4), 1),
    ("llama", LLAMA_SMALL, llama_count(96, 32, 4, 2, 2, 64), 1),
    ("llama", dict(LLAMA_SMALL, kv_heads=4), llama_count(96, 32, 4, 4, 2, 64), 1),
    ("llama_tiny", {}, llama_count(256, 64, 4, 2, 2, 172), 1),
    ("llama_char", {}, llama_count(128, 128, 4, 2, 4, 344), 1),
    # 4 layer units (ModuleWrapPolicy) + the root.
    ("transformer_with_shared_params", {}, transformer_count(23, 16, 2, 2, 8, 2),
     5),
    ("transformer_with_shared_params", dict(training=True),
     transformer_count(23, 16, 2, 2, 8, 2), 5),
    ("transformer_with_shared_params", dict(add_bn=False, encoder_layers=1),
     transformer_count(23, 16, 1, 2, 8, 0), 4),
]


@pytest.mark.parametrize("name,kwargs,params,units", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_builder_parses_and_counts(fsdp_opt, name, kwargs, params, units):
    model = build(name, **kwargs)
    text = model.text()
    # Round trip: fsdp-opt prints what it parsed, and parses that again.
    printed = opt(fsdp_opt, text)
    assert opt(fsdp_opt, printed) == printed
    assert summary(fsdp_opt, text) == (params, units)
    assert model.num_params() == params
    assert model.num_units() == units


def test_gpt2_124m_count(fsdp_opt):
    # GPT-2 small with the tied lm_head; summary only (no compile, it is big).
    assert gpt2_count(50257, 1024, 768, 12) == 124_439_808
    assert summary(fsdp_opt, build("gpt2_124m").text()) == (124_439_808, 1)


def test_transformer_with_shared_params_count(fsdp_opt):
    # The reference's count: 8427 unique parameters (the tied output
    # projection counted once), 4 encoder/decoder layer units + the root.
    assert transformer_count(23, 16, 2, 2, 8, 2) == 8427
    # The reference's per-module numbers: MultiheadAttention(16) 1088,
    # encoder layer 1432, decoder layer 2552, transformer 8032.
    assert transformer_count(23, 16, 1, 0, 8, 0) - \
        transformer_count(23, 16, 0, 0, 8, 0) == 1432
    assert transformer_count(23, 16, 0, 1, 8, 0) - \
        transformer_count(23, 16, 0, 0, 8, 0) == 2552
    assert transformer_count(23, 16, 2, 2, 8, 0) - 23 * 16 - 23 == 8032
    text = build("transformer_with_shared_params").text()
    assert summary(fsdp_opt, text) == (8427, 5)
    out = opt(fsdp_opt, text, "--fsdp-model-summary", "-o", "/dev/null")
    # vocab_bias (16) + long_buffer (16) + BatchNorm running statistics (2+2)
    # + num_batches_tracked (1, i64).
    assert "; 37 buffer elements (216 bytes);" in out, out


def test_transformer_with_shared_params_structure():
    names = {"eval": build("transformer_with_shared_params").text(),
             "train": build("transformer_with_shared_params",
                            training=True).text()}
    for text in names.values():
        for needle in ['fsdp.param @in_proj_weight : tensor<48x16xf32> init '
                       '<xavier_uniform(1.0)>',
                       "fsdp.param @in_proj_bias : tensor<48xf32> init <zeros>",
                       'kind "NonDynamicallyQuantizableLinear"',
                       "fsdp.buffer @long_buffer : tensor<16xi64> init <zeros>",
                       "fsdp.buffer @vocab_bias : tensor<16xf32> init <ones>",
                       "fsdp.buffer @running_var : tensor<2xf32> init <ones>",
                       "nn.cast %long_buffer : tensor<16xi64> to "
                       "tensor<16xf32>",
                       "{permutation = array<i64: 1, 0, 2>}",
                       "(tensor<4x2x16xf32>, tensor<2xf32>",
                       "reduction = #nn.reduction<sum>",
                       # cross-attention: q from rows [0, d), k/v [d, 3d)
                       "sizes = array<i64: 16, 32>",
                       "(tensor<2x4x16xf32>, tensor<2x6x16xf32>, "
                       "tensor<2x6x16xf32>) -> tensor<2x4x16xf32>"]:
            assert needle in text, needle
        assert "causal" not in text and "nn.dropout" not in text
        assert text.count('kind "TransformerEncoderLayer" unit') == 2
        assert text.count('kind "TransformerDecoderLayer" unit') == 2
        assert "fsdp.buffer @num_batches_tracked : tensor<i64>" in text
    assert "{training}" in names["train"] and "set_buffer" in names["train"]
    assert "fsdp.set_buffer @num_batches_tracked" in names["train"]
    assert "arith.addi" in names["train"] and "arith.addi" not in names["eval"]
    assert "{training}" not in names["eval"] and \
        "set_buffer" not in names["eval"]


def test_cli_boolean_options(tmp_path):
    out = tmp_path / "t.mlir"
    assert cli_main(["transformer_with_shared_params", "--add-bn", "false",
                     "--training", "true", "-o", str(out)]) == 0
    text = out.read_text()
    assert "@bn" not in text and "nn.batch_norm" not in text
    with pytest.raises(SystemExit):
        cli_main(["transformer_with_shared_params", "--training", "maybe"])


def _no_comments(text):
    return [l for l in text.splitlines() if not l.lstrip().startswith("//")]


@pytest.mark.parametrize("name,example", [
    ("mlp", "mlp"), ("nested_wrapped", "nested_wrapped"), ("gpt2", "gpt2"),
    ("char_gpt", "char_gpt")])
def test_reproduces_example(fsdp_opt, name, example):
    ref = (EXAMPLES / f"{example}.mlir").read_text()
    text = build(name).text()
    assert _no_comments(text) == _no_comments(ref)
    assert summary(fsdp_opt, text) == summary(fsdp_opt, ref)


def test_mlp_and_nested_match_example_counts(fsdp_opt):
    assert summary(fsdp_opt, build("mlp").text()) == (1732, 1)
    assert summary(fsdp_opt, build("nested_wrapped").text()) == (496, 4)


def test_llama_structure():
    text = build("llama", **LLAMA_SMALL).text()
    for needle in ['kind "LlamaForCausalLM"', "@gate_proj", "@up_proj",
                   "@down_proj", "nn.rms_norm", "nn.silu",
                   "nn.rope %q {num_heads = 4 : i64, theta = 10000.0 : f64}",
                   "num_kv_heads = 2 : i64", "fsdp.module @lm_head"]:
        assert needle in text, needle
    assert "@bias" not in text and "nn.layer_norm" not in text


def _train(fsdp_opt, fsdp_run, tmp_path, text, wrap_kind):
    src = tmp_path / "model.mlir"
    src.write_text(text)
    low = tmp_path / "lowered.mlir"
    pipe = ("--fsdp-pipeline=world-size=2 auto-wrap-policy=module-kind "
            f"wrap-kinds={wrap_kind} optimizer=adamw lower=true")
    r = subprocess.run([str(fsdp_opt), str(src), pipe, "-o", str(low)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    metrics = tmp_path / "m.jsonl"
    env = {k: v for k, v in os.environ.items()
           if k not in driver._LAUNCH_VARS}
    env.setdefault("FSDP_RUN_GRACE_SECONDS", "5")
    r = subprocess.run([str(fsdp_run), str(low), "--nproc", "2", "--steps",
                        "3", "--metrics", str(metrics), "--quiet"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    losses = [json.loads(l)["loss"] for l in metrics.read_text().splitlines()]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    return losses


def test_gpt2_small_trains(fsdp_opt, fsdp_run, tmp_path):
    text = build("gpt2", **GPT_SMALL).text()
    assert summary(fsdp_opt, text, "--fsdp-pipeline=world-size=2 "
                   "auto-wrap-policy=module-kind wrap-kinds=Block") == \
        (gpt2_count(64, 16, 32, 2), 3)
    losses = _train(fsdp_opt, fsdp_run, tmp_path, text, "Block")
    assert abs(losses[0] - math.log(64)) < 0.3


def test_llama_small_trains(fsdp_opt, fsdp_run, tmp_path):
    text = build("llama", **LLAMA_SMALL).text()
    assert summary(fsdp_opt, text, "--fsdp-pipeline=world-size=2 "
                   "auto-wrap-policy=module-kind wrap-kinds=LlamaDecoderLayer"
                   ) == (llama_count(96, 32, 4, 2, 2, 64), 3)
    losses = _train(fsdp_opt, fsdp_run, tmp_path, text, "LlamaDecoderLayer")
    assert abs(losses[0] - math.log(96)) < 0.3


def test_cli_writes_file(tmp_path, capsys):
    out = tmp_path / "llama.mlir"
    assert cli_main(["llama", "--layers", "1", "--vocab", "48", "-o",
                     str(out)]) == 0
    text = out.read_text()
    assert "fsdp.model @llama {" in text
    assert "// Generated by: python -m fsdp_mlir.models llama --layers 1 " \
           "--vocab 48\n" in text
    assert text.count('kind "LlamaDecoderLayer"') == 1
    assert cli_main(["--list"]) == 0
    listing = capsys.readouterr().out
    for name in list(PRESETS) + ["mlp", "always_wrap_nested_wrapped",
                                 "transformer_with_shared_params"]:
        assert name in listing


def test_cli_module_entry_point(tmp_path):
    out = tmp_path / "mlp.mlir"
    r = subprocess.run([sys.executable, "-m", "fsdp_mlir.models", "mlp",
                        "--sizes", "4", "8", "2", "-o", str(out)],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(PYTHON_DIR)))
    assert r.returncode == 0, r.stderr
    assert "tensor<8x4xf32>" in out.read_text()


def test_emitter_basics():
    root = Module("root", "Net")
    child = root.add(Module("0", "Linear"))
    w = child.param("weight", [3, 2], Init.kaiming_uniform(math.sqrt(5)))
    f = child.forward(tensor(5, 2))
    f.ret(f.linear(f.args[0], f.get_param(w)))
    f = root.forward(tensor(5, 2))
    y = f.call(child, f.args[0])
    f.ret(f.reduce_sum(y, [0, 1]))
    text = "\n".join(root.lines())
    assert 'fsdp.module @"0" kind "Linear" {' in text
    assert "%0 = fsdp.call @\"0\"(%x) : (tensor<5x2xf32>) -> tensor<5x3xf32>" \
        in text
    assert "nn.reduce_sum %0 {dims = array<i64: 0, 1>} : " \
        "(tensor<5x3xf32>) -> tensor<f32>" in text
    assert str(Init.normal(0, 1e-5)) == "normal(0.0, 1.0e-05)"
    f2 = Module("m", "M").forward(tensor(5, 4), tensor(3, 2))
    with pytest.raises(ValueError, match="linear"):
        f2.linear(*f2.args)  # 4 input features against a weight taking 2


def test_emitter_forward_per_signature(fsdp_opt):
    """A module called on two input shapes has a forward for each; a call
    picks the one taking its arguments' types, and fsdp-opt accepts the
    model; a second forward on the same types and a call no forward takes
    are refused."""
    root = Module("root", "Siamese")
    enc = root.add(Module("enc", "Linear"))
    w = enc.param("weight", [3, 2], Init.zeros)
    for rows in (4, 6):
        f = enc.forward(tensor(rows, 2))
        f.ret(f.linear(f.args[0], f.get_param(w)))
    with pytest.raises(ValueError, match="already has a forward taking"):
        enc.forward(tensor(4, 2))
    f = root.forward(tensor(4, 2), tensor(6, 2))
    q, d = f.call(enc, f.args[0]), f.call(enc, f.args[1])
    f.ret(f.mul(f.reduce_sum(q, [0, 1]), f.reduce_sum(d, [0, 1])))
    with pytest.raises(ValueError, match="no forward takes"):
        f.call(enc, f.args[0], f.args[1])
    text = "\n".join(root.lines())
    assert "fsdp.call @enc(%x0) : (tensor<4x2xf32>) -> tensor<4x3xf32>" in text
    assert "fsdp.call @enc(%x1) : (tensor<6x2xf32>) -> tensor<6x3xf32>" in text
    model = Model("siamese", root)
    r = subprocess.run([fsdp_opt], input=model.text(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("fsdp.forward") == 3


def test_mixture_of_experts(fsdp_opt, tmp_path):
    # PyTorch's count (108 + 299 + 288 + 104), one rank-local unit: the
    # expert module.2; module.1 an ordinary unit, the root the rest.
    assert MOE == 799
    text = build("mixture_of_experts").text()
    assert summary(fsdp_opt, text) == (799, 3)
    for t in (text, opt(fsdp_opt, text)):  # as emitted, as fsdp-opt prints it
        assert t.count("rank_local = true") == 1
        units = re.findall(r'fsdp\.module (@\S+) kind "(\w+)" unit(<[^>]*>)?',
                           t)
        assert units == [("@root", "MixtureOfExperts", ""),
                         ('@"1"', "Linear", ""),
                         ('@"2"', "Linear", "<rank_local = true>")]
    out = tmp_path / "moe.mlir"
    r = subprocess.run([sys.executable, "-m", "fsdp_mlir.models",
                        "mixture_of_experts", "-o", str(out)],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(PYTHON_DIR)))
    assert r.returncode == 0, r.stderr
    assert _no_comments(out.read_text()) == _no_comments(text)


def test_emitter_unit_options(fsdp_opt):
    def unit_line(**options):
        return Module("m", "Linear", **options).lines()[0]
    assert unit_line() == 'fsdp.module @m kind "Linear" {'
    assert unit_line(unit=True) == 'fsdp.module @m kind "Linear" unit {'
    assert unit_line(reshard_after_forward=False) == \
        'fsdp.module @m kind "Linear" unit<reshard_after_forward = false> {'
    assert unit_line(rank_local=True) == \
        'fsdp.module @m kind "Linear" unit<rank_local = true> {'
    assert unit_line(reshard_after_forward=True, rank_local=True) == \
        'fsdp.module @m kind "Linear" unit<reshard_after_forward = true, ' \
        'rank_local = true> {'
    m = Module("m", "Linear")
    m.rank_local = True
    with pytest.raises(ValueError, match="not a unit"):
        m.lines()
    # fsdp-opt reads the combination back.
    model = build("mixture_of_experts")
    expert = model.root["module"]["2"]
    expert.reshard_after_forward = False
    text = opt(fsdp_opt, model.text())
    assert "unit<reshard_after_forward = false, rank_local = true>" in text
