"""The torch.nn counterparts of examples/{mlp,gpt2,nested_wrapped}.mlir
(state_dict names equal to our checkpoints' parameter names): the oracle of
test_torch_oracle.py, imported by its tests and by its FSDP2 worker
processes, so both train the same modules; plus oracle_cases, the case
lists every test_torch_oracle*.py file parametrizes over."""
import os
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


# -- the oracle files' cases ---------------------------------------------------
# Each test_torch_oracle*.py file runs a representative slice by default;
# FSDP_ORACLE_FULL=1 runs every (ranks, strategy, optimizer) below, for every
# model / mode the file has (scripts/parity-sweep.sh does).
ORACLE_FULL = os.environ.get("FSDP_ORACLE_FULL") == "1"
ORACLE_RANKS = (1, 2, 4)
ORACLE_OPTIMIZERS = ("sgd", "adamw")  # SGD with momentum 0.9, AdamW


def oracle_strategies(ranks):
    """The sharding strategies run at `ranks`: hybrid-shard only at 4 ranks
    (2 x 2: shard_group_size 2)."""
    return ("full-shard", "shard-grad-op", "no-shard") + \
        (("hybrid-shard",) if ranks == 4 else ())


def all_oracle_cases(*prefixes):
    """prefix + (ranks, strategy, optimizer) for every prefix (e.g. the
    model name; none: the bare triples), every rank count, strategy and
    optimizer, in that nesting order."""
    return [(*prefix, ranks, strategy, optimizer)
            for prefix in (prefixes or [()])
            for ranks in ORACLE_RANKS
            for strategy in oracle_strategies(ranks)
            for optimizer in ORACLE_OPTIMIZERS]


def oracle_cases(default, *prefixes):
    """The cases a file parametrizes over: `default` (its representative
    slice), or with FSDP_ORACLE_FULL=1 all_oracle_cases(*prefixes)."""
    return all_oracle_cases(*prefixes) if ORACLE_FULL else list(default)


# -- PyTorch's own FSDP on gloo, one process per rank ---------------------------
# The FSDP2 / FSDP1 comparisons run a worker script per test (the parent
# side: run_workers); the scripts share the rank's setup, the training loop
# and how they hand back their results.
def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_workers(workdir, name, source, args, nproc=1, timeout=180):
    """Writes `source` to workdir/<name>.py and runs it `nproc` times
    (argv: this directory, *args, and the process index when nproc > 1);
    fails with the processes' stderr unless every one exits 0."""
    import subprocess
    import sys
    from pathlib import Path
    script = Path(workdir) / f"{name}.py"
    script.write_text(source)
    command = [sys.executable, str(script), str(Path(__file__).parent),
               *map(str, args)]
    procs = [subprocess.Popen(command + ([str(i)] if nproc > 1 else []),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(nproc)]
    errors = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=timeout)
            if p.returncode != 0:
                errors.append(err[-3000:])
    finally:
        for p in procs:
            p.kill()
    assert not errors, "\n".join(errors)


def join_gloo(rank, world, port):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def leave_gloo():
    """Every rank reaches the barrier, then its process ends at once
    (os._exit after flushing its output; the results are already written).
    Destroying the process group, or letting the interpreter's exit destroy
    it, raced the peer's gloo threads and now and then aborted a rank under
    load after its work was done ("terminate called without an active
    exception": CI, even with the barrier before destroy_process_group)."""
    import sys
    import torch.distributed as dist
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def load_weights(model, path, strict=True):
    """Our safetensors checkpoint into `model` (names are PyTorch's)."""
    from safetensors.numpy import load_file
    model.load_state_dict({k: torch.from_numpy(v.copy())
                           for k, v in load_file(str(path)).items()},
                          strict=strict)


def train_steps(model, opt, steps, batch):
    """`steps` optimizer steps on model(*batch(step)); the losses averaged
    over the ranks, as fsdp-run's metrics report them."""
    import torch.distributed as dist
    losses = []
    for s in range(steps):
        opt.zero_grad()
        loss = model(*batch(s))
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / dist.get_world_size())
    return losses


def fed_rows(step, rank, world, batch, samples):
    """The samples fsdp-run feeds `rank` at `step` (0-based): step·world·batch
    + rank + k·world for k < batch, wrapping around the dataset."""
    return torch.tensor([(step * world * batch + rank + k * world) % samples
                         for k in range(batch)])


def fed_batches(path, rank, world, batch, samples):
    """batch(step): the (x, y) rows of the dataset at `path` that fsdp-run
    feeds `rank` at `step` (fed_rows), for train_steps."""
    from safetensors.numpy import load_file
    data = load_file(str(path))
    x, y = (torch.from_numpy(data[f"input.{i}"]) for i in range(2))

    def rows_at(step):
        rows = fed_rows(step, rank, world, batch, samples)
        return x[rows], y[rows]
    return rows_at


def write_result(out, state, losses):
    """out.safetensors (numpy state) and out.json (losses)."""
    import json
    from safetensors.numpy import save_file
    save_file(state, str(out) + ".safetensors")
    with open(str(out) + ".json", "w") as f:
        json.dump(losses, f)


