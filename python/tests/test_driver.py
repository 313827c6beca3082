"""Tests of fsdp_mlir.driver: compile with fsdp-opt, train with fsdp-run.

Runs the real tools (FSDP_OPT / FSDP_RUN, else build/bin, else PATH) on
examples/mlp.mlir and examples/gpt2.mlir; those tests skip when the tools are
missing. The option mapping is checked exactly through a fake fsdp-opt.
"""
import json
import math
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from fsdp_mlir import driver
from fsdp_mlir.driver import CompileError, RunError, ToolNotFoundError

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"


def _tools():
    try:
        driver.find_tool("fsdp-compile")
        return driver.find_tool("fsdp-opt"), driver.find_tool("fsdp-run")
    except ToolNotFoundError:
        return None


TOOLS = _tools()
needs_tools = pytest.mark.skipif(TOOLS is None,
                                 reason="fsdp-opt / fsdp-run / fsdp-compile "
                                        "not built")


# -- option -> pipeline string ------------------------------------------------
def test_pipeline_options_defaults():
    assert driver.pipeline_options() == \
        "world-size=1 sharding-strategy=full-shard optimizer=adamw lower=true"
    assert driver.pipeline_options(world_size=2, lower=False) == \
        "world-size=2 sharding-strategy=full-shard optimizer=adamw"


def test_pipeline_options_every_named_option():
    got = driver.pipeline_options(
        world_size=4, sharding_strategy="hybrid-shard", shard_group_size=2,
        auto_wrap_policy="module-kind", wrap_kinds=["Block", "MLP"],
        forward_prefetch=True, backward_prefetch="post", optimizer="sgd",
        lr=3e-4, momentum=0.9, clip_grad_norm=1.0, grad_accum_steps=2,
        param_dtype="bf16", limit_all_gathers=1, no_sync=True,
        reduce_dtype="f32")
    assert got == ("world-size=4 sharding-strategy=hybrid-shard "
                   "shard-group-size=2 auto-wrap-policy=module-kind "
                   "wrap-kinds=Block,MLP forward-prefetch=true "
                   "backward-prefetch=post optimizer=sgd lr=0.0003 "
                   "momentum=0.9 clip-grad-norm=1.0 grad-accum-steps=2 "
                   "param-dtype=bf16 limit-all-gathers=1 no-sync=true "
                   "reduce-dtype=f32 lower=true")


def test_pipeline_options_wrap_kinds_imply_module_kind_and_false_is_written():
    assert driver.pipeline_options(wrap_kinds="Block", forward_prefetch=False,
                                   min_params=None, report=False) == (
        "world-size=1 sharding-strategy=full-shard "
        "auto-wrap-policy=module-kind wrap-kinds=Block "
        "forward-prefetch=false optimizer=adamw report=false lower=true")
    with pytest.raises(ValueError):
        driver.pipeline_options(optimizer="adam w")


def test_compile_passes_the_pipeline_string(tmp_path, monkeypatch):
    """compile() runs `$FSDP_OPT - --fsdp-pipeline=<options> -o <output>`."""
    args_file = tmp_path / "args"
    fake = tmp_path / "fake-fsdp-opt"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$FAKE_ARGS"\n'
                    'cat > /dev/null\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FSDP_OPT", str(fake))
    monkeypatch.setenv("FAKE_ARGS", str(args_file))
    out = driver.compile("fsdp.model @m {\n}\n", tmp_path / "o" / "p.mlir",
                         world_size=2, wrap_kinds=["Block"], lr=2e-3,
                         clip_grad_norm=1.0, report=True)
    assert out == (tmp_path / "o" / "p.mlir").absolute()
    assert args_file.read_text().splitlines() == [
        "-",
        "--fsdp-pipeline=world-size=2 sharding-strategy=full-shard "
        "auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw "
        "lr=0.002 clip-grad-norm=1.0 report=true lower=true",
        "-o", str(out)]


# -- tool discovery -----------------------------------------------------------
def test_tool_env_var_must_name_an_executable(monkeypatch, tmp_path):
    monkeypatch.setenv("FSDP_OPT", str(tmp_path / "nope"))
    with pytest.raises(ToolNotFoundError, match="FSDP_OPT="):
        driver.find_tool("fsdp-opt")


def test_tool_not_found_anywhere(monkeypatch, tmp_path):
    monkeypatch.delenv("FSDP_RUN", raising=False)
    monkeypatch.setattr(driver, "REPO_ROOT", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolNotFoundError,
                       match="fsdp-run not found: set FSDP_RUN"):
        driver.find_tool("fsdp-run")


