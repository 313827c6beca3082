"""Convolutional models through fsdp_mlir.from_torch: nn.conv for conv1d /
conv2d with stride, padding (also 'same' with an even kernel, which pads
one more after than before), dilation and groups (depthwise), a
ConvNeXt-style block (depthwise 7x7 conv, channels-last LayerNorm, an
inverted-bottleneck MLP, a residual), and a ResNet of torchvision's layout
(BasicBlocks, BatchNorm2d in training mode, max and global average
pooling; torchvision itself is not installed here) and a Darknet of
conv-BN-LeakyReLU / Mish units (a program PyTorch functionalises), a
video block (conv3d, max / average / adaptive 3-D pooling, BatchNorm3d),
U-Net-style decoders of transposed convolutions (1-D, 2-D and 3-D),
trained STEPS steps at
1 and 2 ranks
(full-shard, the blocks as units) from the module's weights on the same
batches as plain torch: losses within 1e-5 absolute, the weights at the
parity suite's bounds. The CUDA backend runs the same model on its host
emulation. ViT's patch embedding keeps its GEMM route (no nn.conv);
max pooling is nn.max_pool; average pools whose windows tile the image are
means over the windows.

Run: PYTHONPATH=python:python/tests python3 -m pytest -q \
    python/tests/test_conv_import.py
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from fsdp_mlir import from_torch  # noqa: E402
from fsdp_mlir.torch_import import UnsupportedModelError  # noqa: E402
from test_torch_import import (NUM_SAMPLES, OPTIMIZERS,  # noqa: E402
                               PER_RANK, emulated_cuda, torch_losses,
                               train_imported)
from test_torch_oracle import STEPS, assert_state_matches  # noqa: E402

# Losses: f32 sums in another order than torch's (im2col GEMM blocks vs
# torch's convolution kernels, per-rank means averaged) differ by ulps of
# O(1) losses; 1e-5 absolute is the bound.
LOSS_ATOL = 1e-5
CLASSES = 5
F = torch.nn.functional
# torch warns that its own 'same' padding of an even kernel copies the input.
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same'")


class ConvNeXtBlock(torch.nn.Module):
    """ConvNeXt's block: depthwise 7x7 conv (groups = channels), LayerNorm
    over channels-last, Linear 4x expansion, GELU, Linear back, residual."""

    def __init__(self, dim):
        super().__init__()
        self.dwconv = torch.nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.pwconv1 = torch.nn.Linear(dim, 4 * dim)
        self.pwconv2 = torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.dwconv(x).permute(0, 2, 3, 1)
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
        return x + h.permute(0, 3, 1, 2)


class ConvNet(torch.nn.Module):
    """A strided padded stem and 3x3 stride-2 max pooling (ResNet's), two
    ConvNeXt blocks, a 1x1 conv
    without bias, a 'same' conv of an even kernel, then three heads
    concatenated: a strided dilated grouped conv1d over the flattened
    pixels, a global average pool (ConvNeXt's, adaptive to 1x1) and a 2x2
    average pool; a linear classifier with cross-entropy."""

    def __init__(self, dim=8):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, dim, 3, stride=2, padding=1)
        self.pool = torch.nn.MaxPool2d(3, stride=2, padding=1)
        self.blocks = torch.nn.Sequential(ConvNeXtBlock(dim),
                                          ConvNeXtBlock(dim))
        self.pointwise = torch.nn.Conv2d(dim, dim, 1, bias=False)
        self.same = torch.nn.Conv2d(dim, 4, 2, padding="same")
        self.seq = torch.nn.Conv1d(4, 4, 3, stride=2, padding=1, dilation=2,
                                   groups=2)
        self.head = torch.nn.Linear(4 * 7 + 4 + 4 * 2 * 2, CLASSES)

    def forward(self, x, y):
        h = self.blocks(self.pool(F.relu(self.stem(x))))
        h = torch.tanh(self.same(self.pointwise(h)))
        heads = [self.seq(h.flatten(2)), F.adaptive_avg_pool2d(h, 1),
                 F.avg_pool2d(h, 2)]
        h = torch.cat([t.flatten(1) for t in heads], 1)
        return F.cross_entropy(self.head(h), y)


def conv3x3(cin, cout, stride=1):
    return torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(torch.nn.Module):
    """torchvision's ResNet BasicBlock: conv-BN-ReLU-conv-BN plus the
    input (through a strided 1x1 conv + BN where the shape changes)."""

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = conv3x3(cin, cout, stride)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = conv3x3(cout, cout)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + identity)


class ResNet(torch.nn.Module):
    """torchvision's ResNet layout at small widths: conv 3x3 stem, BN,
    ReLU, 3x3 stride-2 max pooling, a BasicBlock per stage (the second
    strided, with a downsample), global average pooling, a linear head;
    cross-entropy of its logits."""

    def __init__(self, width=8):
        super().__init__()
        self.conv1 = conv3x3(3, width)
        self.bn1 = torch.nn.BatchNorm2d(width)
        self.maxpool = torch.nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, 2 * width, stride=2)
        self.fc = torch.nn.Linear(2 * width, CLASSES)

    def forward(self, x, y):
        h = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        h = self.layer2(self.layer1(h))
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return F.cross_entropy(self.fc(h), y)


class ConvBnAct(torch.nn.Module):
    """YOLO's / CSPDarknet's conv-BN-activation unit."""

    def __init__(self, cin, cout, act, stride=1):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1,
                                    bias=False)
        self.bn = torch.nn.BatchNorm2d(cout)
        self.act = act

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class DarkNet(torch.nn.Module):
    """A Darknet-style backbone: conv-BN-LeakyReLU(0.1) units (YOLO's),
    then conv-BN-Mish (CSPDarknet's), a residual, global average pooling
    and a linear head. LeakyReLU and Mish have no nn op of their own:
    PyTorch decomposes them, which functionalises the whole program, so
    BatchNorm arrives as _native_batch_norm_legit_functional and its
    running statistics as copy_ into the buffers."""

    def __init__(self, width=8):
        super().__init__()
        leaky = torch.nn.LeakyReLU(0.1)
        self.stem = ConvBnAct(3, width, leaky)
        self.down = ConvBnAct(width, 2 * width, leaky, stride=2)
        self.mish = ConvBnAct(2 * width, 2 * width, torch.nn.Mish())
        self.fc = torch.nn.Linear(2 * width, CLASSES)

    def forward(self, x, y):
        h = self.down(self.stem(x))
        h = h + self.mish(h)
        return F.cross_entropy(self.fc(F.adaptive_avg_pool2d(h, 1)
                                       .flatten(1)), y)


def data(rng):
    x = rng.standard_normal((NUM_SAMPLES, 3, 16, 16)).astype(np.float32)
    y = rng.integers(0, CLASSES, NUM_SAMPLES).astype(np.int64)
    return [x, y]


def imported(factory=ConvNet):
    torch.manual_seed(0)
    module = factory()
    batches = data(np.random.default_rng(3))
    example = [torch.from_numpy(d[:PER_RANK]) for d in batches]
    return module, batches, from_torch(module, example,
                                       name=factory.__name__.lower())


def check_trains_like_torch(tmp_path, ranks, optimizer, factory=ConvNet,
                            wrap_kind="ConvNeXtBlock", runner=None):
    module, batches, model = imported(factory)
    got, saved = train_imported(tmp_path, module, model, batches, ranks,
                                optimizer, runner=runner,
                                wrap_kinds=[wrap_kind])
    want = torch_losses(module, batches, ranks, optimizer)
    assert len(got) == STEPS
    worst = max(abs(a - b) for a, b in zip(got, want))
    print(f"{factory.__name__} x{ranks} {optimizer}: max |loss diff| "
          f"{worst:.3g}")
    assert worst <= LOSS_ATOL, (got, want)
    state = {n: p.detach().numpy() for n, p in module.named_parameters()}
    if ranks == 1:  # torch ran one forward per step, as the one rank did
        state.update({n: b.numpy() for n, b in module.named_buffers()})
    adamw = optimizer == "adamw"
    assert_state_matches(
        saved, state, adamw_lr=OPTIMIZERS["adamw"]["lr"] if adamw else None)


@pytest.mark.parametrize("ranks,optimizer",
                         [(1, "sgd"), (2, "sgd"), (2, "adamw")])
def test_convnet_trains_like_torch(tmp_path, ranks, optimizer):
    check_trains_like_torch(tmp_path, ranks, optimizer)


@pytest.mark.parametrize("ranks,optimizer",
                         [(1, "sgd"), (2, "sgd"), (2, "adamw")])
def test_resnet_trains_like_torch(tmp_path, ranks, optimizer):
    """BatchNorm2d in training mode: each rank normalises its own batch (as
    torch without SyncBatchNorm) and updates its running statistics; at 1
    rank they and num_batches_tracked match torch's."""
    check_trains_like_torch(tmp_path, ranks, optimizer, ResNet, "BasicBlock")


@pytest.mark.parametrize("ranks,optimizer", [(1, "sgd"), (2, "adamw")])
def test_darknet_trains_like_torch(tmp_path, ranks, optimizer):
    """Batch norm in a decomposed (functionalised) program: at 1 rank its
    running statistics and num_batches_tracked match torch's too."""
    check_trains_like_torch(tmp_path, ranks, optimizer, DarkNet, "ConvBnAct")


def test_batch_norm_state_starts_as_torch_resets_it():
    """Without the weights file a run starts from the IR's inits: a batch
    norm's weight and running variance at ones (a running variance of 0
    would normalise by 1/sqrt(eps) in eval)."""
    torch.manual_seed(0)
    example = [torch.from_numpy(d[:PER_RANK])
               for d in data(np.random.default_rng(3))]
    text = from_torch(DarkNet(), example, name="darknet").text()
    for line in ("fsdp.param @weight : tensor<8xf32> init <ones>",
                 "fsdp.param @bias : tensor<8xf32> init <zeros>",
                 "fsdp.buffer @running_mean : tensor<8xf32> init <zeros>",
                 "fsdp.buffer @running_var : tensor<8xf32> init <ones>",
                 "fsdp.buffer @num_batches_tracked : tensor<i64> init <zeros>"):
        assert line in text, line


@pytest.mark.parametrize("factory,norms", [(ResNet, 6), (DarkNet, 3)])
def test_eval_mode_normalises_with_running_statistics(factory, norms):
    """DarkNet's program is functionalised (its batch norms arrive as
    _native_batch_norm_legit_no_training)."""
    torch.manual_seed(0)
    module = factory().eval()
    example = [torch.from_numpy(d[:PER_RANK])
               for d in data(np.random.default_rng(3))]
    text = from_torch(module, example, name="net").text()
    assert text.count("nn.batch_norm") == norms, text
    assert "{training}" not in text and "fsdp.set_buffer" not in text, text


def test_cuda_backend_trains_like_torch(tmp_path):
    """The CUDA backend's convolution and max-pooling kernels (forward and
    gradients) and its batch norm, on its host emulation
    (fsdprt-run-cuda-emu)."""
    check_trains_like_torch(tmp_path, 1, "sgd", runner=emulated_cuda())
    (tmp_path / "resnet").mkdir()
    check_trains_like_torch(tmp_path / "resnet", 1, "sgd", ResNet,
                            "BasicBlock", runner=emulated_cuda())


def test_convolutions_import_with_their_geometry():
    """Each convolution is one nn.conv with torch's geometry: 'same' of
    the even 2x2 kernel pads 0 before and 1 after."""
    _, _, model = imported()
    text = model.text()
    assert text.count("nn.conv ") == 6, text
    assert ("pad_low = array<i64: 0, 0>, pad_high = array<i64: 1, 1>"
            in text), text
    assert "groups = 8 : i64" in text and "groups = 2 : i64" in text
    # The pools: [4, 4, 4, 4] as [4, 4, 1, 4, 1, 4] and as [4, 4, 2, 2, 2, 2].
    assert text.count("nn.reduce_mean") == 2, text
    assert "to tensor<4x4x1x4x1x4xf32>" in text, text
    assert ("nn.max_pool %relu {kernel = array<i64: 3, 3>, stride = "
            "array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = "
            "array<i64: 1, 1>} : (tensor<4x8x8x8xf32>) -> "
            "tensor<4x8x4x4xf32>") in text, text


class Pools(torch.nn.Module):
    """Average poolings beyond tiling windows, each flattened: overlapping
    without count_include_pad, strided and padded with ceil_mode, a
    divisor_override, a kernel that does not tile the input, and an
    adaptive pool to a size that does not divide it (windows of 4 and 5)."""

    def forward(self, h):
        heads = [F.avg_pool2d(h, 3, stride=1, padding=1,
                              count_include_pad=False),
                 F.avg_pool2d(h, 3, stride=2, padding=1, ceil_mode=True),
                 F.avg_pool2d(h, 2, divisor_override=3),
                 F.avg_pool2d(h, 3),
                 F.adaptive_avg_pool2d(h, 5)]
        return torch.cat([t.flatten(1) for t in heads], 1)


class PoolNet(torch.nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, dim, 3, padding=1)
        self.pools = Pools()
        self.head = torch.nn.Linear(dim * (256 + 81 + 64 + 25 + 25), CLASSES)

    def forward(self, x, y):
        return F.cross_entropy(self.head(self.pools(self.stem(x))), y)


@pytest.mark.parametrize("ranks,optimizer", [(2, "sgd"), (2, "adamw")])
def test_average_poolings_train_like_torch(tmp_path, ranks, optimizer):
    check_trains_like_torch(tmp_path, ranks, optimizer, PoolNet, "Pools")


def test_average_poolings_lower_to_sums_and_averaging_maps():
    """The general average poolings are a depthwise convolution of ones
    (then torch's divisors) or two linear maps; tiling windows stay a
    mean."""
    text = imported(PoolNet)[2].text()
    assert text.count("groups = 4 : i64") == 4, text
    assert text.count("nn.linear") == 3, text  # 2 averaging maps + head


class VideoBlock(torch.nn.Module):
    """3-D convolutions and poolings as torchvision's video models have
    them, on clips [N, 3, 4, 8, 8]: R3D's padded 3x3x3 stem strided in
    space, R(2+1)D's (1, 3, 3) and (3, 1, 1) factorised kernels, a kernel
    strided, padded and dilated in time, a depthwise one (X3D's), max
    pooling padded in time and with ceil_mode (S3D's), average pooling
    (S3D's head; here padded, without count_include_pad), adaptive
    pooling to one and to windows of varying size, BatchNorm3d."""

    def __init__(self, dim=4):
        super().__init__()
        conv = torch.nn.Conv3d
        self.stem = conv(3, dim, 3, stride=(1, 2, 2), padding=1, bias=False)
        self.norm = torch.nn.BatchNorm3d(dim)
        self.spatial = conv(dim, dim, (1, 3, 3), padding=(0, 1, 1))
        self.temporal = conv(dim, dim, (3, 1, 1), padding=(1, 0, 0))
        self.dilated = conv(dim, dim, (2, 3, 3), stride=(2, 1, 1),
                            padding=(1, 1, 2), dilation=(2, 1, 2))
        self.depthwise = conv(dim, dim, 3, padding=1, groups=dim, bias=False)

    def forward(self, clip):
        # GELU where video models have ReLU: with these batches one of
        # the stem's normalised outputs is 1.2e-8 (float64) from zero at
        # step 4, and a ReLU there flips with the f32 rounding order
        # (torch's and ours differ), moving the stem's gradient by 2e-4.
        h = F.gelu(self.norm(self.stem(clip)))  # [N, 4, 4, 4, 4]
        h = torch.tanh(self.temporal(F.gelu(self.spatial(h))))
        pooled = F.max_pool3d(h, (2, 3, 3), stride=(1, 2, 2), padding=1)
        ceil = F.max_pool3d(h, 2, stride=(1, 3, 3), ceil_mode=True)
        heads = [self.dilated(h), self.depthwise(h), pooled, ceil,
                 F.max_pool3d(h, (1, 2, 2)),  # one tap in time
                 F.avg_pool3d(h, (2, 3, 3), stride=(1, 2, 1),
                              padding=(1, 1, 0), count_include_pad=False),
                 F.adaptive_avg_pool3d(h, 1),
                 F.adaptive_avg_pool3d(h, (3, 2, 3))]
        return torch.cat([t.flatten(1) for t in heads], 1)


class VideoNet(torch.nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.block = VideoBlock(dim)
        self.head = torch.nn.Linear(dim * (2 * 4 * 4 + 64 + 5 * 2 * 2
                                           + 3 * 2 * 2 + 4 * 2 * 2
                                           + 5 * 2 * 2 + 1
                                           + 18),
                                    CLASSES)

    def forward(self, x, y):
        clip = x.reshape(-1, 3, 4, 8, 8)  # the images' pixels as clips
        return F.cross_entropy(self.head(self.block(clip)), y)


@pytest.mark.parametrize("ranks,optimizer",
                         [(1, "sgd"), (2, "sgd"), (2, "adamw")])
def test_video_model_trains_like_torch(tmp_path, ranks, optimizer):
    """conv3d as a sum of conv2ds over one dim's kernel taps, max_pool3d as
    2-D poolings then the max over the taps, avg_pool3d as window sums
    (a depthwise conv3d of ones) over torch's divisors."""
    check_trains_like_torch(tmp_path, ranks, optimizer, VideoNet,
                            "VideoBlock")


class Patches(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Conv2d(3, 8, 4, stride=4)

    def forward(self, x):
        return self.proj(x).sum()


def test_patch_embedding_stays_a_gemm():
    """A conv2d whose stride is its kernel (ViT's patch embedding) keeps
    its linear-of-patches route."""
    text = from_torch(Patches(), [torch.zeros(2, 3, 8, 8)]).text()
    assert "nn.conv " not in text and "nn.linear" in text, text


class UpBlock(torch.nn.Module):
    """U-Net's up step: a 2x2 stride-2 transposed convolution, the skip
    connection concatenated, a 3x3 convolution."""

    def __init__(self, cin, cout):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(cin, cout, 2, stride=2)
        self.conv = conv3x3(2 * cout, cout)

    def forward(self, x, skip):
        return F.relu(self.conv(torch.cat([self.up(x), skip], 1)))


class UNet(torch.nn.Module):
    """An encoder-decoder whose decoder is transposed convolutions: a
    dilated grouped one at the bottom (stride 1, padding 2), U-Net's up
    block, a DCGAN / autoencoder-style 3x3 stride-2 one with padding 1 and
    output_padding 1, then a HiFi-GAN-style ConvTranspose1d (kernel
    2·stride, padding stride/2, no bias) over each channel's flattened
    pixels; a classifier of every output position (a pooled head would not
    see where rows land)."""

    def __init__(self, dim=8):
        super().__init__()
        self.enc = torch.nn.Conv2d(3, dim, 3, padding=1)
        self.down = torch.nn.Conv2d(dim, 2 * dim, 3, stride=2, padding=1)
        self.bottom = torch.nn.ConvTranspose2d(2 * dim, 2 * dim, 3,
                                               padding=2, dilation=2,
                                               groups=4)
        self.up = UpBlock(2 * dim, dim)
        self.up2 = torch.nn.ConvTranspose2d(dim, 4, 3, stride=2, padding=1,
                                            output_padding=1)
        self.wave = torch.nn.ConvTranspose1d(4, 2, 4, stride=2, padding=1,
                                             bias=False)
        self.fc = torch.nn.Linear(2 * 2048, CLASSES)

    def forward(self, x, y):
        skip = F.relu(self.enc(x))
        h = F.relu(self.bottom(F.relu(self.down(skip))))
        h = F.leaky_relu(self.up2(self.up(h, skip)), 0.1)
        h = self.wave(h.flatten(2))
        return F.cross_entropy(self.fc(h.flatten(1)), y)


@pytest.mark.parametrize("ranks,optimizer",
                         [(1, "sgd"), (2, "sgd"), (2, "adamw")])
def test_transposed_convolutions_train_like_torch(tmp_path, ranks, optimizer):
    check_trains_like_torch(tmp_path, ranks, optimizer, UNet, "UpBlock")


def test_transposed_convolutions_on_the_cuda_backend(tmp_path):
    """conv_transpose runs the CUDA backend's convolution gradient kernel
    forward and its convolution and weight-gradient kernels backward."""
    check_trains_like_torch(tmp_path, 1, "sgd", UNet, "UpBlock",
                            runner=emulated_cuda())


def test_transposed_convolutions_import_with_their_geometry():
    """Each transposed convolution is one nn.conv_transpose with torch's
    weight, stride, padding and dilation, its result sized by
    output_padding; the bias is an add over the channels."""
    _, _, model = imported(UNet)
    text = model.text()
    assert text.count("nn.conv_transpose ") == 4, text
    for geometry, types in (
            ("stride = array<i64: 1, 1>, pad_low = array<i64: 2, 2>, "
             "pad_high = array<i64: 2, 2>, dilation = array<i64: 2, 2>, "
             "groups = 4 : i64",
             "(tensor<4x16x8x8xf32>, tensor<16x4x3x3xf32>) -> "
             "tensor<4x16x8x8xf32>"),
            ("stride = array<i64: 2, 2>, pad_low = array<i64: 0, 0>",
             "(tensor<4x16x8x8xf32>, tensor<16x8x2x2xf32>) -> "
             "tensor<4x8x16x16xf32>"),
            ("stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, "
             "pad_high = array<i64: 1, 1>",
             "(tensor<4x8x16x16xf32>, tensor<8x4x3x3xf32>) -> "
             "tensor<4x4x32x32xf32>"),
            ("stride = array<i64: 2>, pad_low = array<i64: 1>",
             "(tensor<4x4x1024xf32>, tensor<4x2x4xf32>) -> "
             "tensor<4x2x2048xf32>")):
        assert any(geometry in line and types in line
                   for line in text.splitlines()
                   if "nn.conv_transpose" in line), (geometry, text)


class Volume(torch.nn.Module):
    """A 3-D U-Net's decoder on volumes (MONAI's up-sampling): a strided
    conv3d down, a 2x2x2 stride-2 ConvTranspose3d up, then a 2x3x3 one in
    two groups whose tapped dim has stride 2, dilation 3 and
    output_padding 2 (two rows past the last frame's reach, zeros), and
    padding and output_padding along the others; a classifier of every
    output position (a pooled head would not see where rows land)."""

    def __init__(self):
        super().__init__()
        self.down = torch.nn.Conv3d(3, 8, 3, stride=2, padding=1)
        self.up = torch.nn.ConvTranspose3d(8, 4, 2, stride=2)
        self.up2 = torch.nn.ConvTranspose3d(
            4, 4, (2, 3, 3), stride=(2, 1, 2), padding=(0, 1, 0),
            output_padding=(2, 0, 1), dilation=(3, 1, 1), groups=2)
        self.fc = torch.nn.Linear(4 * 12 * 6 * 14, CLASSES)

    def forward(self, x, y):
        h = F.relu(self.up(F.relu(self.down(x))))
        h = torch.tanh(self.up2(h))
        return F.cross_entropy(self.fc(h.flatten(1)), y)


def volume_data(rng):
    x = rng.standard_normal((NUM_SAMPLES, 3, 4, 6, 6)).astype(np.float32)
    y = rng.integers(0, CLASSES, NUM_SAMPLES).astype(np.int64)
    return [x, y]


@pytest.mark.parametrize("ranks,optimizer", [(1, "sgd"), (2, "adamw")])
def test_transposed_3d_convolutions_train_like_torch(tmp_path, ranks,
                                                      optimizer):
    torch.manual_seed(0)
    module = Volume()
    batches = volume_data(np.random.default_rng(3))
    model = from_torch(module, [torch.from_numpy(d[:PER_RANK])
                                for d in batches], name="volume")
    text = model.text()
    # Two taps each, a 2-D transposed convolution per tap.
    assert text.count("nn.conv_transpose ") == 4, text
    got, saved = train_imported(tmp_path, module, model, batches, ranks,
                                optimizer)
    want = torch_losses(module, batches, ranks, optimizer)
    worst = max(abs(a - b) for a, b in zip(got, want))
    print(f"Volume x{ranks} {optimizer}: max |loss diff| {worst:.3g}")
    assert worst <= LOSS_ATOL, (got, want)
    assert_state_matches(
        saved, {n: p.detach().numpy() for n, p in module.named_parameters()},
        adamw_lr=OPTIMIZERS["adamw"]["lr"] if optimizer == "adamw"
        else None)


class PastEveryWindow(torch.nn.Module):
    """output_padding 2 with stride 1 and padding 0 (torch allows it below
    the dilation): the added rows lie past every window."""

    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(3, 4, 3, dilation=3,
                                           output_padding=2)

    def forward(self, x):
        return self.up(x).sum()


def test_output_padding_past_every_window_is_named():
    with pytest.raises(UnsupportedModelError) as e:
        from_torch(PastEveryWindow(), [torch.zeros(2, 3, 4, 4)])
    assert ("conv_transpose2d.input: conv_transpose: spatial dim 0: "
            "output_padding 2 is at least the stride 1 and above the padding "
            "0: the rows it adds lie past every window") in str(e.value), \
        str(e.value)


class NormOnly(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(3, **options)

    def forward(self, x):
        return self.bn(x).sum()


def test_batch_norm_without_affine_uses_unit_weights():
    """affine=False: the weight a constant of ones, the bias of zeros;
    the statistics still go back into the buffers."""
    text = from_torch(NormOnly(affine=False),
                      [torch.zeros(2, 3, 4, 4)]).text()
    assert text.count("nn.batch_norm") == 1, text
    assert "{training}" in text and text.count("fsdp.set_buffer") == 3, text
    assert "fsdp.param" not in text, text


class BatchStatistics(torch.nn.Module):
    """Normalisations by the batch's own statistics, with no running ones:
    BatchNorm2d(track_running_stats=False), InstanceNorm2d with its affine
    (style-transfer and GAN generators; torch runs it as a batch norm of
    [1, N·C, H, W]) and NF-ResNet's weight-standardised convolution (timm's
    ScaledStdConv2d: F.batch_norm over the weight's rows, a gain as its
    weight)."""

    def __init__(self, width=8):
        super().__init__()
        # No bias before a batch norm: its exact gradient is zero, which
        # AdamW would turn into lr-sized steps of rounding noise's sign.
        self.conv = torch.nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(width, track_running_stats=False)
        self.norm = torch.nn.InstanceNorm2d(width, affine=True)
        self.standardised = torch.nn.Parameter(
            torch.randn(width, width, 3, 3))
        self.gain = torch.nn.Parameter(torch.full((width,), 0.2))
        self.fc = torch.nn.Linear(width, CLASSES)

    def forward(self, x, y):
        h = F.relu(self.norm(F.relu(self.bn(self.conv(x)))))
        w = F.batch_norm(self.standardised.reshape(1, self.gain.numel(), -1),
                         None, None, weight=self.gain, training=True,
                         momentum=0.0, eps=1e-6)
        h = F.conv2d(h, w.reshape_as(self.standardised), padding=1)
        return F.cross_entropy(self.fc(F.adaptive_avg_pool2d(h, 1)
                                       .flatten(1)), y)


def test_batch_norm_without_running_statistics_normalises_channel_rows():
    """A program PyTorch leaves whole (batch_norm.default with no running
    statistics) takes the same route as the functionalised one below."""
    text = from_torch(NormOnly(track_running_stats=False),
                      [torch.zeros(2, 3, 4, 4)]).text()
    assert "nn.batch_norm" not in text and "fsdp.set_buffer" not in text
    assert text.count("nn.layer_norm") == 1, text
    assert "(tensor<3x32xf32>" in text, text  # 3 channels of 2·4·4 values


@pytest.mark.parametrize("ranks,optimizer", [(1, "sgd"), (2, "adamw")])
def test_batch_statistics_norms_train_like_torch(tmp_path, ranks, optimizer):
    check_trains_like_torch(tmp_path, ranks, optimizer, BatchStatistics,
                            "InstanceNorm2d")
