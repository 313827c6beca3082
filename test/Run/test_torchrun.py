"""Launched by real torchrun (torch.distributed.run), as FSDP users launch.

torchrun's agent serves a c10d TCPStore on MASTER_PORT and tells its workers
(TORCHELASTIC_USE_AGENT_STORE=True); the runner joins it as a client of that
store's wire protocol. Each test runs torchrun itself and compares with
`fsdprt-run --nproc 2` on the same step library: standalone, a two-agent
("two-node") c10d rendezvous, a restart after a killed rank resuming from
the newest checkpoint with the uninterrupted run's losses and weights, and
a failing rank named in torchrun's summary (TORCHELASTIC_ERROR_FILE).
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import clean_env, free_port, load_full, read_metrics

pytest.importorskip("torch.distributed.run")

RANKS = 2
STEPS = 6


@pytest.fixture(scope="module")
def library(fsdp):
    return fsdp.library(fsdp.compile("gpt2", world_size=RANKS,
                                     strategy="full-shard", optimizer="adamw"))


@pytest.fixture(scope="module")
def reference(fsdp, library):
    """The same job under fsdprt-run's own launcher, checkpointed every
    2 steps."""
    return fsdp.run(library, nproc=RANKS, steps=STEPS, save_every=2,
                    tool=fsdp.aot_run_tool)



def torchrun(*args):
    """torchrun as a user types it, with the tests' clean environment."""
    return [sys.executable, "-m", "torch.distributed.run", *map(str, args)]


def run(cmd, timeout=300):
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          timeout=timeout, env=clean_env())
    return proc


def runner_args(fsdp, library, tmp_path, *extra):
    return ["--no-python", fsdp.aot_run_tool, library, "--steps", STEPS,
            "--quiet", "--metrics", tmp_path / "metrics.jsonl", *extra]


def test_standalone_trains_as_fsdprt_run(fsdp, library, reference, tmp_path):
    proc = run(torchrun("--standalone", "--nproc-per-node", RANKS,
                        *runner_args(fsdp, library, tmp_path)))
    assert proc.returncode == 0, proc.stderr
    losses = [m["loss"] for m in read_metrics(tmp_path / "metrics.jsonl")]
    assert losses == reference.losses


