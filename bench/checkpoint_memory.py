#!/usr/bin/env python3
"""Rank 0's peak memory while it writes a full checkpoint, measured.

A full checkpoint (`--save-format full`, PyTorch's full state dict) is
written by rank 0 from tensors gathered over the shard group. Buffering
them all before the write costs rank 0 the whole model and its optimizer
state (12 bytes a parameter with AdamW), the full-state-dict CPU OOM FSDP1
users know; streaming (each unit's tensors written as soon as it is
gathered) costs one unit. For a GPT-2-medium-shaped model (24 blocks,
width 1024, 50257-token vocabulary: 354.8M parameters) at 2 CPU ranks,
this writes the initialised model (`--steps 0 --save`) and reports rank
0's peak RSS (getrusage of the rank process) against the same run without
`--save` (the initialisation's host image is the peak then; streaming keeps
the save under it); with `--before BIN`, the same for another runner binary (e.g. a
build from before streaming), and the ratio of what the save adds.

    python3 bench/checkpoint_memory.py [--build build] [--before BIN]
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHAPE = dict(vocab=50257, ctx=64, width=1024, heads=16, layers=24, batch=2)
RANKS = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compile_step(build, work):
    ir = work / "gpt2_medium.mlir"
    args = [a for k, v in SHAPE.items() for a in (f"--{k}", str(v))]
    subprocess.run([sys.executable, "-m", "fsdp_mlir.models", "gpt2", *args,
                    "-o", str(ir)], check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    so = work / "gpt2_medium.so"
    subprocess.run([str(build / "bin" / "fsdp-compile"), str(ir), "-o", str(so),
                    f"--fsdp-pipeline=world-size={RANKS} auto-wrap-policy="
                    "module-kind wrap-kinds=Block optimizer=adamw lower=true"],
                   check=True, stdout=subprocess.DEVNULL)
    return so


def rank0_peak(runner, so, save):
    """Rank 0's peak RSS in bytes and the job's seconds."""
    port = free_port()
    procs = []
    start = time.monotonic()
    for rank in range(RANKS):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(RANKS),
               "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(RANKS),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        cmd = [str(runner), str(so), "--steps", "0", "--quiet",
               "--backend", "cpu"]
        if save:
            cmd += ["--save", str(save)]
        procs.append(subprocess.Popen(cmd, env=env))
    peaks = {}
    for rank, p in enumerate(procs):
        _, status, usage = os.wait4(p.pid, 0)
        if status != 0:
            sys.exit(f"rank {rank} of {runner} failed ({status})")
        peaks[rank] = usage.ru_maxrss * 1024  # KiB on Linux
    return peaks[0], time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--before", help="another runner to compare with")
    args = parser.parse_args()
    build = Path(args.build)
    work = Path(tempfile.mkdtemp(prefix="ckpt-memory-"))
    try:
        so = compile_step(build, work)
        runners = {"this build": build / "bin" / "fsdprt-run"}
        if args.before:
            runners["before"] = Path(args.before)
        gib = 1 << 30
        added, peak = {}, {}
        print(f"GPT-2-medium shape {SHAPE}, {RANKS} CPU ranks, AdamW: rank 0's "
              "peak RSS")
        for name, runner in runners.items():
            plain, _ = rank0_peak(runner, so, None)
            save = work / f"ckpt-{len(added)}"
            saving, seconds = rank0_peak(runner, so, save)
            size = sum(f.stat().st_size for f in save.glob("*"))
            added[name] = max(saving - plain, 0)
            peak[name] = saving
            print(f"  {name:10s}: {plain / gib:5.2f} GiB without --save, "
                  f"{saving / gib:5.2f} GiB saving a {size / gib:.2f} GiB "
                  f"checkpoint ({seconds:.1f} s): the save adds "
                  f"{added[name] / gib:.2f} GiB")
            shutil.rmtree(save)
        if "before" in added:
            print(f"  rank 0's peak while saving, this build / before: "
                  f"{peak['this build'] / peak['before']:.2f}")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
