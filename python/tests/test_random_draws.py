"""Random draws in a model's forward (torch.randn_like, torch.rand,
torch.randint, x.normal_(), x.exponential_(), torch.bernoulli(probs),
...): a VAE's reparameterisation noise, a diffusion model's noise and time
steps, F.gumbel_softmax's Gumbel noise and straight-through binary units,
imported as nn.random.

Our draws come from the runtime's counter-based generator, not torch's, so
the reference replays ours: `draws` below computes them in numpy from the
generator's specification (docs/Runtime.md: Philox4x32-10 keyed by the
seed, counter (element / 4, step, site), Box-Muller on lane pairs), an
implementation independent of the runtime's C++, and torch's random
functions return them during the reference run. The models then train
like torch (losses within 1e-5, the import suite's bound) at 1 and 2
ranks: rank r draws with site key r x S + s (S sites a step), so 2 ranks
draw what one rank with 2 micro-batches draws.

Run: PYTHONPATH=python:python/tests python3 -m pytest -q python/tests/test_random_draws.py
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from unittest import mock

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from fsdp_mlir import from_torch  # noqa: E402
from fsdp_mlir.torch_import import UnsupportedModelError  # noqa: E402
from test_torch_import import (NUM_SAMPLES, PER_RANK,  # noqa: E402
                               emulated_cuda, torch_losses, train_imported)

SEED = 5
STEPS = 4
LOSS_RTOL = 1e-5  # the import suite's bound: f32 reduction order, and the
# last bits of log / sin / cos in numpy's Box-Muller against the runtime's

_MASK = np.uint64(0xFFFFFFFF)


def philox_bits(seed: int, step: int, site: int, blocks: int) -> np.ndarray:
    """[blocks, 4] uint32 lanes of Philox4x32-10 with key (seed lo, seed
    hi) and counter (block lo, block hi, step, site) (Salmon et al. 2011)."""
    block = np.arange(blocks, dtype=np.uint64)
    c = [block & _MASK, block >> np.uint64(32),
         np.full(blocks, step, np.uint64) & _MASK,
         np.full(blocks, site, np.uint64) & _MASK]
    k0, k1 = np.uint64(seed) & _MASK, np.uint64(seed) >> np.uint64(32)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _MASK,
             (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & _MASK]
        k0 = (k0 + np.uint64(0x9E3779B9)) & _MASK
        k1 = (k1 + np.uint64(0xBB67AE85)) & _MASK
    return np.stack(c, axis=1)


def draws(shape, distribution: str, step: int, site: int, a=0.0, b=1.0):
    """The f32 numbers nn.random draws for `site` at `step` (1-based)."""
    n = int(np.prod(shape))
    bits = philox_bits(SEED, step, site, (n + 3) // 4)
    u = (bits >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24)
    a, b = np.float32(a), np.float32(b)
    if distribution == "uniform":
        out = a + (b - a) * u
    else:  # Box-Muller on lanes (0, 1) and (2, 3)
        radius = np.sqrt(np.float32(-2) * np.log(np.float32(1) - u[:, 0::2]))
        angle = np.float32(2 * math.pi) * u[:, 1::2]
        out = np.empty_like(u)
        out[:, 0::2] = a + b * radius * np.cos(angle)
        out[:, 1::2] = a + b * radius * np.sin(angle)
    return out.reshape(-1)[:n].reshape(shape)


class VAE(torch.nn.Module):
    """A variational autoencoder: z = mu + sigma * eps, eps ~ N(0, 1)."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(16, 32)
        self.mu = torch.nn.Linear(32, 4)
        self.log_var = torch.nn.Linear(32, 4)
        self.decoder = torch.nn.Linear(4, 16)

    def forward(self, x):
        h = torch.tanh(self.encoder(x))
        mu, log_var = self.mu(h), self.log_var(h)
        z = mu + torch.exp(0.5 * log_var) * torch.randn_like(mu)
        kl = -0.5 * torch.mean(1 + log_var - mu * mu - log_var.exp())
        return torch.nn.functional.mse_loss(self.decoder(z), x) + kl


class Denoiser(torch.nn.Module):
    """A diffusion model's training loss: a random time step per sample,
    noise mixed in by the schedule, the noise predicted."""

    T = 10

    def __init__(self):
        super().__init__()
        self.register_buffer("alpha_bar", torch.linspace(0.99, 0.05, self.T))
        self.time = torch.nn.Embedding(self.T, 16)
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32),
                                       torch.nn.SiLU(),
                                       torch.nn.Linear(32, 16))

    def forward(self, x0):
        t = torch.randint(0, self.T, (x0.shape[0],))
        noise = torch.randn_like(x0)
        keep = self.alpha_bar[t].unsqueeze(1)
        xt = keep.sqrt() * x0 + (1 - keep).sqrt() * noise
        return torch.nn.functional.mse_loss(self.net(xt + self.time(t)),
                                            noise)


