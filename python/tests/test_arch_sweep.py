"""The CI slice of the architecture sweep (arch_sweep.py, whose full run
scripts/arch-sweep.sh makes and docs/Python.md keeps): one model of each
kind of construct the sweep added beyond test_hf_import.py's, imported,
trained 5 steps at 2 ranks and compared with torch (losses within 1e-5,
weights at the parity suite's bounds), and two convolutional networks
chaotic in f32 held to torch's own f32 exactness instead."""
from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from arch_sweep import run_arch  # noqa: E402
from test_torch_import import emulated_cuda  # noqa: E402

SLICE = [
    "mistral",      # grouped-query attention, sliding-window config
    "falcon",       # multi-query: fused_qkv[..., [-2], :] (index.Tensor)
    "gpt_neox",     # rotary on half of each head, per-head fused qkv
    "deberta_v2",   # disentangled relative attention: repeat, gather
    "fnet",         # token mixing by Re(fftn): DFT matrices along two dims
    "bart",         # encoder-decoder, two wrapped block kinds
    "timm_vit",     # a timm model (its own attention and patch embed)
    "resnet_hf",    # convolutions, batch norm, max pooling, in-place add_
    "wav2vec2",     # conv1d feature extractor, group norm
    "mixtral",      # mixture of experts: topk, sort, histc, grouped GEMM
    "mixtral_aux",  # ... and its load-balancing loss
    "qwen2_moe",    # a shared expert behind a sigmoid gate
    "deepseek_v3",  # latent attention, group-limited routing (scatter, gather)
    "mamba",        # a state-space model: the scan unrolled, broadcast matmul
    "gemma2",       # tanh soft-capping of scores and logits, eager attention
    "m2m100",       # positions looked up by run-time ids, then detach()
    "beit",         # a relative-position table resized (bilinear)
    "tv_squeezenet",  # max pooling with ceil_mode, torchvision's layout
    "timm_volo",    # outlook attention: F.unfold, F.fold (index_put)
    "dpt",          # transposed convolutions; a LayerNorm the loss never
                    # reaches (no AdamW decay, as torch)
]


@pytest.mark.parametrize("name", SLICE)
def test_architecture_trains_like_torch(tmp_path, name):
    if name.startswith("timm_"):
        pytest.importorskip("timm")
    if name.startswith("tv_"):
        pytest.importorskip("torchvision")
    outcome = run_arch(name, tmp_path)
    print(f"{name}: {outcome.status}, max |loss diff| {outcome.loss_diff}")
    assert outcome.status == "matches", outcome.detail


# Convolutional networks whose f32 training is chaotic (torch's own run
# drifts from float64 beyond 1e-5): they must still match or, failing the
# 1e-5 comparison, have first-step gradients about as exact as torch's
# f32 ones (first_step_gradients.py).
CHAOTIC_SLICE = [
    "tv_resnet18",   # BatchNorm over 4 samples, strided / 1x1 convolutions
    "timm_darknet",  # conv-BN-LeakyReLU: a program PyTorch functionalises
    "tv_r2plus1d",   # video; a ReLU input 8.9e-6 from zero flips in ours
]


@pytest.mark.parametrize("name", CHAOTIC_SLICE)
def test_chaotic_architecture_is_as_exact_as_torch(tmp_path, name):
    pytest.importorskip("timm" if name.startswith("timm_") else "torchvision")
    outcome = run_arch(name, tmp_path)
    print(f"{name}: {outcome.status}, max |loss diff| {outcome.loss_diff}")
    assert outcome.status in ("matches", "chaotic"), outcome.detail


def test_mixture_of_experts_on_the_cuda_emulation(tmp_path):
    """Mixtral's routing and grouped GEMMs through the CUDA backend's
    kernels (device-side segment offsets, index checks) at 2 ranks, on the
    tests' host emulation of the backend and NCCL (fsdprt-run-cuda-emu)."""
    outcome = run_arch("mixtral", tmp_path, runner=emulated_cuda())
    print(f"mixtral on cuda_emu: {outcome.status}, max |loss diff| "
          f"{outcome.loss_diff}")
    assert outcome.status == "matches", outcome.detail
