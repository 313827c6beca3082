"""Compiled programs through the CUDA backend's code, without a GPU.

fsdprt-run-cuda-emu is fsdprt-run with the tests' host emulation of the
CUDA backend (runtime/unittests/cuda/emu: the backend's sources compiled as
C++, each kernel run by one host thread, cuBLAS / cuBLASLt by reference
loops, graphs recorded and replayed) registered as `--backend cuda_emu`.
Its ranks talk through the NCCL communicator over the tests' NCCL emulation
(test_multirank_cuda_emu.py). What a GPU
lease would find first runs here: the staging, indexing, stream and event
plumbing, step graphs, CPU offload's pinned buffers and host stream, and the
device-side index checks, on whole training steps of the zoo models.

Checked: losses and final weights agree with the CPU backend's within
test_parity's bounds (f32) or their 16-bit rounding (bf16 compute), on one
rank and on two ranks (NCCL emulation), also for Llama (rotary embeddings,
RMSNorm, grouped-query attention) and GPT-2 with dropout under activation
checkpointing; the step replayed as a graph is the eager
step bit for bit; an offloaded program trains as the device-resident one; the device
high-water mark covers the compiler's planned arena.
"""
import math
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, load_full, program_info
from fsdp_mlir import models
from test_parity import PARAM_ATOL, compare_losses, compare_params

STEPS = 5


@pytest.fixture(scope="module")
def emu_run():
    path = Path(os.environ.get("FSDPRT_RUN_CUDA_EMU") or
                REPO_ROOT / "build" / "bin" / "fsdprt-run-cuda-emu")
    if not path.exists():
        pytest.skip("fsdprt-run-cuda-emu is built with the CUDA toolkit only")
    return path


def _on_both(fsdp, emu_run, program, nproc=1, **kw):
    """The same step library trained on the CPU backend and on cuda_emu."""
    library = fsdp.library(program)
    cpu = fsdp.run(library, nproc=nproc, steps=STEPS, tool=fsdp.aot_run_tool,
                   backend="cpu", cache=True, **kw)
    emu = fsdp.run(library, nproc=nproc, steps=STEPS, tool=emu_run,
                   backend="cuda_emu", **kw)
    return cpu, emu


# (model, ranks, optimizer, pipeline options)
CONFIGS = [("mlp", 1, "sgd", {}),
           ("nested_wrapped", 1, "adamw", {}),
           ("gpt2", 1, "adamw", {}),
           ("gpt2", 1, "sgd", {"grad_accum": 2, "clip_grad_norm": 1.0}),
           ("gpt2", 2, "adamw", {}),
           ("nested_wrapped", 2, "sgd", {"strategy": "shard-grad-op"}),
           # max_abs and the NCCL MAX all-reduce of the inf norm.
           ("mlp", 2, "sgd", {"clip_grad_norm": 0.02,
                              "clip_norm_type": math.inf}),
           ("nested_wrapped", 2, "lion", {}),
           ("gpt2", 2, "adafactor", {"weight_decay": 0.1}),
           ("nested_wrapped", 1, "adam", {"weight_decay": 0.1})]


@pytest.mark.parametrize("config", CONFIGS,
                         ids=["-".join(map(str, c[:3])) + "".join(
                             f"-{k}" for k in c[3]) for c in CONFIGS])
def test_cuda_backend_trains_as_the_cpu_backend(fsdp, emu_run, config):
    model, ranks, optimizer, extra = config
    program = fsdp.compile(model, world_size=ranks, optimizer=optimizer,
                           **extra)
    cpu, emu = _on_both(fsdp, emu_run, program, nproc=ranks)
    assert not compare_losses(emu.losses, cpu.losses)
    assert not compare_params(emu.params(STEPS), cpu.params(STEPS),
                              PARAM_ATOL[optimizer])


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_16bit_compute_matches_the_cpu_backend(fsdp, emu_run, dtype):
    """Both backends widen 16-bit operands to f32, compute in f32 and round
    once with the same conversions, so only summation order separates them:
    a 16-bit gradient may round one step apart. Losses and the f32 master
    weights, under SGD (linear in the gradients, unlike AdamW, which turns
    a rounding-noise gradient into a step of lr), stay within that unit
    roundoff of each tensor's largest element. Per tensor, not per element:
    a gradient element one 16-bit step apart moves its parameter by lr
    times that step whatever the parameter's own size (the CUDA
    cross-entropy's exps, exp2 of a scaled difference as on the GPU's SFU,
    round a few more gradient elements the other way than summation order
    alone did)."""
    program = fsdp.compile("gpt2", world_size=1, optimizer="sgd",
                           param_dtype=dtype,
                           **({"loss_scale": "dynamic"} if dtype == "f16"
                              else {}))
    cpu, emu = _on_both(fsdp, emu_run, program)
    roundoff = 2.0 ** -8 if dtype == "bf16" else 2.0 ** -11
    assert not compare_losses(emu.losses, cpu.losses, rtol=roundoff)
    assert not compare_params(emu.params(STEPS), cpu.params(STEPS),
                              (0.0, None), rtol=roundoff)


# Models of the builders (python/fsdp_mlir/models) with what the examples
# lack: (model or preset, its overrides, pipeline options)
BUILT = [("llama_tiny", {}, "wrap-kinds=LlamaDecoderLayer"),
         ("gpt2", {"dropout": 0.1},
          "wrap-kinds=Block activation-checkpointing=Block"),
         ("gpt2", {"vocab": 4099}, "wrap-kinds=Block")]


@pytest.mark.parametrize("name,overrides,pipeline", BUILT,
                         ids=["llama_tiny", "gpt2-dropout-checkpointed",
                              "gpt2-padded-vocab"])
