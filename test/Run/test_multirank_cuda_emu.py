"""The CUDA backend and the NCCL communicator at 2 and 4 ranks, without GPUs.

fsdprt-run-cuda-emu runs the CUDA backend's code on the host emulation of
the CUDA runtime and, for its collectives, the real NCCL communicator
(runtime/comm/NcclCommunicator.cpp) over the tests' NCCL emulation
(runtime/unittests/cuda/emu/nccl.h): ranks are processes, a collective
completes when every rank has reached its matching call, and calls that do
not match fail on every rank instead of hanging. So every run here also
checks that each communicator's NCCL call sequence is identical on every
rank.

Checked: full-shard and shard-grad-op at 2 ranks (SGD and AdamW, f32 and
bf16 compute) and hybrid 2x2 at 4 ranks train as the CPU backend's runs
(Gloo) within test_parity's bounds, or the 16-bit roundoff; a killed rank
makes the others exit within 10 s with an error naming the collective; a
collective called out of order on one rank ends every rank with an error.
"""
import subprocess

import pytest

from conftest import clean_env
from test_cuda_emu import STEPS, emu_run  # noqa: F401 (a fixture)
from test_faults import kill_rank_1_when_training
from test_parity import PARAM_ATOL, compare_losses, compare_params

# (model, ranks, strategy, optimizer, param dtype)
CONFIGS = [("gpt2", 2, "full-shard", "sgd", None),
           ("nested_wrapped", 2, "shard-grad-op", "adamw", None),
           ("gpt2", 2, "full-shard", "sgd", "bf16"),
           ("mlp", 4, "hybrid-shard", "adamw", None),
           ("gpt2", 4, "hybrid-shard", "sgd", None)]


@pytest.mark.parametrize("config", CONFIGS,
                         ids=["-".join(str(v) for v in c if v) for c in CONFIGS])
def test_nccl_ranks_train_as_gloo_ranks_on_the_cpu(fsdp, emu_run, config):
    """At 2 ranks a reduction adds two values once, as Gloo does (NCCL's
    pre-multiplied sum scales each by a power of two first, which is exact),
    so f32 runs keep test_parity's bounds; 16-bit compute may round a
    gradient one unit apart (test_cuda_emu's 16-bit case)."""
    model, ranks, strategy, optimizer, dtype = config
    program = fsdp.library(fsdp.compile(model, world_size=ranks,
                                        strategy=strategy,
                                        optimizer=optimizer,
                                        param_dtype=dtype))
    cpu = fsdp.run(program, nproc=ranks, steps=STEPS, tool=fsdp.aot_run_tool,
                   backend="cpu", cache=True)
    emu = fsdp.run(program, nproc=ranks, steps=STEPS, tool=emu_run,
                   backend="cuda_emu")
    rtol = {"bf16": 2.0 ** -8, None: None}[dtype]
    extra = {"rtol": rtol} if rtol else {}
    assert not compare_losses(emu.losses, cpu.losses, **extra)
    assert not compare_params(emu.params(STEPS), cpu.params(STEPS),
                              PARAM_ATOL[optimizer], **extra)


def test_eager_steps_at_two_ranks_are_announced(fsdp, emu_run):
    """The step graph is captured at one rank only so far: at two, rank 0
    says in one line that steps run eagerly, and why."""
    program = fsdp.library(fsdp.compile("mlp", world_size=2,
                                        optimizer="sgd"))
    run = fsdp.run(program, nproc=2, steps=2, tool=emu_run,
                   backend="cuda_emu", quiet=False)
    assert run.stdout.count("the training step runs eagerly, not as one "
                            "CUDA graph: at more than one rank the "
                            "collectives wait on the host") == 1, run.stdout
    assert "one CUDA graph from here on" not in run.stdout


