"""Failures of a job, and launching without --nproc.

A rank killed mid-run brings the whole job down promptly with the rank named;
misuse (an unlowered program, a rank count or batch size contradicting the
compiled program) is refused with a clear message; and ranks started by
hand with torchrun's environment train exactly like `--nproc`.
"""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import EXAMPLES, clean_env, free_port, read_metrics

RANKS = 2


@pytest.fixture(scope="module")
def gpt2_2(fsdp):
    return fsdp.compile("gpt2", world_size=RANKS, strategy="full-shard",
                        optimizer="adamw")


def _children(pid):
    """Pids whose parent is `pid` (from /proc, no psutil needed)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may contain spaces.
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def _environ(pid):
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(e.split("=", 1) for e in raw.decode(errors="replace")
                .split("\0") if "=" in e)


def _kill_all(launcher, pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if launcher.poll() is None:
        launcher.kill()
    launcher.wait()


def kill_rank_1_when_training(launcher, metrics, lines, start_within,
                              sig=signal.SIGKILL):
    """Waits until both ranks of the 2-rank job `launcher` exist and
    `metrics` holds `lines` lines, sends rank 1 `sig` (SIGKILL; SIGSTOP
    stalls it) and waits (30 s at most) for the launcher to exit. Returns
    its ranks {RANK: pid}, its stderr and the seconds from the signal to its
    exit; no rank is left behind."""
    ranks = {}
    try:
        deadline = time.monotonic() + start_within
        while time.monotonic() < deadline:
            assert launcher.poll() is None, launcher.communicate()
            ranks = {_environ(p).get("RANK"): p for p in _children(launcher.pid)}
            if {"0", "1"} <= set(ranks) and metrics.exists() and \
                    metrics.read_bytes().count(b"\n") >= lines:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the job did not start training within {start_within} s")
        os.kill(ranks["1"], sig)
        killed = time.monotonic()
        _, stderr = launcher.communicate(timeout=30)
        elapsed = time.monotonic() - killed
    finally:
        _kill_all(launcher, ranks.values())
    return ranks, stderr, elapsed


def test_killed_rank_stops_the_job(fsdp, gpt2_2, tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    cmd = [str(fsdp.run_tool), str(gpt2_2), "--nproc", str(RANKS),
           "--steps", "100000", "--metrics", str(metrics), "--quiet"]
    launcher = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=clean_env({"FSDP_RUN_GRACE_SECONDS": "5"}))
    ranks, stderr, elapsed = kill_rank_1_when_training(
        launcher, metrics, lines=3, start_within=60)
    print(f"\nlauncher exited {launcher.returncode} {elapsed:.1f} s after the "
          f"kill:\n{stderr}")
    assert launcher.returncode != 0
    assert elapsed < 30
    assert f"rank 1 (pid {ranks['1']})" in stderr, stderr
    assert "signal 9" in stderr, stderr
    # Rank 0 is gone too (stopped by the launcher, not left behind).
    assert not Path(f"/proc/{ranks['0']}").exists() or \
        "zombie" in Path(f"/proc/{ranks['0']}/status").read_text()


def _run(fsdp, args, env=None):
    return subprocess.run([str(fsdp.run_tool)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=120,
                          env=clean_env(env))


def test_unlowered_input(fsdp):
    proc = _run(fsdp, [EXAMPLES / "mlp.mlir", "--steps", "1", "--quiet"])
    assert proc.returncode != 0
    assert "needs a lowered program" in proc.stderr, proc.stderr


def test_non_finite_loss_stops_every_rank(fsdp, tmp_path):
    # SGD with lr 1e30 turns the MLP's weights to inf in one step: the
    # second loss is NaN. Every rank stops there, naming the step, and no
    # checkpoint of NaN weights is written.
    program = fsdp.compile("mlp", world_size=RANKS, strategy="full-shard",
                           optimizer="sgd", lr=1e30)
    save = tmp_path / "ckpt"
    proc = _run(fsdp, [program, "--nproc", RANKS, "--steps", "5",
                       "--save", save, "--metrics", tmp_path / "m.jsonl"])
    assert proc.returncode != 0
    for rank in range(RANKS):
        assert f"rank {rank}: error: step 2: the loss (averaged over the " \
            "ranks) is" in proc.stderr, proc.stderr
    assert "(lower the learning rate or clip the gradients; with " \
        "param-dtype=f16, use loss-scale=dynamic, bf16 or f32)" in proc.stderr
    assert [row["step"] for row in read_metrics(tmp_path / "m.jsonl")] == \
        [1, 2]
    assert not save.exists() or not any(save.iterdir())


def test_nproc_contradicts_world_size(fsdp, gpt2_2):
    proc = _run(fsdp, [gpt2_2, "--nproc", "3", "--steps", "1", "--quiet"])
    assert proc.returncode != 0
    assert "--nproc 3" in proc.stderr and "world-size=2" in proc.stderr, \
        proc.stderr


def test_wrong_batch_size(fsdp, gpt2_2):
    # gpt2: 4 sequences per rank x 2 ranks x 1 micro-batch = 8.
    proc = _run(fsdp, [gpt2_2, "--nproc", "2", "--steps", "1", "--quiet",
                       "--batch-size", "6"])
    assert proc.returncode != 0
    assert "--batch-size 6 contradicts" in proc.stderr, proc.stderr
    assert "= 8" in proc.stderr, proc.stderr
    ok = _run(fsdp, [gpt2_2, "--nproc", "2", "--steps", "1", "--quiet",
                     "--batch-size", "8"])
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("args,message", [
    (["--micro-batches", "2"], "--micro-batches 2 contradicts the compiled "
                               "program's 1"),
    (["--save-format", "zip", "--save", "ckpt"],
     "--save-format must be full or sharded, not 'zip'"),
    (["--data", "/nonexistent.txt"],
     "data file '/nonexistent.txt' cannot be opened"),
    (["--backend", "tpu"], "--backend must be one this runtime was built "
                           "with (cpu"),
])
def test_bad_options_are_clear_errors(fsdp, gpt2_2, tmp_path, args, message):
    proc = _run(fsdp, [gpt2_2, "--nproc", "2", "--steps", "1", "--quiet",
                       *[str(tmp_path / a) if a == "ckpt" else a for a in args]])
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr



@pytest.mark.parametrize("runner", ["fsdp-run", "fsdprt-run"])
def test_torchrun_style_environment(fsdp, gpt2_2, tmp_path, runner):
    steps = 3
    reference = fsdp.run(gpt2_2, nproc=RANKS, steps=steps, save=False)
    tool, program = fsdp.run_tool, gpt2_2
    if runner == "fsdprt-run":  # the same runner around a step library
        tool, program = fsdp.aot_run_tool, fsdp.library(gpt2_2)
    port = free_port()
    procs = []
    for rank in range(RANKS):
        env = clean_env({"RANK": str(rank), "LOCAL_RANK": str(rank),
                         "WORLD_SIZE": str(RANKS),
                         "LOCAL_WORLD_SIZE": str(RANKS),
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        cmd = [str(tool), str(program), "--steps", str(steps),
               "--quiet", "--metrics", str(tmp_path / f"m{rank}.jsonl")]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    losses = [m["loss"] for m in read_metrics(tmp_path / "m0.jsonl")]
    assert losses == reference.losses
    assert not (tmp_path / "m1.jsonl").exists()  # rank 0 writes the metrics


def test_ranks_end_with_their_launcher(fsdp, gpt2_2, tmp_path):
    """`fsdprt-run --nproc 2` killed with SIGKILL (no chance to stop its
    ranks): the ranks end too (PR_SET_PDEATHSIG) instead of training on as
    orphans and writing checkpoints."""
    metrics = tmp_path / "metrics.jsonl"
    launcher = subprocess.Popen(
        [str(fsdp.aot_run_tool), str(fsdp.library(gpt2_2)), "--nproc",
         str(RANKS), "--steps", "100000", "--quiet", "--metrics", str(metrics)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=clean_env())
    ranks = []
    try:
        deadline = time.monotonic() + 120
        while not (metrics.exists() and metrics.read_bytes().count(b"\n") >= 2):
            assert launcher.poll() is None, launcher.communicate()
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.1)
        ranks = _children(launcher.pid)
        assert len(ranks) == RANKS
        launcher.kill()
        launcher.wait()
        deadline = time.monotonic() + 10
        alive = ranks
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [p for p in ranks if _running(p)]
        assert not alive, f"ranks {alive} outlived their launcher"
    finally:
        _kill_all(launcher, ranks)


def _running(pid):
    """Alive and not a zombie (an orphan's zombie is reaped by init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