class GumbelCodes(torch.nn.Module):
    """Discrete latents chosen by F.gumbel_softmax (a dVAE's codebook):
    Gumbel noise, -log of an exponential draw, added to the logits."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(16, 8)
        self.codebook = torch.nn.Linear(8, 16, bias=False)

    def forward(self, x):
        codes = torch.nn.functional.gumbel_softmax(self.encoder(x), tau=0.5)
        return torch.nn.functional.mse_loss(self.codebook(codes), x)


class StochasticBinary(torch.nn.Module):
    """Binary units sampled by torch.bernoulli of computed probabilities,
    trained with the straight-through estimator."""

    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(16, 32)
        self.out = torch.nn.Linear(32, 16)

    def forward(self, x):
        probs = torch.sigmoid(self.hidden(x))
        units = probs + (torch.bernoulli(probs) - probs).detach()
        return torch.nn.functional.mse_loss(self.out(units), x)


class NoisyBlock(torch.nn.Module):
    """Noise injected between two layers (a denoising autoencoder's
    corruption), in an FSDP unit recomputed under activation
    checkpointing: the recomputation draws the same numbers again."""

    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Linear(16, 16)
        self.outer = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = torch.tanh(self.inner(x))
        return self.outer(h + 0.3 * torch.randn_like(h))


class NoisyStack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(NoisyBlock(), NoisyBlock())

    def forward(self, x):
        return torch.nn.functional.mse_loss(self.blocks(x), x)


@contextmanager
def replayed(step: int, key: int, sites: int):
    """torch.randn_like / torch.randint return our draws of `step` for the
    rank or micro-batch with key `key`, the forward's sites in order."""
    site = iter(range(key * sites, (key + 1) * sites))

    def randn_like(x, *args, **kwargs):
        return torch.from_numpy(draws(tuple(x.shape), "normal", step,
                                      next(site)))

    def rand(*size, **kwargs):
        size = tuple(size[0]) if len(size) == 1 and not isinstance(
            size[0], int) else size
        return torch.from_numpy(draws(size, "uniform", step, next(site)))

    def randint(low, high, size, *args, **kwargs):
        u = draws(tuple(size), "uniform", step, next(site), 0.0, high - low)
        return torch.from_numpy(u.astype(np.int64) + low)

    def bernoulli(probs, *args, **kwargs):
        u = draws(tuple(probs.shape), "uniform", step, next(site))
        return (torch.from_numpy(u) < probs).to(probs.dtype)

    def exponential_(x, lambd=1.0, *args, **kwargs):
        u = draws(tuple(x.shape), "uniform", step, next(site))
        with torch.no_grad():
            x.copy_(torch.from_numpy(-np.log(np.float32(1) - u) / lambd))
        return x

    with mock.patch.object(torch, "randn_like", randn_like), \
            mock.patch.object(torch, "rand", rand), \
            mock.patch.object(torch, "randint", randint), \
            mock.patch.object(torch, "bernoulli", bernoulli), \
            mock.patch.object(torch.Tensor, "exponential_", exponential_):
        yield
    assert next(site, None) is None, "a site was not drawn"


# name: (module, random sites, compile options)
CASES = {"vae": (VAE, 1, {}), "denoiser": (Denoiser, 2, {}),
         "gumbel": (GumbelCodes, 1, {}), "binary": (StochasticBinary, 1, {}),
         "noisy_checkpointed": (NoisyStack, 2, dict(
             wrap_kinds=["NoisyBlock"],
             activation_checkpointing="NoisyBlock"))}


@pytest.mark.parametrize("case,ranks,backend", [
    ("vae", 1, "cpu"), ("vae", 2, "cpu"), ("denoiser", 1, "cpu"),
    ("denoiser", 2, "cpu"), ("gumbel", 2, "cpu"), ("binary", 2, "cpu"),
    ("noisy_checkpointed", 2, "cpu"),
    # The CUDA backend's kernel, and each step's key reaching the replayed
    # graph (a key captured once would draw step 2's noise again).
    ("denoiser", 2, "cuda_emu")])