def test_built_models_train_as_on_the_cpu_backend(
        fsdp, fsdp_opt, emu_run, tmp_path, name, overrides, pipeline):
    """Rotary embeddings, RMSNorm, grouped-query attention and SiLU (Llama);
    dropout masks (the shared Philox stream) recomputed under activation
    checkpointing (GPT-2); a vocabulary padded to an aligned width (4099
    classes in rows of 4160: the cross-entropy kernels' padding columns)."""
    source = tmp_path / f"{name}.mlir"
    source.write_text(models.build(name, **overrides).text())
    program = tmp_path / f"{name}.lowered.mlir"
    subprocess.run([str(fsdp_opt), str(source), "--fsdp-pipeline=world-size=1 "
                    "auto-wrap-policy=module-kind optimizer=sgd momentum=0.9 "
                    f"lr=1e-2 lower=true {pipeline}", "-o", str(program)],
                   check=True)
    cpu, emu = _on_both(fsdp, emu_run, program)
    assert not compare_losses(emu.losses, cpu.losses)
    assert not compare_params(emu.params(STEPS), cpu.params(STEPS),
                              PARAM_ATOL["sgd"])


@pytest.mark.parametrize("name", ["gpt2", "llama_tiny"])
def test_kv_cache_decode_step_samples_as_on_the_cpu_backend(
        fsdp_compile, emu_run, tmp_path, name):
    """--generate through a decode step with a KV cache (concatenated
    cache rows, the attention bias of the run-time length, Llama's RoPE at
    a run-time position): the same sampled tokens on both backends."""
    source = tmp_path / f"{name}.mlir"
    source.write_text(models.build(name, batch=1, kv_cache=True).text())
    library = tmp_path / f"{name}.so"
    subprocess.run([str(fsdp_compile), str(source), "-o", str(library),
                    "--fsdp-pipeline=world-size=1 mode=eval lower=true"],
                   check=True)
    samples = {}
    for backend in ("cpu", "cuda_emu"):
        proc = subprocess.run(
            [str(emu_run), str(library), "--backend", backend, "--seed", "3",
             "--generate", "12", "--prompt-ids", "5,6,7,8,9",
             "--temperature", "1", "--quiet"],
            check=True, capture_output=True, text=True)
        samples[backend] = proc.stdout
    assert samples["cpu"].startswith("sample 1/1:\n5 6 7 8 9 ")
    assert len(samples["cpu"].split()) == 2 + 5 + 12
    assert samples["cuda_emu"] == samples["cpu"]


def test_step_graph_replays_the_eager_step(fsdp, emu_run):
    program = fsdp.library(fsdp.compile("gpt2", world_size=1,
                                        optimizer="adamw"))
    runs = {graphs: fsdp.run(program, steps=STEPS, tool=emu_run,
                             backend="cuda_emu",
                             extra_args=("--cuda-graphs", graphs), quiet=False)
            for graphs in ("on", "off")}
    assert "one CUDA graph from here on (captured at step 2" in \
        runs["on"].stdout
    assert "CUDA graph" not in runs["off"].stdout
    assert runs["on"].losses == runs["off"].losses
    want, have = (load_full(r.checkpoint(STEPS)) for r in runs.values())
    for name in want:
        assert (want[name] == have[name]).all(), name


@pytest.mark.parametrize("ranks", [1, 2])
def test_cpu_offload_on_the_cuda_backend(fsdp, emu_run, ranks):
    """Offload's pinned host buffer, copy streams and host optimizer (the
    CPU backend's kernels beside the device's) train as the program kept
    on the device."""
    programs = [fsdp.library(fsdp.compile(
        "gpt2", world_size=ranks, optimizer="adamw", cpu_offload=offload))
        for offload in (None, True)]
    plain, offloaded = (fsdp.run(p, nproc=ranks, steps=STEPS, tool=emu_run,
                                 backend="cuda_emu") for p in programs)
    assert not compare_losses(offloaded.losses, plain.losses)
    assert not compare_params(offloaded.params(STEPS), plain.params(STEPS),
                              PARAM_ATOL["adamw"])


def test_device_peak_is_the_arena_and_what_is_held_beside_it(fsdp, emu_run):
    """The device high-water mark is the planned arena plus what the backend
    holds beside it, each counted once and reported: the GEMM workspace and
    the per-call scratch reserve (f32 staging, partial sums), sized by the
    first step's largest call; the replayed steps add nothing."""
    program = fsdp.compile("gpt2", world_size=1, optimizer="adamw",
                           param_dtype="bf16")
    run = fsdp.run(fsdp.library(program), steps=3, tool=emu_run,
                   backend="cuda_emu", quiet=False)
    arena = program_info(program)["arena_bytes"]
    first = run.metrics[0]
    assert first["gemm_workspace_bytes"] > 0, first
    assert first["scratch_reserve_bytes"] > 0, first
    # The world communicator, NCCL at one rank too: its memory, measured
    # around its creation (the emulation's communicator holds 8 MiB), is
    # part of the peak.
    assert first["comm_device_bytes"] >= 8 << 20, first
    held = first["gemm_workspace_bytes"] + first["scratch_reserve_bytes"] + \
        first["comm_device_bytes"]
    for m in run.metrics:
        assert m["scratch_reserve_bytes"] == first["scratch_reserve_bytes"]
        # Beyond the arena and these: the step graph's live block (64 KiB)
        # and the metrics' rounding to the arena's 64-byte unit.
        assert 0 <= m["device_peak_bytes"] - arena - held <= 65536 + 64, m
    assert "device memory beside the arena, held from the first step on: " \
        "GEMM workspace 4.00 KiB, per-call scratch " in run.stdout