def test_compute_issue_runs_ahead_of_slow_collectives(fsdp, emu_run):
    """Every collective takes 150 ms longer on its stream (the emulation's
    slow-link hook). The compute stream's host thread must not wait for
    that: its waits on the collectives' events are device-side, so the
    time it spends blocked in event waits (comm_exposed_s) stays far below
    one delayed collective while the step itself, which ends with a device
    synchronisation, takes at least the delays of the collectives it
    serialises. With host-synchronous collectives the compute thread waited
    out each all-gather it consumes: at least one 150 ms delay per step."""
    delay_s = 0.15
    program = fsdp.library(fsdp.compile("mlp", world_size=2,
                                        optimizer="sgd"))
    run = fsdp.run(program, nproc=2, steps=3, tool=emu_run,
                   backend="cuda_emu",
                   env={"FSDPRT_NCCL_EMU_DELAY_MS": str(int(delay_s * 1e3))})
    for m in run.metrics[1:]:  # the first step also waits for the rendezvous
        assert m["step_time_s"] >= delay_s, m
        # What the host may still wait for: another stream's host issue of a
        # few operations (milliseconds here), never a collective's delay.
        assert m["comm_exposed_s"] < delay_s / 3, m


def _start(emu_run, program, metrics, env):
    cmd = [str(emu_run), str(program), "--backend", "cuda_emu", "--nproc", "2",
           "--steps", "100000", "--metrics", str(metrics), "--quiet"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=clean_env(env))


def test_killed_rank_stops_the_others_naming_the_collective(fsdp, emu_run,
                                                             tmp_path):
    """The launcher would stop the survivors only after its grace period
    (60 s here): rank 0 ends on its own, from the emulated NCCL's report of
    the closed connection, within 10 s."""
    program = fsdp.library(fsdp.compile("gpt2", world_size=2,
                                        optimizer="adamw"))
    metrics = tmp_path / "metrics.jsonl"
    launcher = _start(emu_run, program, metrics,
                      {"FSDP_RUN_GRACE_SECONDS": "60"})
    _, stderr, elapsed = kill_rank_1_when_training(launcher, metrics, lines=2,
                                                   start_within=120)
    print(f"\nthe job ended {elapsed:.1f} s after the kill:\n{stderr}")
    assert launcher.returncode != 0
    assert elapsed < 10, stderr
    survivor = [line for line in stderr.splitlines()
                if "rank 0: error" in line]
    assert survivor, stderr
    assert "failed on rank 0 (global rank 0): nccl backend: " in survivor[0]
    assert "rank 1 closed its connection (exited?) before collective #" \
        in survivor[0], survivor


def test_collective_out_of_order_fails_every_rank(fsdp, emu_run, tmp_path):
    """The emulation's hook makes rank 1 call its 4th collective with one
    element more, as if its program had issued another one there: both
    ranks stop with the mismatch named, none hangs."""
    program = fsdp.library(fsdp.compile("gpt2", world_size=2,
                                        optimizer="adamw"))
    proc = subprocess.run(
        [str(emu_run), str(program), "--backend", "cuda_emu", "--nproc", "2",
         "--steps", "3", "--quiet"], capture_output=True, text=True,
        timeout=120, env=clean_env({"FSDPRT_NCCL_EMU_MISMATCH": "1:3"}))
    assert proc.returncode != 0
    for rank in (0, 1):
        lines = [line for line in proc.stderr.splitlines()
                 if f"rank {rank}: error" in line]
        assert lines and "collectives called out of order: rank 0 called " \
            "collective #3 " in lines[0], proc.stderr


def test_more_ranks_than_gpus_is_refused_before_the_rendezvous(fsdp, emu_run):
    """Two ranks on a host with one (emulated) GPU: every rank stops at
    once, naming the counts, instead of NCCL's "invalid usage" after the
    rendezvous; with NCCL_HOSTID set (loopback test ranks sharing the GPU
    on purpose, as the lease kit's multirank part runs them) they train."""
    program = fsdp.library(fsdp.compile("mlp", world_size=2,
                                        optimizer="sgd"))
    cmd = [str(emu_run), str(program), "--backend", "cuda_emu", "--nproc",
           "2", "--steps", "2", "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          env=clean_env({"FSDPRT_CUDA_EMU_DEVICES": "1"}))
    assert proc.returncode != 0
    for rank in (0, 1):
        assert f"rank {rank}: error: " in proc.stderr, proc.stderr
    assert "cuda backend: 2 ranks on this host (torchrun) but 1 visible " \
        "CUDA device: one GPU per rank; start at most 1 ranks per host" \
        in proc.stderr, proc.stderr
    shared = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                            env=clean_env({"FSDPRT_CUDA_EMU_DEVICES": "1",
                                           "NCCL_HOSTID": "test"}))
    assert shared.returncode == 0, shared.stderr