def test_tool_found_on_path(monkeypatch, tmp_path):
    tool = tmp_path / "fsdp-opt"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.delenv("FSDP_OPT", raising=False)
    monkeypatch.setattr(driver, "REPO_ROOT", tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert driver.find_tool("fsdp-opt") == tool


# -- the real tools -----------------------------------------------------------
def _losses(path):
    return [json.loads(l)["loss"] for l in Path(path).read_text().splitlines()
            if l.strip()]


@needs_tools
def test_compile_and_run_mlp_matches_fsdp_run(tmp_path):
    prog = driver.compile(EXAMPLES / "mlp.mlir", tmp_path / "mlp.mlir",
                          world_size=2, optimizer="adamw")
    assert prog == (tmp_path / "mlp.mlir").absolute() and prog.stat().st_size
    result = driver.run(prog, nproc=2, steps=3)
    assert result.returncode == 0
    assert [r["step"] for r in result.metrics] == [1, 2, 3]
    for row in result.metrics:
        assert math.isfinite(row["loss"])
        assert row["peak_bytes"] > 0 and row["tokens_per_s"] > 0
    assert "--nproc 2 --steps 3" in result.command
    assert result.command.endswith("--backend cpu --quiet")

    direct = tmp_path / "direct.jsonl"
    opt, run_tool = TOOLS
    subprocess.run([str(run_tool), str(prog), "--nproc", "2", "--steps", "3",
                    "--metrics", str(direct), "--quiet"], check=True,
                   capture_output=True, timeout=120)
    assert [r["loss"] for r in result.metrics] == _losses(direct)
    assert result.losses == _losses(direct) and result.save_dir is None


@needs_tools
def test_run_result_reads_checkpoints_and_the_program(tmp_path):
    """RunResult's checkpoint / params of a run that saved, and
    program_info: the lowered program's description (fsdp.program)."""
    pytest.importorskip("safetensors")
    prog = driver.compile(EXAMPLES / "mlp.mlir", tmp_path / "mlp.mlir",
                          world_size=2, optimizer="adamw")
    info = driver.program_info(prog)
    assert info["arena_bytes"] > 0 and info["units"]
    result = driver.run(prog, nproc=2, steps=2, save=tmp_path / "ckpt")
    assert result.save_dir == tmp_path / "ckpt"
    assert result.checkpoint(2) == tmp_path / "ckpt" / "step-2.safetensors"
    params = result.params(2)
    assert params and not any(k.startswith("optim.") for k in params)
    with pytest.raises(ValueError, match="no fsdp.program"):
        driver.program_info(EXAMPLES / "mlp.mlir")


@needs_tools
def test_compile_library_trains_as_the_jit_does(tmp_path):
    prog = driver.compile(EXAMPLES / "mlp.mlir", tmp_path / "mlp.mlir",
                          world_size=2, optimizer="sgd")
    lib = driver.compile_library(prog)
    assert lib == tmp_path / "mlp.so" and lib.stat().st_size
    jit = driver.run(prog, nproc=2, steps=3)
    aot = driver.run(lib, nproc=2, steps=3)
    assert [r["loss"] for r in aot.metrics] == [r["loss"] for r in jit.metrics]


@needs_tools
def test_compile_library_of_an_unlowered_model_is_a_compile_error(tmp_path):
    with pytest.raises(driver.CompileError) as error:
        driver.compile_library(EXAMPLES / "mlp.mlir", tmp_path / "x.so")
    assert "fsdp-compile needs a lowered program" in str(error.value)
    assert "fsdp-compile" in error.value.command


@needs_tools
def test_compile_text_and_model_object_match_path(tmp_path):
    text = (EXAMPLES / "gpt2.mlir").read_text()
    # Unlowered: the lowered text's order of same-point buffer frees is not
    # deterministic from one fsdp-opt run to the next.
    opts = dict(world_size=2, wrap_kinds="Block", lr=3e-4, lower=False)
    from_path = driver.compile(str(EXAMPLES / "gpt2.mlir"),
                               tmp_path / "a.mlir", **opts)
    from_text = driver.compile(text, tmp_path / "b.mlir", **opts)

    class Model:
        def text(self):
            return text
    from_object = driver.compile(Model(), tmp_path / "c.mlir", **opts)
    assert from_path.read_text() == from_text.read_text() \
        == from_object.read_text()

    opts["lower"] = True
    from_text = driver.compile(text, tmp_path / "d.mlir", **opts)
    result = driver.run(from_text, nproc=2, steps=2, seed=3,
                        metrics=tmp_path / "m.jsonl",
                        save=tmp_path / "ckpt")
    assert len(result.metrics) == 2
    assert result.metrics == [json.loads(l) for l in
                              (tmp_path / "m.jsonl").read_text().splitlines()]
    assert all(math.isfinite(r["loss"]) for r in result.metrics)
    assert any((tmp_path / "ckpt").iterdir())


@needs_tools
def test_compile_without_output_uses_a_temp_file():
    prog = driver.compile(EXAMPLES / "mlp.mlir", world_size=1, lower=False)
    try:
        assert prog.name == "mlp.step.mlir" and prog.stat().st_size
    finally:
        prog.unlink()
        prog.parent.rmdir()


def _reproduces(err):
    """Run the error's one-line command; it fails the same way."""
    assert "\n" not in err.command
    assert f"reproduce with:\n  {err.command}" in str(err)
    proc = subprocess.run(err.command, shell=True, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == err.returncode != 0
    return proc


@needs_tools
def test_syntax_error_raises_compile_error(tmp_path):
    bad = (EXAMPLES / "mlp.mlir").read_text().replace("fsdp.model", "fsdp.modle", 1)
    with pytest.raises(CompileError) as info:
        driver.compile(bad, tmp_path / "out" / "bad.mlir", world_size=2)
    err = info.value
    assert "fsdp.modle" in str(err) and "error:" in str(err)
    # The input was written next to the output, and the command reads it.
    assert err.input_path == tmp_path / "out" / "bad.input.mlir"
    assert err.input_path.read_text() == bad
    assert shlex.split(err.command)[1] == str(err.input_path)
    assert str(err.input_path) in err.stderr  # diagnostics name that file
    proc = _reproduces(err)
    assert proc.stderr == err.stderr
    assert not (tmp_path / "out" / "bad.mlir").exists()


@needs_tools
def test_unknown_pipeline_option_raises_compile_error(tmp_path):
    with pytest.raises(CompileError) as info:
        driver.compile(EXAMPLES / "mlp.mlir", tmp_path / "p.mlir",
                       world_size=2, bogus_option=3)
    err = info.value
    assert "no such option bogus-option" in str(err)
    assert "--fsdp-pipeline=world-size=2" in err.command
    assert "bogus-option=3" in err.command
    proc = _reproduces(err)
    assert proc.stderr == err.stderr


@needs_tools
def test_run_error_on_world_size_mismatch(tmp_path):
    prog = driver.compile(EXAMPLES / "mlp.mlir", tmp_path / "p.mlir",
                          world_size=2)
    with pytest.raises(RunError) as info:
        driver.run(prog, nproc=3, steps=1, env={"FSDP_RUN_GRACE_SECONDS": "5"})
    err = info.value
    assert "contradicts the program" in str(err)
    assert err.command.startswith("FSDP_RUN_GRACE_SECONDS=5 ")
    assert "--nproc 3" in err.command
    proc = _reproduces(err)
    assert "contradicts the program" in proc.stderr
    # The driver's temporary metrics directory is kept for the command.
    argv = shlex.split(err.command)
    tmp_metrics = Path(argv[argv.index("--metrics") + 1])
    assert tmp_metrics.parent.is_dir()
    shutil.rmtree(tmp_metrics.parent)


# -- report -------------------------------------------------------------------
@needs_tools
def test_report_says_what_a_run_costs_before_it_runs(tmp_path, capsys):
    # NestedWrappedModule at 4 ranks, full-shard: PyTorch's 11 collectives
    # (4 forward all-gathers, 3 backward ones, 4 reduce-scatters).
    before = driver.report(EXAMPLES / "nested_wrapped.mlir", world_size=4)
    kinds = [c["kind"] for c in before["collectives"]]
    assert kinds.count("all_gather") == 7 and kinds.count("reduce_scatter") == 4
    assert before["world_size"] == 4 and before["peak_bytes"] > 0
    # The same numbers as the text report compile(report=True) prints.
    capsys.readouterr()
    driver.compile(EXAMPLES / "nested_wrapped.mlir", tmp_path / "p.mlir",
                   world_size=4, lower=False, report=True)
    text = capsys.readouterr().out
    assert f"peak memory per rank: {before['peak_bytes']} bytes" in text
    assert "predicted step time: %.1f ms" % (
        before["predicted_step"]["seconds"] * 1e3) in text
    step = before["predicted_step"]
    assert step["seconds"] >= step["compute_seconds"] > 0
    # A machine twice as fast at everything halves the predicted time.
    profile = {k: step[k] for k in ("gemm_gflops", "memory_gbps", "link_gbps",
                                    "link_latency_us", "op_overhead_us")}
    fast = dict(profile, gemm_gflops=2 * profile["gemm_gflops"],
                memory_gbps=2 * profile["memory_gbps"],
                link_gbps=2 * profile["link_gbps"],
                link_latency_us=profile["link_latency_us"] / 2,
                op_overhead_us=profile["op_overhead_us"] / 2)
    after = driver.report(EXAMPLES / "nested_wrapped.mlir", world_size=4,
                          profile=fast)["predicted_step"]
    assert after["seconds"] == pytest.approx(step["seconds"] / 2, rel=1e-9)
    # A named machine: its rates, one of them replaced by `profile`.
    h100 = driver.report(EXAMPLES / "nested_wrapped.mlir", world_size=4,
                         machine="h100",
                         profile={"link_gbps": 100})["predicted_step"]
    assert (h100["gemm_gflops"], h100["gemm_gflops_16bit"],
            h100["link_gbps"]) == (50000, 600000, 100)
    # NestedWrappedModule is its per-call costs: 3 us a call against 30.
    assert 0 < h100["seconds"] < step["seconds"] / 5
    with pytest.raises(CompileError, match="unknown machine 'h200'"):
        driver.report(EXAMPLES / "mlp.mlir", machine="h200")
    with pytest.raises(ValueError, match="unknown profile keys"):
        driver.report(EXAMPLES / "mlp.mlir", profile={"gflops": 1})
    with pytest.raises(CompileError):
        driver.report(EXAMPLES / "mlp.mlir", world_size=0)
