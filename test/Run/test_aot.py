"""Ahead of time = just in time: a step library made by fsdp-compile and run
by the LLVM-free fsdprt-run trains bit for bit as fsdp-run's JIT does
(losses and final weights), across strategies, rank counts, bf16 mixed
precision and a resume from a checkpoint; the runner links no LLVM; and a
library or input it cannot run is a clear error.
"""
import collections
import json
import subprocess

import numpy as np
import pytest

from conftest import EXAMPLES, clean_env, load_full

STEPS = 4

# (model, ranks, options): every strategy, 2 and 4 ranks, bf16, both
# optimizers.
CASES = [
    ("nested_wrapped", 2, dict(strategy="full-shard", optimizer="adamw")),
    ("gpt2", 2, dict(strategy="shard-grad-op", optimizer="sgd",
                     param_dtype="bf16")),
    ("mlp", 2, dict(strategy="no-shard", optimizer="adamw")),
    ("gpt2", 4, dict(strategy="hybrid-shard", optimizer="adamw",
                     shard_group_size=2)),
    ("mlp", 4, dict(strategy="full-shard", optimizer="sgd",
                    param_dtype="bf16")),
]


def _assert_same_checkpoints(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("model,ranks,options", CASES,
                         ids=[f"{m}-{r}-{o['strategy']}" +
                              ("-bf16" if o.get("param_dtype") else "")
                              for m, r, o in CASES])
def test_aot_equals_jit_bit_for_bit(fsdp, model, ranks, options):
    program = fsdp.compile(model, world_size=ranks, **options)
    jit = fsdp.run(program, nproc=ranks, steps=STEPS)
    aot = fsdp.run(fsdp.library(program), nproc=ranks, steps=STEPS,
                   tool=fsdp.aot_run_tool)
    assert len(aot.losses) == STEPS
    assert aot.losses == jit.losses
    _assert_same_checkpoints(load_full(aot.checkpoint(STEPS)),
                             load_full(jit.checkpoint(STEPS)))


def test_aot_resumes_a_jit_checkpoint_bit_for_bit(fsdp):
    program = fsdp.compile("gpt2", world_size=2, strategy="full-shard",
                           optimizer="adamw")
    whole = fsdp.run(program, nproc=2, steps=6, save_every=3,
                     save_format="sharded")
    resumed = fsdp.run(fsdp.library(program), nproc=2, steps=6,
                       load=whole.save_dir / "step-3", save_format="sharded",
                       tool=fsdp.aot_run_tool)
    assert [m["step"] for m in resumed.metrics] == [4, 5, 6]
    assert resumed.losses == whole.losses[3:]
    for shard in sorted((whole.save_dir / "step-6").iterdir()):
        _assert_same_checkpoints(
            load_full(resumed.save_dir / "step-6" / shard.name),
            load_full(shard))


def test_fsdp_run_runs_step_libraries_too(fsdp):
    program = fsdp.compile("nested_wrapped", world_size=2)
    jit = fsdp.run(program, nproc=2, steps=2, save=False)
    library = fsdp.run(fsdp.library(program), nproc=2, steps=2, save=False)
    assert library.losses == jit.losses


def test_fsdp_compile_takes_a_model_and_pipeline_flags(fsdp, tmp_path):
    options = fsdp.options("mlp", world_size=2)
    out = tmp_path / "mlp.so"
    proc = subprocess.run(
        [str(fsdp.compiler), str(EXAMPLES / "mlp.mlir"),
         f"--fsdp-pipeline={options}", "-o", str(out)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    two_step = fsdp.run(fsdp.library(fsdp.compile("mlp", world_size=2)),
                        nproc=2, steps=2, save=False, tool=fsdp.aot_run_tool)
    direct = fsdp.run(out, nproc=2, steps=2, save=False,
                      tool=fsdp.aot_run_tool)
    assert direct.losses == two_step.losses


def test_runner_links_no_llvm(fsdp):
    for binary in (fsdp.aot_run_tool,):
        ldd = subprocess.run(["ldd", str(binary)], capture_output=True,
                             text=True, check=True).stdout
        assert "libfsdp_runtime" in ldd, ldd
        for banned in ("libLLVM", "libMLIR"):
            assert banned not in ldd, f"{binary} links {banned}:\n{ldd}"


def test_runner_refuses_mlir_input(fsdp):
    program = fsdp.compile("mlp", world_size=1, strategy="no-shard")
    proc = subprocess.run([str(fsdp.aot_run_tool), str(program), "--quiet"],
                          capture_output=True, text=True, timeout=60,
                          env=clean_env())
    assert proc.returncode != 0
    assert "is not a step library (.so)" in proc.stderr, proc.stderr
    assert "fsdp-compile" in proc.stderr, proc.stderr


def test_runner_options_are_checked_like_fsdp_run(fsdp):
    library = fsdp.library(fsdp.compile("gpt2", world_size=2))
    proc = subprocess.run([str(fsdp.aot_run_tool), str(library), "--nproc",
                           "2", "--batch-size", "6", "--quiet"],
                          capture_output=True, text=True, timeout=120,
                          env=clean_env())
    assert proc.returncode != 0
    assert "--batch-size 6 contradicts" in proc.stderr, proc.stderr
    proc = subprocess.run([str(fsdp.aot_run_tool), str(library), "--stepz",
                           "2"], capture_output=True, text=True, timeout=60,
                          env=clean_env())
    assert proc.returncode == 2
    assert "unknown option '--stepz'" in proc.stderr, proc.stderr


def _trace_op_counts(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return collections.Counter(e["name"] for e in events if e.get("ph") == "X")


def test_trace_skip_records_only_the_later_steps(fsdp, tmp_path):
    """--trace-steps N after --trace-skip K records steps K+1..K+N: each step
    issues the same operations, so the counts scale with N."""
    library = fsdp.library(fsdp.compile("mlp", world_size=1,
                                        strategy="no-shard",
                                        optimizer="adamw"))
    counts = {}
    for skip, steps in ((0, 4), (3, 1)):
        trace = tmp_path / f"skip{skip}.json"
        fsdp.run(library, nproc=1, steps=4, save=False,
                 tool=fsdp.aot_run_tool,
                 extra_args=["--trace", str(trace), "--trace-skip",
                             str(skip), "--trace-steps", str(steps)])
        counts[skip] = _trace_op_counts(trace)
    per_step = counts[3]["adamw_step"]
    assert per_step > 0
    assert counts[0]["adamw_step"] == 4 * per_step
    assert counts[0]["copy_from_host"] == 4 * counts[3]["copy_from_host"]
