"""Convolutions and poolings: conv1d / conv2d / convolution → nn.conv
(stride, padding including 'same', dilation, groups; a conv3d with a
kernel of 1 along a dim, as a conv2d of each slice), or a linear map of
non-overlapping patches where that is what a conv2d is (ViT's patch
embedding); max_pool1d / 2d → nn.max_pool (ceil_mode: the input padded
with -inf where the last window reaches past it); average poolings whose
windows tile the image (adaptive_avg_pool2d to a size dividing the
input's, avg_pool2d with stride = kernel, unpadded) → a mean over each
window (torch's own terms); other avg_pool2d (overlapping, padded,
ceil_mode, count_include_pad off, divisor_override) → window sums as a
depthwise nn.conv with a weight of ones, divided by torch's divisor of
each window; other adaptive_avg_pool2d (windows of varying size) → two
nn.linear maps with constant averaging matrices, one per spatial dim."""
from __future__ import annotations

import operator
from typing import Callable, Dict

from .common import _Unsupported
from .ops_layout import _pick
from .ops_pointwise import _elementwise
from .ops_routing import _max_dim


def _per_dim(v, spatial: int):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * spatial if len(v) == 1 else v


def _patches(t, x, w, b):
    """A conv2d whose stride equals its kernel, unpadded (ViT's patch
    embedding), is a linear map of non-overlapping patches: x [B, C, H, W]
    → patches [B·h·w, C·kh·kw] (C, kh, kw order, as the weight's) → one
    GEMM with the weight as [O, C·kh·kw] → [B, O, h, w]."""
    o, c, kh, kw = w.type.shape
    bsz, _, height, width = x.type.shape
    h, wd = height // kh, width // kw
    patches = t.reshape(x, [bsz, c, h, kh, wd, kw])
    patches = t.transpose(patches, [0, 2, 4, 1, 3, 5])
    patches = t.reshape(patches, [bsz * h * wd, c * kh * kw])
    y = t.f.linear(patches, t.reshape(w, [o, c * kh * kw]),
                   None if b is None else t.v(b))
    y = t.reshape(y, [bsz, h, wd, o])
    return t.transpose(y, [0, 3, 1, 2])