def finish_fsdp2(out, model, losses, buffers=False):
    """The end of an FSDP2 worker: every rank gathers the full parameters
    (full_tensor is a collective), rank 0 writes them (and the buffers) with
    the losses, then every rank leaves."""
    import torch.distributed as dist
    full = {k: p.full_tensor().detach().numpy().copy()
            for k, p in model.named_parameters()}
    if buffers:
        full.update({k: b.detach().numpy().copy()
                     for k, b in model.named_buffers()})
    if dist.get_rank() == 0:
        write_result(out, full, losses)
    leave_gloo()


class MLP(nn.Module):
    """examples/mlp.mlir: Linear(16,32)-ReLU-Linear(32,32)-ReLU-Linear(32,4),
    MSE (mean)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 4)

    def forward(self, x, target):
        h = F.relu(self.fc2(F.relu(self.fc1(x))))
        return F.mse_loss(self.fc3(h), target)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(o.transpose(1, 2).contiguous().view(b, t, c))


class GPTMLP(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.mlp = GPTMLP(width)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """examples/gpt2.mlir (nanoGPT names): lm_head tied to wte, so the
    state_dict has no lm_head entry, as in our checkpoints."""

    def __init__(self, vocab=64, ctx=16, width=32, heads=4, layers=2):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width),
            wpe=nn.Embedding(ctx, width),
            h=nn.ModuleList(Block(width, heads) for _ in range(layers)),
            ln_f=nn.LayerNorm(width, eps=1e-5)))

    def forward(self, idx, targets):
        tr = self.transformer
        pos = torch.arange(idx.shape[1], dtype=torch.long, device=idx.device)
        x = tr.wte(idx) + tr.wpe(pos)
        for block in tr.h:
            x = block(x)
        logits = F.linear(tr.ln_f(x), tr.wte.weight)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]),
                               targets.view(-1))


class NestedWrapped(nn.Module):
    """examples/nested_wrapped.mlir (PyTorch's NestedWrappedModule): loss
    output.sum() per rank, so the reported loss (the mean over ranks) and the
    averaged gradients are those of sum(global batch) / ranks."""

    def __init__(self, ranks=1):
        super().__init__()
        self.ranks = ranks
        self.module = nn.Sequential(
            nn.Linear(8, 4),
            nn.Sequential(nn.Linear(4, 16), nn.Linear(16, 16)),
            nn.Linear(16, 4),
            nn.Linear(4, 8))

    def forward(self, x):
        return self.module(x).sum() / self.ranks


class TransformerWithSharedParams(nn.Module):
    """PyTorch's TransformerWithSharedParams (common_fsdp.py), the oracle of
    fsdp_mlir.models.transformer_with_shared_params: the real nn.Transformer
    (post-norm, ReLU, no masks), with dropout 0 (our builder's default) and
    the same buffers and tied output projection. It takes our batch-first
    ids [B, S] / [B, T] and runs PyTorch's (T, B) layout inside, so the
    BatchNorm1d(B) normalises over channel = batch as in the original; the
    loss is cross_entropy(reduction="sum") over every target token."""

    def __init__(self, vocab=23, d_model=16, heads=8, encoder_layers=2,
                 decoder_layers=2, ffn=8, batch=2, add_bn=True):
        super().__init__()
        self.vocab = vocab
        self.embed_tokens = nn.Embedding(vocab, d_model)
        with warnings.catch_warnings():  # nested tensors need batch_first
            warnings.filterwarnings("ignore", "enable_nested_tensor")
            self.transformer = nn.Transformer(
                d_model=d_model, nhead=heads,
                num_encoder_layers=encoder_layers,
                num_decoder_layers=decoder_layers, dim_feedforward=ffn,
                dropout=0.0)
        self.output_proj = nn.Linear(d_model, vocab)
        self.output_proj.weight = self.embed_tokens.weight  # tied
        self.register_buffer("vocab_bias",
                             self.embed_tokens.weight.new_ones((d_model,)))
        self.register_buffer("long_buffer", torch.zeros_like(
            self.vocab_bias, dtype=torch.long))
        self.bn = nn.BatchNorm1d(batch) if add_bn else nn.Identity()

    def forward(self, src_ids, tgt_ids):
        src_ids, tgt_ids = src_ids.t(), tgt_ids.t()  # (S, B), (T, B)
        src = self.embed_tokens(src_ids)
        src = src + self.vocab_bias + self.long_buffer.type_as(src)
        tgt = self.bn(self.embed_tokens(tgt_ids))
        out = self.output_proj(self.transformer(src, tgt))
        return F.cross_entropy(out.reshape(-1, self.vocab),
                               tgt_ids.reshape(-1), reduction="sum")


class MixtureOfExperts(nn.Module):
    """PyTorch's MixtureOfExperts (common_fsdp.py), the oracle of
    fsdp_mlir.models.mixture_of_experts: module.2 is the expert (different
    on every rank, its gradient not reduced). The loss is output.sum() of
    one rank's batch; the test averages the other gradients over ranks as
    the reference DummyDDP's run_backward does."""

    EXPERT = "module.2."  # the prefix of the expert's parameter names

    def __init__(self):
        super().__init__()
        self.module = nn.Sequential(
            nn.Linear(8, 12),   # root unit
            nn.Linear(12, 23),  # shared: its own unit
            nn.Linear(23, 12),  # expert: a rank-local unit
            nn.Linear(12, 8))   # root unit

    def forward(self, x):
        return self.module(x).sum()
