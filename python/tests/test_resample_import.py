"""Resizing and the CNN corners MobileNetV3 / SqueezeNet / SegFormer-style
models need, through fsdp_mlir.from_torch: F.interpolate (bilinear and
bicubic with and without align_corners, nearest, nearest-exact; to a size
or by a scale factor) as two linear maps of constant interpolation
matrices, max pooling with ceil_mode, hardswish / hardsigmoid (a
squeeze-excitation gate) and in-place dropout; trained STEPS steps at 2
ranks against plain torch on the same batches.

Run: PYTHONPATH=python:python/tests python3 -m pytest -q \
    python/tests/test_resample_import.py
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from fsdp_mlir import from_torch  # noqa: E402
from fsdp_mlir.torch_import.ops_resample import _interpolation  # noqa: E402
from test_conv_import import check_trains_like_torch  # noqa: E402

F = torch.nn.functional
CLASSES = 5


@pytest.mark.parametrize("mode,align_corners", [
    ("bilinear", False), ("bilinear", True), ("bicubic", False),
    ("bicubic", True), ("nearest", None), ("nearest-exact", None)])
def test_interpolation_matrices_are_torch_s_weights(mode, align_corners):
    """The separable matrices applied in float64 give F.interpolate's float64
    result, up- and down-sizing, by size and by scale factor; 1e-6 admits
    the weights' rounding to f32 (relative 6e-8, times a sum of at most 4
    taps whose weights reach 1.25 in bicubic). Also torch's own rules: a
    dim resized to its size by a scale factor is copied (bilinear,
    nearest), nearest doubles by halving the index, and the nearest modes
    pick pixels in float32 (16 -> 20 by 1.3: a float64 product lands on
    the other side of an integer)."""
    torch.manual_seed(0)
    for (h, w), size, scale in [((5, 7), (9, 4), None), ((4, 4), (8, 8), None),
                                ((6, 3), (6, 3), None), ((5, 7), None, 2.0),
                                ((8, 6), None, 0.5), ((3, 5), (1, 1), None),
                                ((5, 5), None, 1.7), ((5, 10), None, 1.1),
                                ((3, 3), None, 2.2), ((16, 19), None, 1.3),
                                ((20, 23), None, 1.3)]:
        x = torch.randn(2, 3, h, w, dtype=torch.float64)
        kw = {} if align_corners is None else {"align_corners": align_corners}
        want = F.interpolate(x, size=size, scale_factor=scale, mode=mode, **kw)
        oh, ow = want.shape[2:]
        rows = _interpolation(mode, h, oh, bool(align_corners), scale).double()
        cols = _interpolation(mode, w, ow, bool(align_corners), scale).double()
        got = torch.einsum("ih,nchw,jw->ncij", rows, x, cols)
        assert (got - want).abs().max().item() <= 1e-6, (h, w, size, scale)


class SqueezeExcite(torch.nn.Module):
    """MobileNetV3's gate: global mean, 1x1 convs, hardsigmoid."""

    def __init__(self, dim):
        super().__init__()
        self.fc1 = torch.nn.Conv2d(dim, dim // 2, 1)
        self.fc2 = torch.nn.Conv2d(dim // 2, dim, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class Resampled(torch.nn.Module):
    """A stem, a ceil_mode max pool (16 -> 8, where the floor gives 7: SqueezeNet's), a hardswish
    and squeeze-excitation block, in-place dropout (p = 0: identity, as
    torchvision's EfficientNet builds it), then features resized back up
    every way (SegFormer's decode head) and joined."""

    def __init__(self, dim=4):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, dim, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.block = torch.nn.Sequential(
            torch.nn.Conv2d(dim, dim, 3, padding=1), torch.nn.Hardswish(),
            SqueezeExcite(dim), torch.nn.Dropout(0.0, inplace=True))
        self.head = torch.nn.Linear(dim * (3 * 225 + 2 * 64 + 16 * 4 * 4),
                                    CLASSES)

    def forward(self, x, y):
        h = self.block(self.pool(self.stem(x)))  # [N, dim, 8, 8]
        ups = [F.interpolate(h, size=(15, 15), mode="bilinear"),
               F.interpolate(h, size=(15, 15), mode="bicubic",
                             align_corners=True),
               F.interpolate(h, size=(15, 15), mode="nearest-exact"),
               F.interpolate(h, scale_factor=1.0, mode="bilinear"),
               F.interpolate(h, size=(8, 8), mode="nearest"),
               F.interpolate(h, scale_factor=0.6, mode="bilinear",
                             align_corners=True).repeat(1, 16, 1, 1)]
        return F.cross_entropy(
            self.head(torch.cat([u.flatten(1) for u in ups], 1)), y)


def data(rng):
    from test_torch_import import NUM_SAMPLES
    x = rng.standard_normal((NUM_SAMPLES, 3, 16, 16)).astype(np.float32)
    return [x, rng.integers(0, CLASSES, NUM_SAMPLES).astype(np.int64)]


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_resized_features_train_like_torch(tmp_path, optimizer, monkeypatch):
    import test_conv_import
    monkeypatch.setattr(test_conv_import, "data", data)
    check_trains_like_torch(tmp_path, 2, optimizer, Resampled, "Sequential")


def test_resizes_import_as_linear_maps_and_same_size_as_nothing():
    torch.manual_seed(0)
    x = torch.from_numpy(data(np.random.default_rng(3))[0][:2])
    text = from_torch(Resampled(), [x, torch.zeros(2, dtype=torch.int64)]).text()
    # Two maps for each of the four resizes that change the size, one head.
    assert text.count("nn.linear") == 2 * 4 + 1, text
    # ceil_mode: the 16-wide input padded by one -inf column and row.
    assert text.count("value = 0xFFF0000000000000 : f64") == 2, text
    assert "nn.stop_gradient" not in text and "nn.dropout" not in text
