"""Discrete Fourier transforms of real tensors whose complex result only
`.real` reads: FNet's token mixing, Re(fftn(x, dim=(1, 2))). The IR has
no complex tensors, so fftn stays unevaluated (common._Spectrum) and its
real part is computed directly: the DFT F = C − iS along each dim (C and S
the N x N cosine and sine matrices), so Re(F_1 X F_2) = C_1 X C_2 −
S_1 X S_2 and in general the terms with an even number m of sine factors,
signed (−1)^(m/2). Each factor is a matmul by a constant along one dim
(as FNet runs on TPUs for short sequences): O(N²) per dim instead of an
FFT's O(N log N), and a gradient for free."""
from __future__ import annotations

import math
from typing import Callable, Dict

from ..ir import Value
from .common import _FLOATS, _Spectrum, _Unsupported

_NORMS = {None: lambda n: 1.0, "backward": lambda n: 1.0,
          "ortho": lambda n: 1.0 / math.sqrt(n), "forward": lambda n: 1.0 / n}


def _spectrum(node, x, dims, norm) -> _Spectrum:
    if not isinstance(x, Value) or x.type.dtype != "f32":
        raise _Unsupported("an FFT of other than an f32 run-time tensor")
    if any(u.op != "call_function" or str(u.target) != "aten.real.default"
           for u in node.users):
        raise _Unsupported("an FFT whose complex result is read other "
                           "than by .real (the IR has no complex tensors)")
    if norm not in _NORMS:
        raise _Unsupported(f"an FFT with norm={norm!r}")
    rank = x.type.rank
    dims = tuple(sorted({d % rank for d in dims}))
    size = math.prod(x.type.shape[d] for d in dims)
    return _Spectrum(x, dims, _NORMS[norm](size))


def _fftn(t, node, out, x, s=None, dim=None, norm=None):
    if s is not None:
        raise _Unsupported("fftn with output sizes s (padding or cropping)")
    rank = x.type.rank if isinstance(x, Value) else 0
    return _spectrum(node, x, range(rank) if dim is None else dim, norm)


def _fft(t, node, out, x, n=None, dim=-1, norm=None):
    if n is not None:
        raise _Unsupported("fft with a length n (padding or cropping)")
    return _spectrum(node, x, [dim], norm)


def _dft(n: int):
    """C and S (f32 torch tensors) of the n-point DFT, F = C − iS, their
    angles 2π (jk mod n) / n formed in float64."""
    import torch
    k = torch.arange(n, dtype=torch.int64)
    angle = (torch.outer(k, k) % n).double() * (2 * math.pi / n)
    return torch.cos(angle).float(), torch.sin(angle).float()


def _along(t, x: Value, matrix, dim: int) -> Value:
    """x with a symmetric constant matrix applied along `dim`."""
    last = x.type.rank - 1
    perm = list(range(x.type.rank))
    perm[dim], perm[last] = last, dim
    moved = x if dim == last else t.f.transpose(x, perm)
    y = t.f.linear(moved, t.constant(matrix))  # linear(x, M) = x Mᵀ = x M
    return y if dim == last else t.f.transpose(y, perm)


def _real(t, node, out, z):
    """.real: of a _Spectrum, its real part; of a real tensor, itself."""
    if isinstance(z, Value) and z.type.dtype in _FLOATS:
        return z
    if not isinstance(z, _Spectrum):
        raise _Unsupported("real of a complex tensor other than an FFT's")
    # Terms (value, number of sine factors so far); the last dim takes
    # only the factor that makes the count even.
    terms = [(z.x, 0)]
    for i, dim in enumerate(z.dims):
        cos, sin = _dft(z.x.type.shape[dim])
        last = i == len(z.dims) - 1
        terms = [(_along(t, v, m, dim), sines + odd)
                 for v, sines in terms
                 for m, odd in ((cos, 0), (sin, 1))
                 if not last or (sines + odd) % 2 == 0]
    total = None
    for v, sines in terms:
        signed = v if sines % 4 == 0 else t.f.scale(v, -1.0)
        total = signed if total is None else t.f.add(total, signed)
    return total if z.scale == 1.0 else t.f.scale(total, z.scale)


OPS: Dict[str, Callable] = {
    "fft_fftn.default": _fftn,
    "fft_fft2.default": lambda t, node, out, x, s=None, dim=(-2, -1),
    norm=None: _fftn(t, node, out, x, s, dim, norm),
    "fft_fft.default": _fft,
    "real.default": _real,
}
