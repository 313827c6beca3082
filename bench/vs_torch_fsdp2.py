"""Our CPU step time against PyTorch FSDP2's on the same job, in one run.

A GPT (the zoo's gpt2 builder; torch_reference.GPT is the same module with
PyTorch's names) trained with AdamW on 2 CPU ranks over Gloo: ours
compiled with one FSDP unit per Block plus the root, PyTorch with
fully_shard on each Block and then on the model (FSDP2's usual wrapping),
both from our seeded initial weights, on the same token rows per rank and
with the same compute threads per rank (cores / ranks). The first losses
must agree (the two jobs are the same computation) before any time is
compared. Prints each side's median step time over the steps after the
warm-up and the ratio (ours / PyTorch; below 1: ours is faster). The
machine is shared and noisy: compare the ratio of one run.

  python3 bench/vs_torch_fsdp2.py [--steps 12] [--layers 4] [--width 256]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from safetensors import numpy as st_numpy

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "python"), str(REPO / "python" / "tests")]
from fsdp_mlir import driver, models  # noqa: E402
from torch_reference import free_port, run_workers  # noqa: E402

WARMUP = 2  # steps left out of the medians (first-touch allocation)

_TORCH_WORKER = r'''
import json
import os
import sys
import time

import torch
from safetensors.numpy import load_file

(TESTS, INIT, DATA, OUT, PORT, WORLD, BATCH, STEPS, LR, THREADS, VOCAB, CTX,
 WIDTH, HEADS, LAYERS, RANK) = sys.argv[1:]
WORLD, BATCH, STEPS, RANK = int(WORLD), int(BATCH), int(STEPS), int(RANK)
torch.set_num_threads(int(THREADS))
sys.path.insert(0, TESTS)
from torch_reference import GPT, join_gloo, leave_gloo, load_weights

join_gloo(RANK, WORLD, PORT)
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

model = GPT(int(VOCAB), int(CTX), int(WIDTH), int(HEADS), int(LAYERS))
load_weights(model, INIT)
for block in model.transformer.h:
    fully_shard(block)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=float(LR), betas=(0.9, 0.999),
                        eps=1e-8, weight_decay=0.01)
data = load_file(DATA)
x, y = (torch.from_numpy(data[f"input.{i}"]) for i in range(2))
N = x.shape[0]
losses, times = [], []
for s in range(STEPS):
    rows = torch.tensor([(s * WORLD * BATCH + RANK + j * WORLD) % N
                         for j in range(BATCH)])
    dist.barrier()
    start = time.perf_counter()
    opt.zero_grad()
    loss = model(x[rows], y[rows])
    loss.backward()
    opt.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    times.append(time.perf_counter() - start)
    losses.append(mean.item() / WORLD)
if RANK == 0:
    with open(OUT, "w") as f:
        json.dump({"losses": losses, "step_time_s": times}, f)
leave_gloo()
'''


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--ctx", type=int, default=128)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=8, help="per rank")
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args()
    ranks, samples = 2, 256
    threads = max(1, (os.cpu_count() or 2) // ranks)
    shape = dict(vocab=args.vocab, ctx=args.ctx, width=args.width,
                 heads=args.heads, layers=args.layers)
    model = models.build("gpt2", **shape, batch=args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rng = np.random.default_rng(0)
        data = tmp / "tokens.safetensors"
        st_numpy.save_file(
            {f"input.{i}": rng.integers(0, args.vocab,
                                        (samples, args.ctx), np.int64)
             for i in range(2)}, str(data))
        # Our seeded initial weights: a 1-rank program's step-0 checkpoint.
        init_prog = driver.compile(model, tmp / "init.mlir", world_size=1,
                                   optimizer="sgd", lr=0.01)
        driver.run(init_prog, nproc=1, steps=0, seed=1, save=tmp / "init")
        init = tmp / "init" / "step-0.safetensors"
        weights = {k: v for k, v in st_numpy.load_file(str(init)).items()
                   if not k.startswith("optim.")}
        st_numpy.save_file(weights, str(tmp / "weights.safetensors"))

        program = driver.compile(model, tmp / "step.mlir", world_size=ranks,
                                 optimizer="adamw", lr=args.lr,
                                 wrap_kinds=["Block"])
        # The same seed gives the same initial weights at any world size.
        driver.run(program, nproc=ranks, steps=args.steps, data=data, seed=1,
                   metrics=tmp / "ours.jsonl")
        rows = driver.read_metrics(tmp / "ours.jsonl")
        ours_losses = [r["loss"] for r in rows]
        ours_times = [r["step_time_s"] for r in rows]

        out = tmp / "torch.json"
        run_workers(tmp, "torch_fsdp2", _TORCH_WORKER,
                    [tmp / "weights.safetensors", data, out, free_port(),
                     ranks, args.batch, args.steps, args.lr, threads,
                     *shape.values()], nproc=ranks, timeout=1800)
        theirs = json.loads(out.read_text())

    checked = min(3, args.steps)
    for step, (a, b) in enumerate(zip(ours_losses[:checked],
                                      theirs["losses"][:checked])):
        if abs(a - b) > 1e-4 * max(1.0, abs(b)):
            sys.exit(f"step {step}: loss {a} (ours) vs {b} (PyTorch FSDP2): "
                     "the two jobs differ; no timing compared")
    ours_s = statistics.median(ours_times[WARMUP:])
    torch_s = statistics.median(theirs["step_time_s"][WARMUP:])
    print(f"GPT {shape}, batch {args.batch} x {ranks} ranks, AdamW f32, "
          f"{threads} thread(s) per rank, median of steps "
          f"{WARMUP + 1}..{args.steps}")
    print(f"  losses agree over the first {checked} steps "
          f"(ours {ours_losses[0]:.6f}, PyTorch {theirs['losses'][0]:.6f})")
    print(f"  ours            {ours_s * 1e3:9.2f} ms/step")
    print(f"  PyTorch FSDP2   {torch_s * 1e3:9.2f} ms/step")
    print(f"  ratio ours / PyTorch {ours_s / torch_s:.3f}")


if __name__ == "__main__":
    main()
