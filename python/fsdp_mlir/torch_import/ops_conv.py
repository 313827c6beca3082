"""Convolutions and poolings: conv1d / conv2d / convolution → nn.conv
(stride, padding including 'same', dilation, groups; conv3d as a sum of
conv2ds, one per kernel tap along one dim), or a linear map of
non-overlapping patches where that is what a conv2d is (ViT's patch
embedding); conv_transpose1d / 2d → nn.conv_transpose plus the bias,
conv_transpose3d as the adjoint of conv3d's taps;
max_pool1d / 2d → nn.max_pool (ceil_mode: the input padded
with -inf where the last window reaches past it), max_pool3d as 2-D
poolings of each time tap then a max over the taps; adaptive_max_pool2d →
nn.max_pool, or a max over picked positions per dim; average poolings
(2-D and 3-D) whose windows tile the input → a mean over each window
(torch's own terms); other avg_pool (overlapping, padded, ceil_mode,
count_include_pad off, divisor_override) → window sums as a depthwise
convolution of ones, divided by torch's divisor of each window; other
adaptive_avg_pool (windows of varying size) → nn.linear maps with
constant averaging matrices, one per spatial dim."""
from __future__ import annotations

from typing import Callable, Dict

from ..ir.forward import per_dim
from .common import _Unsupported, _only_first_output_read
from .ops_layout import _pick
from .ops_pointwise import _elementwise
from .ops_routing import _max_dim


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
    stride, dilation = per_dim(stride, spatial), per_dim(dilation, spatial)
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
        low = high = per_dim(padding, spatial)
    if spatial == 3:
        return _conv3d_by_taps(t, x, w, b, stride, low, high, dilation,
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


def _taps_into_batch(t, x, axis, taps, dilation, stride, depth):
    """For each of `taps` kernel taps along spatial `axis` of x [N, C, a, b,
    c], the slices it reads for `depth` output positions (from
    k·dilation, by the stride), moved into the batch: [N·depth, C, the
    other two spatial dims]."""
    n, c, length = x.type.shape[0], x.type.shape[1], x.type.shape[axis]
    keep = [e for e in (2, 3, 4) if e != axis]
    for k in range(taps):
        start, reads = k * dilation, x
        if not (start == 0 and depth == length):
            reads = t.f.slice(x, axis, start,
                              start + (depth - 1) * stride + 1, stride)
        yield t.reshape(t.transpose(reads, [0, axis, 1] + keep),
                        [n * depth, c] + [x.type.shape[e] for e in keep])


def _out_of_batch(t, y, n, axis):
    """y [N·depth, C', h, w] from _taps_into_batch back to [N, C', ...]
    with depth at `axis`."""
    y = t.reshape(y, [n, y.type.shape[0] // n] + list(y.type.shape[1:]))
    keep = [e for e in (2, 3, 4) if e != axis]
    place = {axis: 1, keep[0]: 3, keep[1]: 4}
    return t.transpose(y, [0, 2] + [place[e] for e in (2, 3, 4)])


def _conv3d_by_taps(t, x, w, b, stride, low, high, dilation, groups):
    """conv3d as a sum of conv2ds, one per kernel tap along one dim d, the
    one with the fewest taps (LambdaNet's (r, r, 1) position lambdas and
    R(2+1)D's factorised kernels need one, a video stem's 3 x 7 x 7
    three): the input padded along d; for tap k the slices it reads for
    every output position along d, moved into the batch and convolved
    with the kernel's k-th plane; the taps' results summed, the bias
    added once. Equal to torch's up to the order of the sum (f32
    rounding)."""
    d = min(range(3), key=lambda e: w.type.shape[2 + e])
    keep = [e for e in range(3) if e != d]
    taps = w.type.shape[2 + d]
    if low[d] or high[d]:
        x = t.f.pad(x, 2 + d, low[d], high[d], 0.0)
    depth = (x.type.shape[2 + d] - dilation[d] * (taps - 1) - 1) \
        // stride[d] + 1
    plane_shape = list(w.type.shape[:2]) + [w.type.shape[2 + e] for e in keep]
    total = None
    for k, batch in enumerate(_taps_into_batch(t, x, 2 + d, taps,
                                               dilation[d], stride[d],
                                               depth)):
        plane = t.reshape(w if taps == 1 else
                          t.f.slice(w, 2 + d, k, k + 1), plane_shape)
        y = t.f.conv(batch, plane, None if b is None or k else t.v(b),
                     stride=[stride[e] for e in keep],
                     pad_low=[low[e] for e in keep],
                     pad_high=[high[e] for e in keep],
                     dilation=[dilation[e] for e in keep], groups=groups)
        total = y if total is None else t.f.add(total, y)
    return _out_of_batch(t, total, x.type.shape[0], 2 + d)


def _conv_transpose(t, node, out, x, w, b=None, stride=1, padding=0,
                    output_padding=0, groups=1, dilation=1):
    """conv_transpose1d / 2d → nn.conv_transpose (the adjoint of the
    convolution of its result), plus the bias over the channels."""
    x, w = t.v(x), t.v(w)
    spatial = len(x.type.shape) - 2
    if spatial not in (1, 2, 3):
        raise _Unsupported(f"transposed convolution over {spatial} spatial "
                           "dims")
    stride, padding, output_padding, dilation = (
        per_dim(a, spatial)
        for a in (stride, padding, output_padding, dilation))
    if spatial == 3:
        y = _conv_transpose3d_by_taps(t, x, w, stride, padding,
                                      output_padding, dilation, groups)
    else:
        y = t.f.conv_transpose(x, w, stride=stride, padding=padding,
                               output_padding=output_padding,
                               dilation=dilation, groups=groups)
    if b is None:
        return y
    return t.f.add(y, t.reshape(t.v(b), [w.type.shape[1] * groups]
                                + [1] * spatial))


def _conv_transpose3d_by_taps(t, x, w, stride, padding, output_padding,
                              dilation, groups):
    """conv_transpose3d (a 3-D U-Net's up-sampling) as the adjoint of
    _conv3d_by_taps: along the dim d with the fewest taps, every input
    frame goes through a 2-D transposed convolution with the kernel's k-th
    plane (the frames moved into the batch); tap k's frames land at output
    rows frame·stride + k·dilation - padding, so they are spread by the
    stride (zeros between), shifted by k·dilation and summed over the
    taps; the padding is cropped off and output_padding's rows past the
    last frame's reach are zeros."""
    d = min(range(3), key=lambda e: w.type.shape[2 + e])
    keep = [e for e in range(3) if e != d]
    taps, frames = w.type.shape[2 + d], x.type.shape[2 + d]
    s, p, dil = stride[d], padding[d], dilation[d]
    axis = 2 + d
    batch = next(_taps_into_batch(t, x, axis, 1, 1, 1, frames))
    reach = (frames - 1) * s + 1 + (taps - 1) * dil  # rows before cropping
    total = None
    for k in range(taps):
        plane = t.reshape(w if taps == 1 else t.f.slice(w, axis, k, k + 1),
                          list(w.type.shape[:2])
                          + [w.type.shape[2 + e] for e in keep])
        y = t.f.conv_transpose(
            batch, plane, stride=[stride[e] for e in keep],
            padding=[padding[e] for e in keep],
            output_padding=[output_padding[e] for e in keep],
            dilation=[dilation[e] for e in keep], groups=groups)
        y = _out_of_batch(t, y, x.type.shape[0], axis)
        if s > 1:  # frame f at row f·s: a zero row block after each frame
            shape = list(y.type.shape)
            y = t.f.pad(t.reshape(y, shape[:axis + 1] + [1]
                                  + shape[axis + 1:]), axis + 1, 0, s - 1)
            y = t.f.slice(t.reshape(y, shape[:axis] + [frames * s]
                                    + shape[axis + 1:]),
                          axis, 0, (frames - 1) * s + 1)
        y = t.f.pad(y, axis, k * dil, (taps - 1 - k) * dil)
        total = y if total is None else t.f.add(total, y)
    size = reach - 2 * p + output_padding[d]
    end = min(reach, p + size)
    if p or end < reach:
        total = t.f.slice(total, axis, p, end)
    if end - p < size:
        total = t.f.pad(total, axis, 0, size - (end - p))
    return total


def _convolution(t, node, out, x, w, b, stride, padding, dilation,
                 transposed, output_padding, groups):
    if transposed:
        return _conv_transpose(t, node, out, x, w, b, stride, padding,
                               output_padding, groups, dilation)
    return _conv(t, node, out, x, w, b, stride, padding, dilation, groups)


def _window_mean(t, x, kernel, what):
    """The mean of each kernel window of x [N, C, *spatial] when the
    windows tile it: x as [N, C, S1/k1, k1, S2/k2, k2, ...], reduced over
    the k dims (exact: the same terms as torch's average)."""
    sizes = list(x.type.shape[2:])
    if any(s % k for s, k in zip(sizes, kernel)):
        raise _Unsupported(f"{what} with windows that do not tile the "
                           f"{'x'.join(map(str, sizes))} input (kernel "
                           f"{kernel})")
    tiles = list(x.type.shape[:2])
    for s, k in zip(sizes, kernel):
        tiles += [s // k, k]
    return t.f.reduce_mean(t.reshape(x, tiles),
                           [3 + 2 * i for i in range(len(sizes))])


def _adaptive_windows(size: int, out: int):
    """torch's adaptive windows over a dim of `size`: window i is
    [floor(i·size/out), ceil((i+1)·size/out))."""
    return [range((i * size) // out, -(-((i + 1) * size) // out))
            for i in range(out)]


def _averaging(size: int, out: int):
    """[out, size]: row i averages adaptive window i."""
    import torch
    m = torch.zeros(out, size)
    for i, window in enumerate(_adaptive_windows(size, out)):
        m[i, window.start:window.stop] = 1.0 / len(window)
    return m


def _adaptive_avg_pool(t, node, out, x, output_size):
    """adaptive_avg_pool2d / 3d: windows that tile the input → their means;
    windows of varying size → the mean is separable: per spatial dim,
    last first, an nn.linear map by a constant averaging matrix (the same
    terms as torch's, summed in another order: f32 rounding apart)."""
    x = t.v(x)
    sizes = list(x.type.shape[2:])
    want = [int(d) for d in out.shape[2:]]
    if all(s % o == 0 for s, o in zip(sizes, want)):
        return _window_mean(t, x, [s // o for s, o in zip(sizes, want)],
                            "adaptive_avg_pool")
    rank = x.type.rank
    for d in reversed(range(2, rank)):
        if sizes[d - 2] == want[d - 2]:
            continue
        swap = list(range(rank))
        swap[d], swap[-1] = swap[-1], swap[d]
        moved = x if d == rank - 1 else t.transpose(x, swap)
        x = t.f.linear(moved, t.constant(_averaging(sizes[d - 2],
                                                    want[d - 2])))
        x = x if d == rank - 1 else t.transpose(x, swap)
    return x


def _adaptive_max_pool2d(t, node, out, x, output_size):
    """(values, indices): windows that tile the input → nn.max_pool with
    stride = kernel (BAT's row and column poolings); windows of varying
    size → per spatial dim, each window's positions picked (padded to the
    longest by repeating its last) and the max over them taken (a max is
    separable, and the gradient reaches the first maximal entry, as
    torch's). The indices are not computed: a model reading them is
    refused."""
    import torch
    _only_first_output_read(node, "adaptive_max_pool2d's indices")
    x = t.v(x)
    sizes = list(x.type.shape[2:])
    want = [int(d) for d in out[0].shape[2:]]
    if all(s % o == 0 for s, o in zip(sizes, want)):
        kernel = [s // o for s, o in zip(sizes, want)]
        return t.f.max_pool(x, kernel, kernel, [0, 0], [1, 1]), None
    for d, (size, o) in enumerate(zip(sizes, want)):
        if size == o:
            continue
        windows = _adaptive_windows(size, o)
        longest = max(len(w) for w in windows)
        picks = torch.tensor([list(w) + [w[-1]] * (longest - len(w))
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


def _avg_pool(t, node, out, x, kernel_size, stride=None, padding=0,
              ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    """avg_pool2d / 3d: windows that tile the input → their means;
    otherwise the window sums, a depthwise convolution by ones, divided by
    torch's divisor of each window."""
    import torch
    x = t.v(x)
    spatial = x.type.rank - 2
    kernel, stride, padding, _ = _pool_geometry(spatial, kernel_size, stride,
                                                padding, 1)
    sizes = list(x.type.shape[2:])
    if (stride == kernel and not any(padding) and not ceil_mode
            and divisor_override is None
            and all(s % k == 0 for s, k in zip(sizes, kernel))):
        return _window_mean(t, x, kernel, "avg_pool")
    c = x.type.shape[1]
    want = [int(d) for d in out.shape[2:]]
    # Padding after: as before, or (ceil_mode) what the last window reads.
    high = [(o - 1) * s + k - size - p if ceil_mode else p
            for o, s, k, size, p in zip(want, stride, kernel, sizes,
                                        padding)]
    ones = t.constant(torch.ones(c, 1, *kernel))
    if spatial == 3:
        sums = _conv3d_by_taps(t, x, ones, None, stride, padding, high,
                               [1] * 3, c)
    else:
        sums = t.f.conv(x, ones, None, stride=stride, pad_low=padding,
                        pad_high=high, dilation=[1] * spatial, groups=c)
    if divisor_override is not None:
        divisor = torch.full(want, float(divisor_override))
    else:
        divisor = torch.ones(want)
        for d, (size, k, s, p, o) in enumerate(zip(sizes, kernel, stride,
                                                   padding, want)):
            along = torch.tensor(_divisors(size, k, s, p, o,
                                           count_include_pad),
                                 dtype=torch.float32)
            divisor = divisor * along.reshape(
                [o if e == d else 1 for e in range(spatial)])
    return _elementwise(t, "div", sums, t.constant(divisor), out)


def _ceil_mode_pad(t, x, out_sizes, kernel, stride, padding, dilation):
    """torch's last ceil_mode window may reach past the padded input: x
    padded with -inf (what the implicit padding holds) as far as that
    window reads."""
    for d, o in enumerate(out_sizes):
        reach = (o - 1) * stride[d] + (kernel[d] - 1) * dilation[d] + 1
        extra = reach - (x.type.shape[2 + d] + 2 * padding[d])
        if extra > 0:
            x = t.f.pad(x, 2 + d, 0, extra, float("-inf"))
    return x


def _pool_geometry(spatial, kernel_size, stride, padding, dilation):
    kernel = per_dim(kernel_size, spatial)
    stride = kernel if not stride else per_dim(stride, spatial)
    return (kernel, stride, per_dim(padding, spatial),
            per_dim(dilation, spatial))


def _max_pool(t, node, out, x, kernel_size, stride=None, padding=0,
              dilation=1, ceil_mode=False):
    x = t.v(x)
    kernel, stride, padding, dilation = _pool_geometry(
        x.type.rank - 2, kernel_size, stride, padding, dilation)
    if ceil_mode:
        x = _ceil_mode_pad(t, x, [int(s) for s in out.shape[2:]], kernel,
                           stride, padding, dilation)
    return t.f.max_pool(x, kernel, stride, padding, dilation)


def _max_pool3d(t, node, out, x, kernel_size, stride=None, padding=0,
                dilation=1, ceil_mode=False):
    """max_pool3d → (values, indices) (S3D, MViT's pooled skips): for each
    tap along the first spatial dim, the slices it reads moved into the
    batch and max-pooled in 2-D; then the max over the taps, whose
    gradient reaches the first maximal entry (the earliest tap: torch's
    scan order). The indices are not computed: a model reading them is
    refused."""
    _only_first_output_read(node, "max_pool3d's indices")
    x = t.v(x)
    kernel, stride, padding, dilation = _pool_geometry(
        3, kernel_size, stride, padding, dilation)
    sizes = [int(s) for s in out[0].shape[2:]]
    if ceil_mode:
        x = _ceil_mode_pad(t, x, sizes, kernel, stride, padding, dilation)
    if padding[0]:
        x = t.f.pad(x, 2, padding[0], padding[0], float("-inf"))
    taps = [t.f.max_pool(batch, kernel[1:], stride[1:], padding[1:],
                         dilation[1:])
            for batch in _taps_into_batch(t, x, 2, kernel[0], dilation[0],
                                          stride[0], sizes[0])]
    if len(taps) > 1:
        stacked = t.f.concat([t.reshape(p, list(p.type.shape) + [1])
                              for p in taps], 4)
        taps = [_max_dim(t, node, None, stacked, 4)[0]]
    return _out_of_batch(t, taps[0], x.type.shape[0], 2), None


OPS: Dict[str, Callable] = {
    "conv1d.default": _conv,
    "conv1d.padding": _conv,
    "conv2d.default": _conv,
    "conv2d.padding": _conv,
    "conv3d.default": _conv,
    "conv3d.padding": _conv,
    "conv_transpose1d.default": _conv_transpose,
    "conv_transpose2d.input": _conv_transpose,
    "conv_transpose3d.input": _conv_transpose,
    "convolution.default": _convolution,
    "max_pool1d.default": _max_pool,
    "max_pool2d.default": _max_pool,
    "max_pool3d_with_indices.default": _max_pool3d,
    "adaptive_avg_pool2d.default": _adaptive_avg_pool,
    "adaptive_avg_pool3d.default": _adaptive_avg_pool,
    "adaptive_max_pool2d.default": _adaptive_max_pool2d,
    "avg_pool2d.default": _avg_pool,
    "avg_pool3d.default": _avg_pool,
}
