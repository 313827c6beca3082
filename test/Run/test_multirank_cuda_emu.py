"""The CUDA backend and the NCCL communicator at 2 and 4 ranks, without GPUs.

fsdprt-run-cuda-emu runs the CUDA backend's code on the host emulation of
the CUDA runtime and, for its collectives, the real NCCL communicator
(runtime/comm/nccl/NcclCommunicator.cpp) over the tests' NCCL emulation
(runtime/unittests/cuda/emu/nccl.h): ranks are processes, a collective
completes when every rank has reached its matching call, and calls that do
not match fail on every rank instead of hanging. So every run here also
checks that each communicator's NCCL call sequence is identical on every
rank.

Checked: full-shard and shard-grad-op at 2 ranks (SGD and AdamW, f32 and
bf16 compute) and hybrid 2x2 at 4 ranks train as the CPU backend's runs
(Gloo) within test_parity's bounds, or the 16-bit roundoff; the step graph
at 2 and 4 ranks replays the eager steps bit for bit, and a capture failing
on one rank runs every rank eagerly; the compute stream's host runs ahead
of slow collectives (stream-ordered collectives); a killed rank makes the
others exit within 10 s with an error naming the collective, a stalled one
within seconds by its silent heartbeat; a collective called out of order on
one rank ends every rank with an error.
"""
import signal
import subprocess

import pytest

from conftest import clean_env, load_full
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


@pytest.mark.parametrize("model,ranks,strategy", [
    ("gpt2", 2, "full-shard"), ("mlp", 4, "hybrid-shard")])
def test_step_graph_at_n_ranks_replays_the_eager_step(fsdp, emu_run, model,
                                                      ranks, strategy):
    """The step captured with its collectives inside (the NCCL emulation
    issues a captured collective anew at each launch, in launch order) and
    replayed from step 3 on trains bit for bit as the eager steps."""
    program = fsdp.library(fsdp.compile(model, world_size=ranks,
                                        strategy=strategy,
                                        optimizer="adamw"))
    runs = {graphs: fsdp.run(program, nproc=ranks, steps=STEPS, tool=emu_run,
                             backend="cuda_emu", quiet=False,
                             extra_args=("--cuda-graphs", graphs))
            for graphs in ("on", "off")}
    assert "one CUDA graph from here on (captured at step 2" in \
        runs["on"].stdout
    assert "CUDA graph" not in runs["off"].stdout
    assert runs["on"].losses == runs["off"].losses
    want, have = (load_full(runs[g].checkpoint(STEPS)) for g in ("off", "on"))
    for name in want:  # parameters and optimizer state
        assert (want[name] == have[name]).all(), name


def test_a_capture_failing_on_one_rank_runs_every_rank_eagerly(fsdp,
                                                               emu_run):
    """FSDPRT_CUDA_EMU_CAPTURE_FAILS_ON=1 (the emulation's hook) makes the
    capture fail on rank 1 only: a graph on rank 0 alone would run the
    ranks' collectives apart, so both run eagerly, said once, and train as
    eager runs do."""
    program = fsdp.library(fsdp.compile("mlp", world_size=2,
                                        optimizer="sgd"))
    runs = {graphs: fsdp.run(program, nproc=2, steps=STEPS, tool=emu_run,
                             backend="cuda_emu", quiet=False,
                             env={"FSDPRT_CUDA_EMU_CAPTURE_FAILS_ON": "1"},
                             extra_args=("--cuda-graphs", graphs))
            for graphs in ("on", "off")}
    stderr = runs["on"].stderr
    assert "rank 1: the step cannot be captured as a CUDA graph" in stderr
    assert "rank 0: the step cannot be captured" not in stderr
    assert stderr.count("the training step runs eagerly on every rank") == 1
    assert "one CUDA graph from here on" not in runs["on"].stdout
    assert runs["on"].losses == runs["off"].losses