def _conv(t, node, out, x, w, b=None, stride=1, padding=0, dilation=1,
          groups=1):
    """conv1d / conv2d with PyTorch's padding: per-dim sizes, 'valid', or
    'same' (stride 1; an even receptive field pads one more after than
    before, as torch does)."""
    x, w = t.v(x), t.v(w)
    spatial = len(x.type.shape) - 2
    stride, dilation = _per_dim(stride, spatial), _per_dim(dilation, spatial)
    kernel = list(w.type.shape[2:])
    if padding == "valid":
        low = high = [0] * spatial
    elif padding == "same":
        if any(s != 1 for s in stride):
            raise _Unsupported(f"padding='same' with stride {stride}")
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        low = [p // 2 for p in total]
        high = [p - lo for p, lo in zip(total, low)]
    else:
        low = high = _per_dim(padding, spatial)
    if spatial == 3:
        return _conv3d_as_2d(t, x, w, b, stride, low, high, dilation,
                             groups)
    if spatial not in (1, 2):
        raise _Unsupported(f"convolution over {spatial} spatial dims")
    # A 1x1 kernel is left to nn.conv: one GEMM on the input as it lies,
    # where the patch route would transpose it twice.
    if (spatial == 2 and stride == kernel != [1, 1] and low == [0, 0]
            and high == [0, 0] and dilation == [1, 1] and groups == 1
            and x.type.shape[2] % kernel[0] == 0
            and x.type.shape[3] % kernel[1] == 0):
        return _patches(t, x, w, b)
    return t.f.conv(x, w, None if b is None else t.v(b), stride=stride,
                    pad_low=low, pad_high=high, dilation=dilation,
                    groups=groups)


def _conv3d_as_2d(t, x, w, b, stride, low, high, dilation, groups):
    """A conv3d whose kernel is 1 along a dim it neither strides nor pads
    (LambdaNet's (r, r, 1) position lambdas) is a conv2d of each slice
    along that dim: the dim moved into the batch and back."""
    unit = [d for d in range(3) if w.type.shape[2 + d] == 1
            and stride[d] == 1 and low[d] == 0 and high[d] == 0]
    if not unit:
        raise _Unsupported("convolution over 3 spatial dims (other than "
                           "one with a kernel of 1 along a dim)")
    d = unit[0]
    keep = [e for e in range(3) if e != d]
    n, c = x.type.shape[:2]
    depth = x.type.shape[2 + d]
    slices = t.reshape(t.transpose(x, [0, 2 + d, 1] + [2 + e for e in keep]),
                       [n * depth, c] + [x.type.shape[2 + e] for e in keep])
    w2 = t.reshape(w, list(w.type.shape[:2])
                   + [w.type.shape[2 + e] for e in keep])
    y = t.f.conv(slices, w2, None if b is None else t.v(b),
                 stride=[stride[e] for e in keep],
                 pad_low=[low[e] for e in keep],
                 pad_high=[high[e] for e in keep],
                 dilation=[dilation[e] for e in keep], groups=groups)
    y = t.reshape(y, [n, depth] + list(y.type.shape[1:]))
    # y is [N, D_d, O, h, w]: O back to dim 1, D_d to its own place.
    place = {d: 1, keep[0]: 3, keep[1]: 4}
    return t.transpose(y, [0, 2] + [place[e] for e in range(3)])


def _convolution(t, node, out, x, w, b, stride, padding, dilation,
                 transposed, output_padding, groups):
    if transposed:
        raise _Unsupported("transposed convolution (conv_transpose)")
    return _conv(t, node, out, x, w, b, stride, padding, dilation, groups)


def _window_mean(t, x, kernel, what):
    """The mean of each kernel window of x [N, C, H, W] when the windows
    tile it: x as [N, C, H/kh, kh, W/kw, kw], reduced over the kh and kw
    dims (exact: the same terms as torch's average)."""
    n, c, h, w = x.type.shape
    kh, kw = kernel
    if h % kh or w % kw:
        raise _Unsupported(f"{what} with windows that do not tile the "
                           f"{h}x{w} input (kernel {kernel})")
    tiles = t.reshape(x, [n, c, h // kh, kh, w // kw, kw])
    return t.f.reduce_mean(tiles, [3, 5])


def _averaging(size: int, out: int):
    """[out, size]: row i averages torch's adaptive window i of a dim of
    `size`, [floor(i·size/out), ceil((i+1)·size/out))."""
    import torch
    m = torch.zeros(out, size)
    for i in range(out):
        lo, hi = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def _adaptive_avg_pool2d(t, node, out, x, output_size):
    x = t.v(x)
    n, c, h, w = x.type.shape
    size = [d if o is None else o
            for d, o in zip((h, w), _per_dim(output_size, 2))]
    if h % size[0] == 0 and w % size[1] == 0:
        return _window_mean(t, x, [h // size[0], w // size[1]],
                            "adaptive_avg_pool2d")
    # Windows of varying size: the mean over a window is separable, a
    # mean over its columns then over its rows (the same terms as torch's,
    # summed in another order: f32 rounding apart).
    rows = t.f.linear(x, t.constant(_averaging(w, size[1])))  # [N,C,H,OW]
    cols = t.f.linear(t.transpose(rows, [0, 1, 3, 2]),
                      t.constant(_averaging(h, size[0])))  # [N,C,OW,OH]
    return t.transpose(cols, [0, 1, 3, 2])


def _adaptive_max_pool2d(t, node, out, x, output_size):
    """(values, indices): windows that tile the input → nn.max_pool with
    stride = kernel (BAT's row and column poolings); windows of varying
    size → per spatial dim, each window's positions picked (padded to the
    longest by repeating its last) and the max over them taken (a max is
    separable, and the gradient reaches the first maximal entry, as
    torch's). The indices are not computed: a model reading them is
    refused."""
    import torch
    if any(int(u.args[1]) != 0 for u in node.users
           if u.target is operator.getitem):
        raise _Unsupported("adaptive_max_pool2d's indices read")
    x = t.v(x)
    sizes = list(x.type.shape[2:])
    want = [int(d) for d in out[0].shape[2:]]
    if all(s % o == 0 for s, o in zip(sizes, want)):
        kernel = [s // o for s, o in zip(sizes, want)]
        return t.f.max_pool(x, kernel, kernel, [0, 0], [1, 1]), None
    for d, (size, o) in enumerate(zip(sizes, want)):
        if size == o:
            continue
        windows = [list(range((i * size) // o, -(-((i + 1) * size) // o)))
                   for i in range(o)]
        longest = max(len(w) for w in windows)
        picks = torch.tensor([w + [w[-1]] * (longest - len(w))
                              for w in windows])
        shape = list(x.type.shape)
        shape[2 + d:3 + d] = [o, longest]
        x = t.reshape(_pick(t, x, 2 + d, t.constant(picks.reshape(-1))),
                      shape)
        x = _max_dim(t, node, None, x, 3 + d)[0]
    return x, None


def _divisors(size, kernel, stride, pad, count, include_pad):
    """torch's avg_pool divisor of each of `count` windows along a dim:
    the window's length clipped to the padded input, or to the input
    itself without count_include_pad."""
    out = []
    for i in range(count):
        start = i * stride - pad
        end = min(start + kernel, size + pad)
        length = end - start
        if not include_pad:
            length = min(end, size) - max(start, 0)
        out.append(length)
    return out


def _avg_pool2d(t, node, out, x, kernel_size, stride=None, padding=0,
                ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    import torch
    x = t.v(x)
    kernel = _per_dim(kernel_size, 2)
    stride = kernel if not stride else _per_dim(stride, 2)
    padding = _per_dim(padding, 2)
    if (stride == kernel and padding == [0, 0] and not ceil_mode
            and divisor_override is None
            and x.type.shape[2] % kernel[0] == 0
            and x.type.shape[3] % kernel[1] == 0):
        return _window_mean(t, x, kernel, "avg_pool2d")
    n, c, h, w = x.type.shape
    oh, ow = (int(d) for d in node.meta["val"].shape[2:])
    # Padding after: as before, or (ceil_mode) what the last window reads.
    high = [(o - 1) * s + k - size - p if ceil_mode else p
            for o, s, k, size, p in zip((oh, ow), stride, kernel, (h, w),
                                        padding)]
    sums = t.f.conv(x, t.constant(torch.ones(c, 1, *kernel)), None,
                    stride=stride, pad_low=padding, pad_high=high,
                    dilation=[1, 1], groups=c)
    if divisor_override is not None:
        divisor = torch.full((oh, ow), float(divisor_override))
    else:
        dh, dw = (_divisors(size, k, s, p, o, count_include_pad)
                  for size, k, s, p, o in zip((h, w), kernel, stride,
                                              padding, (oh, ow)))
        divisor = torch.tensor(dh, dtype=torch.float32)[:, None] * \
            torch.tensor(dw, dtype=torch.float32)[None, :]
    return _elementwise(t, "div", sums, t.constant(divisor), out)


def _max_pool(t, node, out, x, kernel_size, stride=None, padding=0,
              dilation=1, ceil_mode=False):
    x = t.v(x)
    spatial = len(x.type.shape) - 2
    kernel = _per_dim(kernel_size, spatial)
    stride = kernel if not stride else _per_dim(stride, spatial)
    padding, dilation = (_per_dim(padding, spatial),
                         _per_dim(dilation, spatial))
    if ceil_mode:
        # torch's last window may reach past the padded input: pad it with
        # -inf (what the implicit padding holds) as far as that window reads.
        for d, o in enumerate(int(s) for s in out.shape[2:]):
            reach = (o - 1) * stride[d] + (kernel[d] - 1) * dilation[d] + 1
            extra = reach - (x.type.shape[2 + d] + 2 * padding[d])
            if extra > 0:
                x = t.f.pad(x, 2 + d, 0, extra, float("-inf"))
    return t.f.max_pool(x, kernel, stride, padding, dilation)


OPS: Dict[str, Callable] = {
    "conv1d.default": _conv,
    "conv1d.padding": _conv,
    "conv2d.default": _conv,
    "conv2d.padding": _conv,
    "conv3d.default": _conv,
    "conv3d.padding": _conv,
    "convolution.default": _convolution,
    "max_pool1d.default": _max_pool,
    "max_pool2d.default": _max_pool,
    "adaptive_avg_pool2d.default": _adaptive_avg_pool2d,
    "adaptive_max_pool2d.default": _adaptive_max_pool2d,
    "avg_pool2d.default": _avg_pool2d,
}
