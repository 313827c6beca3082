"""Resizing an image: F.interpolate's bilinear, bicubic, nearest and
nearest-exact modes over [N, C, H, W] (upsample_*2d) → two nn.linear maps
with constant interpolation matrices, one per spatial dim, as torch's
kernels weigh the source pixels; a dim the resize copies (bilinear or
nearest to its own size, whatever the scale factor: BEiT's
relative-position table, resized to the window it already has) needs no
map."""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional

import numpy as np

from .common import _Unsupported, _float

# torch's cubic convolution coefficient (upsample_bicubic2d's A).
_CUBIC_A = -0.75


def _source_scale(size: int, out: int, align_corners: bool,
                  scale: Optional[float]) -> float:
    """torch's area_pixel_compute_scale: source pixels per output pixel."""
    if align_corners:
        return (size - 1) / (out - 1) if out > 1 else 0.0
    return 1.0 / scale if scale else size / out


def _cubic_weights(t: float) -> List[float]:
    """torch's get_cubic_upsample_coefficients for the offset t in [0, 1)
    of the pixels at -1, 0, 1, 2."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _nearest_source(mode: str, i: int, size: int, out: int,
                    scale: Optional[float]) -> int:
    """torch's nearest_idx / nearest_exact_idx: in float32, as its kernels
    compute them (a float64 product can land on the other side of an
    integer); nearest copies a dim resized to its size or doubles it."""
    if mode == "nearest" and out == size:
        return i
    if mode == "nearest" and out == 2 * size:
        return i >> 1
    ratio = (np.float32(1.0 / scale) if scale
             else np.float32(size) / np.float32(out))
    offset = np.float32(0.5 if mode == "nearest-exact" else 0.0)
    return min(int(np.floor((np.float32(i) + offset) * ratio)), size - 1)


def _interpolation(mode: str, size: int, out: int, align_corners: bool,
                   scale: Optional[float]):
    """[out, size]: row i holds the weights torch's `mode` gives each source
    pixel of a dim of `size` for output pixel i. Bilinear, like nearest,
    copies a dim resized to its own size, whatever the scale factor."""
    import torch
    if mode == "bilinear" and out == size:
        return torch.eye(size)
    m = torch.zeros(out, size, dtype=torch.float64)
    ratio = _source_scale(size, out, align_corners, scale)
    for i in range(out):
        if mode in ("nearest", "nearest-exact"):
            m[i, _nearest_source(mode, i, size, out, scale)] = 1.0
            continue
        src = i * ratio if align_corners else (i + 0.5) * ratio - 0.5
        if mode == "bilinear":
            src = max(src, 0.0) if not align_corners else src
            lo = min(int(math.floor(src)), size - 1)
            hi = min(lo + 1, size - 1)
            frac = src - lo
            m[i, lo] += 1.0 - frac
            m[i, hi] += frac
        else:  # bicubic: four taps, clamped to the border
            lo = int(math.floor(src))
            for k, w in enumerate(_cubic_weights(src - lo)):
                m[i, min(max(lo - 1 + k, 0), size - 1)] += w
    return m.to(torch.float32)


def _resize(mode: str):
    def build(t, node, out, x, output_size=None, *args, **kwargs):
        # The overloads: (.vec) output_size, [align_corners,] scale_factors;
        # (.default) output_size, [align_corners,] scales_h, scales_w.
        align_corners = False
        if mode in ("bilinear", "bicubic"):
            align_corners = bool(args[0] if args else
                                 kwargs.get("align_corners", False))
            args = args[1:]
        if args and isinstance(args[0], (list, tuple)):
            scales = list(args[0])
        elif kwargs.get("scale_factors"):
            scales = list(kwargs["scale_factors"])
        else:
            scales = list(args[:2]) or [kwargs.get("scales_h"),
                                        kwargs.get("scales_w")]
        scales = (scales + [None, None])[:2]
        x = _float(t, t.v(x), mode)
        if x.type.rank != 4:
            raise _Unsupported(f"{mode} resize of a rank-{x.type.rank} "
                               "tensor (only [N, C, H, W])")
        import torch
        h, w = x.type.shape[2:]
        oh, ow = (int(d) for d in out.shape[2:])
        dtype = {"f32": torch.float32, "bf16": torch.bfloat16,
                 "f16": torch.float16}[x.type.dtype]
        # Separable: along W as a linear map of the rows, then along H of
        # the transposed result (torch weighs the same pixels by the same
        # factors, summed in another order: f32 rounding apart). A dim the
        # resize copies needs no map.
        for dim, size, new_size, scale in ((3, w, ow, scales[1]),
                                           (2, h, oh, scales[0])):
            m = _interpolation(mode, size, new_size, align_corners, scale)
            if new_size == size and torch.equal(m, torch.eye(size)):
                continue
            perm = [0, 1, 3, 2] if dim == 2 else None
            moved = t.transpose(x, perm) if perm else x
            moved = t.f.linear(moved, t.constant(m.to(dtype)))
            x = t.transpose(moved, perm) if perm else moved
        return x
    return build


OPS: Dict[str, Callable] = {
    "upsample_bilinear2d.vec": _resize("bilinear"),
    "upsample_bilinear2d.default": _resize("bilinear"),
    "upsample_bicubic2d.vec": _resize("bicubic"),
    "upsample_bicubic2d.default": _resize("bicubic"),
    "upsample_nearest2d.vec": _resize("nearest"),
    "upsample_nearest2d.default": _resize("nearest"),
    "_upsample_nearest_exact2d.vec": _resize("nearest-exact"),
    "_upsample_nearest_exact2d.default": _resize("nearest-exact"),
}