def test_mesh_groups_split_from_the_world_and_count_in_the_peak(fsdp,
                                                                emu_run):
    """Hybrid 2x2: the shard and replicate groups are split from the world
    (ncclCommSplit, gathered through it; parity above shows the groups are
    right). Each of the three communicators holds its device memory (8 MiB
    in the emulation, measured around its creation), which the metrics and
    the device-reserve line report and the device peak includes."""
    program = fsdp.library(fsdp.compile("mlp", world_size=4,
                                        strategy="hybrid-shard",
                                        optimizer="sgd"))
    run = fsdp.run(program, nproc=4, steps=2, tool=emu_run,
                   backend="cuda_emu", quiet=False)
    mib = 1 << 20
    for m in run.metrics:
        # Three communicators' 8 MiB, and each one's 4-byte barrier word in
        # a 256-byte allocation.
        assert 3 * 8 * mib <= m["comm_device_bytes"] <= 3 * 8 * mib + 3 * 256
        assert m["device_peak_bytes"] > m["comm_device_bytes"]
    assert "communicators (NCCL) 24.00 MiB" in run.stdout, run.stdout


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


@pytest.mark.parametrize("collective_ms,heartbeat_ms,names", [
    ("60000", "2000", "rank 1 sent no heartbeat for "),
    ("2000", "60000", "not complete after 2000 ms (a peer stalled or gone?)")],
    ids=["heartbeat", "deadline"])
def test_stalled_rank_stops_the_others_by_its_silence(
        fsdp, emu_run, tmp_path, collective_ms, heartbeat_ms, names):
    """A stopped rank (SIGSTOP) closes no connection and raises no NCCL
    error. Its heartbeat falls silent, and rank 0, waiting for a
    collective, stops after FSDPRT_HEARTBEAT_TIMEOUT_MS (2 s) plus a
    heartbeat period, naming the silent rank, not at the collective
    timeout (60 s); with the heartbeat's timeout the longer, the watchdog's
    deadline (the collective timeout, 2 s) stops it, naming the timeout.
    The job ends 1 s later (the launcher's grace period for the stopped
    rank)."""
    program = fsdp.library(fsdp.compile("gpt2", world_size=2,
                                        optimizer="adamw"))
    metrics = tmp_path / "metrics.jsonl"
    # The launcher notices nothing until rank 0 exits; then it stops the
    # stalled rank after its grace period (1 s: SIGTERM waits for SIGCONT).
    launcher = _start(emu_run, program, metrics,
                      {"FSDP_RUN_GRACE_SECONDS": "1",
                       "FSDPRT_COLLECTIVE_TIMEOUT_MS": collective_ms,
                       "FSDPRT_HEARTBEAT_TIMEOUT_MS": heartbeat_ms})
    _, stderr, elapsed = kill_rank_1_when_training(
        launcher, metrics, lines=2, start_within=120, sig=signal.SIGSTOP)
    print(f"\nthe job ended {elapsed:.1f} s after the stop:\n{stderr}")
    assert launcher.returncode != 0
    assert elapsed < 10, stderr
    survivor = [line for line in stderr.splitlines()
                if "rank 0: error" in line]
    assert survivor and names in survivor[0], stderr


def test_a_malformed_heartbeat_timeout_is_named_by_every_rank(fsdp,
                                                              emu_run):
    program = fsdp.library(fsdp.compile("mlp", world_size=2,
                                        optimizer="sgd"))
    proc = subprocess.run(
        [str(emu_run), str(program), "--backend", "cuda_emu", "--nproc", "2",
         "--steps", "1", "--quiet"], capture_output=True, text=True,
        timeout=60, env=clean_env({"FSDPRT_HEARTBEAT_TIMEOUT_MS": "abc"}))
    assert proc.returncode != 0
    for rank in (0, 1):
        assert f"rank {rank}: error: joining the job: fsdprt_comm_init_env: " \
            "FSDPRT_HEARTBEAT_TIMEOUT_MS='abc' is not a positive timeout in " \
            "milliseconds" in proc.stderr, proc.stderr


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