def test_two_agents_rendezvous_as_two_nodes(fsdp, library, reference,
                                            tmp_path):
    """Two torchrun agents, one rank each, meeting through c10d rendezvous
    on this machine: the layout of a 2-node job."""
    endpoint = f"127.0.0.1:{free_port()}"
    for n in range(2):
        (tmp_path / f"node{n}").mkdir()
    agents = [subprocess.Popen(
        torchrun("--nnodes", 2, "--nproc-per-node", 1, "--rdzv-backend", "c10d",
                 "--rdzv-endpoint", endpoint, "--rdzv-id", "two-nodes",
                 *runner_args(fsdp, library, tmp_path / f"node{n}")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env()) for n in range(2)]
    try:
        outs = [a.communicate(timeout=300) for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
    for a, (_, err) in zip(agents, outs):
        assert a.returncode == 0, err
    # Global rank 0 (on whichever agent) writes the metrics.
    written = [tmp_path / f"node{n}" / "metrics.jsonl" for n in range(2)
               if (tmp_path / f"node{n}" / "metrics.jsonl").exists()]
    assert len(written) == 1
    assert [m["loss"] for m in read_metrics(written[0])] == reference.losses


def _workers(marker):
    """The runner processes started with FSDP_TEST_JOB=`marker`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
            env = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        if b"--steps" in cmdline and b"TORCHELASTIC_RUN_ID=" in env and \
                f"FSDP_TEST_JOB={marker}".encode() in env:
            found.append(int(pid))
    return found


def test_restart_resumes_with_the_uninterrupted_losses(fsdp, library,
                                                       reference, tmp_path):
    """A rank SIGKILLed after step 3: torchrun (--max-restarts 1) restarts
    the group, whose keys in the agent's store live under the restart count,
    and --resume latest continues from step-2: losses and final weights are
    the uninterrupted run's, each step once in the metrics."""
    save = tmp_path / "ckpt"
    metrics = tmp_path / "metrics.jsonl"
    agent = subprocess.Popen(
        torchrun("--standalone", "--nproc-per-node", RANKS, "--max-restarts", 1,
                 *runner_args(fsdp, library, tmp_path, "--save", save,
                              "--save-every", 2, "--resume", "latest")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env({"FSDP_TEST_JOB": str(tmp_path)}))
    try:
        deadline = time.monotonic() + 120
        while not (metrics.exists() and
                   metrics.read_bytes().count(b"\n") >= 3):
            assert agent.poll() is None, agent.communicate()
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.05)
        workers = _workers(tmp_path)
        assert len(workers) == RANKS, workers
        os.kill(workers[-1], signal.SIGKILL)
        _, err = agent.communicate(timeout=300)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 0, err
    rows = read_metrics(metrics)
    assert [m["step"] for m in rows] == list(range(1, STEPS + 1))
    assert [m["loss"] for m in rows] == reference.losses
    final = f"step-{STEPS}.safetensors"
    want = load_full(reference.checkpoint(STEPS))
    have = load_full(save / final)
    assert want.keys() == have.keys()
    for name in want:
        assert (want[name] == have[name]).all(), name


def test_a_failing_rank_is_the_summary_root_cause(fsdp, library, tmp_path):
    proc = run(torchrun("--standalone", "--nproc-per-node", RANKS,
                        *runner_args(fsdp, library, tmp_path, "--data",
                                     tmp_path / "missing.txt")))
    assert proc.returncode != 0
    # torchrun prints what the rank wrote to TORCHELASTIC_ERROR_FILE.
    summary = proc.stderr[proc.stderr.index("Root Cause"):]
    assert "error_file: <N/A>" not in summary
    assert "missing.txt' cannot be opened" in summary


def test_a_world_size_other_than_the_compiled_one(fsdp, library, tmp_path):
    proc = run(torchrun("--standalone", "--nproc-per-node", 3,
                        *runner_args(fsdp, library, tmp_path)))
    assert proc.returncode != 0
    assert "the job has 3 ranks but the program was compiled for " \
           "world-size=2" in proc.stderr


def test_the_agent_store_holds_our_keys_and_bounds_our_waits(fsdp, library):
    """One rank of two against a c10d TCPStore served from Python, as
    torchrun's agent serves it: the rank's keys are in that store under
    fsdprt/<run id>/attempt_<restart count>/, and waiting for the rank that
    never comes ends at the rendezvous timeout (WAIT, then CANCEL_WAIT) with
    an error naming it."""
    from datetime import timedelta

    import torch.distributed as dist
    server = dist.TCPStore("127.0.0.1", 0, is_master=True,
                           timeout=timedelta(seconds=30))
    env = clean_env({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2",
                     "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": str(server.port),
                     "TORCHELASTIC_USE_AGENT_STORE": "True",
                     "TORCHELASTIC_RUN_ID": "job7",
                     "TORCHELASTIC_RESTART_COUNT": "2",
                     "FSDPRT_RENDEZVOUS_TIMEOUT_MS": "1500"})
    started = time.monotonic()
    proc = subprocess.run([str(fsdp.aot_run_tool), str(library), "--steps", "1",
                           "--quiet"], capture_output=True, text=True,
                          timeout=60, env=env)
    elapsed = time.monotonic() - started
    assert proc.returncode != 0
    assert "rank(s) 1 of 2 never joined" in proc.stderr, proc.stderr
    assert elapsed < 30, elapsed  # the wait was cancelled, not the server's
    assert server.get("fsdprt/job7/attempt_2/join/0") == b"2"
    assert server.add("fsdprt/job7/attempt_2/claim/0", 0) == 1
    assert not server.check(["fsdprt/job7/attempt_2/join/1"])
