"""The torch.nn counterparts of examples/{mlp,gpt2,nested_wrapped}.mlir
(state_dict names equal to our checkpoints' parameter names): the oracle of
test_torch_oracle.py, imported by its tests and by its FSDP2 worker
processes, so both train the same modules."""
import torch
import torch.nn as nn
import torch.nn.functional as F


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
        pos = torch.arange(idx.shape[1], dtype=torch.long)
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