def test_model_with_draws_trains_like_torch_on_our_draws(tmp_path, case,
                                                          ranks, backend):
    runner = emulated_cuda() if backend == "cuda_emu" else None
    model_class, sites, options = CASES[case]
    torch.manual_seed(0)
    module = model_class()
    data = np.random.default_rng(3).standard_normal(
        (NUM_SAMPLES, 16)).astype(np.float32)
    model = from_torch(module, [torch.from_numpy(data[:PER_RANK])], name=case)
    text = model.text()
    assert text.count("nn.random") == sites, text
    got, _ = train_imported(tmp_path, module, model, [data], ranks, "adamw",
                            runner=runner, steps=STEPS, seed=SEED,
                            **options)
    want = torch_losses(module, [data], ranks, "adamw", steps=STEPS,
                        around=lambda step, rank: replayed(step + 1, rank,
                                                           sites))
    for a, b in zip(got, want):
        assert math.isclose(a, b, rel_tol=LOSS_RTOL), (got, want)
    # Not vacuous: the loss depends on the draws (torch's own differ).
    with torch.no_grad():
        x = torch.from_numpy(data[:PER_RANK])
        with replayed(1, 0, sites):
            ours = module(x).item()
        assert not math.isclose(module(x).item(), ours, rel_tol=1e-3)


def masked_autoencoder():
    """transformers' ViTMAEForPreTraining (random weights): each image's
    patches shuffled by the argsort of torch.rand noise, 75% of them
    dropped before the encoder (a gather by the kept ids, repeated over
    the features), restored for the decoder by the inverse permutation;
    the loss is the reconstruction error on the masked patches."""
    transformers = pytest.importorskip("transformers")

    class MaskedAutoencoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mae = transformers.ViTMAEForPreTraining(
                transformers.ViTMAEConfig(
                    hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64,
                    image_size=16, patch_size=4, decoder_hidden_size=32,
                    decoder_num_hidden_layers=1,
                    decoder_num_attention_heads=4,
                    decoder_intermediate_size=64, mask_ratio=0.75,
                    hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0))

        def forward(self, pixel_values):
            return self.mae(pixel_values=pixel_values).loss
    return MaskedAutoencoder()


@pytest.mark.parametrize("ranks", [1, 2])
def test_masked_autoencoder_trains_like_torch_on_our_draws(tmp_path, ranks):
    torch.manual_seed(0)
    module = masked_autoencoder()
    images = np.random.default_rng(3).standard_normal(
        (NUM_SAMPLES, 3, 16, 16)).astype(np.float32)
    model = from_torch(module, [torch.from_numpy(images[:PER_RANK])],
                       name="mae")
    assert model.text().count("nn.random") == 1
    got, _ = train_imported(tmp_path, module, model, [images], ranks,
                            "adamw", steps=STEPS, seed=SEED,
                            wrap_kinds=["ViTMAELayer"])
    want = torch_losses(module, [images], ranks, "adamw", steps=STEPS,
                        around=lambda step, rank: replayed(step + 1, rank,
                                                           1))
    for a, b in zip(got, want):
        assert math.isclose(a, b, rel_tol=LOSS_RTOL), (got, want)
    # Not vacuous: another mask gives another loss.
    with torch.no_grad():
        x = torch.from_numpy(images[:PER_RANK])
        with replayed(1, 0, 1):
            ours = module(x).item()
        assert not math.isclose(module(x).item(), ours, rel_tol=1e-3)


def test_draws_follow_the_documented_generator():
    """The spec's own check: uniform numbers are multiples of 2^-24 in
    [0, 1), normals have mean ~0 and variance ~1 over 40k samples (5
    standard errors: 0.025 and 0.035), and sites and steps differ."""
    u = draws((40000,), "uniform", 1, 0)
    assert u.min() >= 0 and u.max() < 1
    assert np.all(u * 2 ** 24 == np.round(u * 2 ** 24))
    z = draws((40000,), "normal", 1, 0)
    assert abs(z.mean()) < 0.025 and abs(z.var() - 1) < 0.035
    assert not np.array_equal(z, draws((40000,), "normal", 1, 1))
    assert not np.array_equal(z, draws((40000,), "normal", 2, 0))


class WideRandint(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(16, 4)

    def forward(self, x):
        ids = torch.randint(0, 1 << 25, (4,)) % 16  # LINE-WIDE
        return (self.table(ids) * x).sum()


def test_randint_beyond_f32_integers_is_refused_at_its_line():
    """randint draws through an f32 (exact below 2^24): a wider range
    would skip integers, so it is refused, not approximated."""
    with pytest.raises(UnsupportedModelError) as e:
        from_torch(WideRandint(), [torch.zeros(4, 4)])
    message = str(e.value)
    source = open(__file__).read().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "LINE-WIDE" in text)
    assert "randint over [0, 33554432): more than 2^24" in message, message
    assert f'test_random_draws.py", line {line}' in message, message
