"""Element-wise ops and masks: arithmetic with broadcasting or by a
scalar (add, sub and mul of integer tensors too, with torch's type
promotion), the comparisons, where / masked_fill and the logical ops of
masks (run-time bool tensors are f32 masks of 1 and 0: common._as_f32),
the activations and math functions, dropout, and casts (to / _to_copy,
between any of the float and integer types)."""
from __future__ import annotations

import math
from typing import Callable, Dict

from ..ir import TensorType, Value
from .common import (_FLOATS, _INTEGERS, _Unsupported, _as_f32, _dtype,
                     _float, _is_tensor, _keep_either, _mask_not,
                     _only_first_output_read, _out_type, _scalar, _shape)


def _compact(t, c, other: Value, out):
    """The constant `c` reduced to size 1 along the dimensions where it
    repeats, as long as broadcasting with `other` still gives `out`."""
    import torch
    shape = _shape(out)
    # A mask op's bool result is an f32 mask here.
    c = c.to(torch.float32 if out.dtype == torch.bool else out.dtype)
    rank = len(shape)
    oshape = [1] * (rank - other.type.rank) + list(other.type.shape)
    for d in range(c.dim()):
        full = rank - c.dim() + d
        if c.shape[d] > 1 and oshape[full] == shape[full]:
            first = c.narrow(d, 0, 1)
            if torch.equal(c, first.expand_as(c)):
                c = first
    return c


_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
_INTEGER_OPS = ("add", "sub", "mul")


def _promoted(t, op: str, v, out):
    """A run-time operand in the result's type, as torch promotes (an id
    tensor times a float, an i32 mask plus an i64 count; a logical op's
    bool result is an f32 mask); integer results only from add, sub and
    mul."""
    import torch
    if not isinstance(v, Value) or op in _COMPARISONS:
        return v
    want = "f32" if out.dtype == torch.bool else _dtype(out.dtype)
    if want not in _FLOATS and op not in _INTEGER_OPS:
        raise _Unsupported(f"{op} of integer tensors computed at run time")
    return v if v.type.dtype == want else t.f.cast(v, want)


def _elementwise(t, op: str, a, b, out):
    """a `op` b with at most one side constant or a Python scalar."""
    if not isinstance(a, Value) and not isinstance(b, Value):
        raise _Unsupported(f"{op} without a run-time operand")
    # 0-d constant tensors act as scalars.
    a = a.item() if _is_tensor(a) and a.dim() == 0 else a
    b = b.item() if _is_tensor(b) and b.dim() == 0 else b
    a, b = _promoted(t, op, a, out), _promoted(t, op, b, out)
    f = t.f
    build = ((lambda p, q: f.compare(op, p, q)) if op in _COMPARISONS
             else getattr(f, op))
    if isinstance(a, Value) and isinstance(b, Value):
        # Both of one type now: the result's, or f32 for a comparison.
        return build(a, b) if op in _INTEGER_OPS else build(
            _float(t, a, op), b)
    x, s = (a, b) if isinstance(a, Value) else (b, a)
    if x.type.dtype in ("i32", "i64"):
        return _integer_by_scalar(t, op, x, s, x is a, out)
    _float(t, x, op)
    if _is_tensor(s):  # a constant tensor: broadcast by the op
        c = t.constant(_compact(t, s, x, out))
        return build(a if x is a else c, b if x is b else c)
    if isinstance(s, bool) or not isinstance(s, (int, float)):
        raise _Unsupported(f"{op} with a {type(s).__name__} operand")
    s = float(s)
    if op in ("maximum", "minimum", "fmod") + _COMPARISONS:  # no scalar form
        c = _scalar(t, s, x.type.dtype)
        return build(a if x is a else c, b if x is b else c)
    if op == "mul":
        return x if s == 1.0 else f.scale(x, s)
    if op == "div":
        if x is a:
            return x if s == 1.0 else f.scale(x, 1.0 / s)
        return f.div(_scalar(t, s, x.type.dtype), x)
    if op == "add":
        return x if s == 0.0 else f.add(x, _scalar(t, s, x.type.dtype))
    # sub
    if x is a:
        return x if s == 0.0 else f.add(x, _scalar(t, -s, x.type.dtype))
    return f.add(f.scale(x, -1.0), _scalar(t, s, x.type.dtype))


def _integer_by_scalar(t, op: str, x: Value, s, x_first: bool, out):
    """add / sub / mul of an integer tensor and an integer scalar or
    constant (RoBERTa's `+ past_key_values_length`, `+ padding_idx`)."""
    if _is_tensor(s):
        c = t.constant(_compact(t, s, x, out))
    elif isinstance(s, int) and not isinstance(s, bool):
        if (op in ("add", "sub") and s == 0) or (op == "mul" and s == 1):
            return x
        c = _scalar(t, s, x.type.dtype)
    else:
        raise _Unsupported(f"{op} of an integer tensor and a "
                           f"{type(s).__name__}")
    return getattr(t.f, op)(x if x_first else c, c if x_first else x)


def _binary(op):
    def build(t, node, out, a, b, alpha=1):
        if alpha != 1:
            if isinstance(b, (int, float)):
                b = b * alpha
            else:
                b = (t.f.scale(b, float(alpha)) if isinstance(b, Value)
                     else b * alpha)
        return _elementwise(t, op, a, b, out)
    return build


def _compare(op):
    def build(t, node, out, a, b):
        return _elementwise(t, op, _as_f32(t, a), _as_f32(t, b), out)
    return build


def _where(t, node, out, cond, x, y):
    """torch.where in the result's type."""
    m = _as_f32(t, cond)
    if not isinstance(m, Value):  # a constant condition, run-time branches
        m = t.constant(m)
    return _keep_either(t, m, x, y, _dtype(out.dtype))


def _masked_fill(t, node, out, x, mask, value):
    return _where(t, node, out, mask, value, x)


def _on_masks(what, build):
    """A logical op of masks (bitwise ~, &, | of bool tensors too)."""
    def handler(t, node, out, *args):
        import torch
        if out.dtype != torch.bool:
            raise _Unsupported(f"{what} of {str(out.dtype)[6:]} tensors "
                               "(only of bool masks)")
        return build(t, out, *[_as_f32(t, a) for a in args])
    return handler


_logical_not = _on_masks("not", lambda t, out, x: _mask_not(t, x))
_logical_and = _on_masks(
    "and", lambda t, out, a, b: _elementwise(t, "mul", a, b, out))
_logical_or = _on_masks(
    "or", lambda t, out, a, b: _elementwise(t, "maximum", a, b, out))


def _rsub(t, node, out, x, other, alpha=1):
    """other - alpha * x."""
    if alpha != 1:
        x = t.f.scale(x, float(alpha)) if isinstance(x, Value) else x * alpha
    return _elementwise(t, "sub", other, x, out)


def _neg(t, node, out, x):
    if x.type.dtype in _INTEGERS:
        return t.f.sub(_scalar(t, 0, x.type.dtype), x)
    return t.f.scale(_float(t, x, "neg"), -1.0)


def _gelu(t, node, out, x, approximate="none"):
    return t.f.gelu(x, approximate=approximate)


def _dropout(t, node, out, x, p, train):
    return t.f.dropout(t.v(x), p) if train and p else x


def _native_dropout(t, node, out, x, p, train):
    """native_dropout → (output, mask), as a functionalised program has
    dropout (S3D's classifier); the mask is not computed: a model reading
    it is refused."""
    _only_first_output_read(node, "native_dropout's mask")
    return _dropout(t, node, out, x, p, train is not False), None


def _bernoulli(t, node, out, x, p=0.5, generator=None):
    """A fresh tensor's bernoulli_(p): stochastic depth's per-sample keep
    mask (torchvision's StochasticDepth, timm's DropPath: empty([N, 1, ...])
    .bernoulli_(keep), then / keep, times the branch). 1 with probability p
    from our counter-based dropout masks (nn.dropout of ones at rate 1 − p,
    times p), not torch's generator; keyed per site, step and rank as
    dropout's are."""
    import torch
    if generator is not None or not isinstance(p, (int, float)):
        raise _Unsupported("bernoulli with a generator or a tensor of "
                           "probabilities")
    if isinstance(x, Value):
        raise _Unsupported("bernoulli_ into a tensor computed at run time "
                           "(only a fresh mask's shape is read)")
    shape, dtype = _shape(out), out.dtype
    if p >= 1 or p <= 0:
        return torch.full(shape, 1.0 if p >= 1 else 0.0, dtype=dtype)
    ones = t.constant(torch.ones(shape, dtype=dtype))
    return t.f.scale(t.f.dropout(ones, 1.0 - float(p)), float(p))


def _draw(t, out, distribution, a, b, generator=None):
    """A fresh tensor of `out`'s shape drawn each step from our
    counter-based generator (nn.random; keyed per site, step and rank as
    dropout's masks are), not torch's: the same distribution, other
    numbers."""
    if generator is not None:
        raise _Unsupported("a random draw from a torch.Generator")
    if not all(isinstance(v, (int, float)) for v in (a, b)):
        raise _Unsupported("a random draw with tensors of parameters")
    if distribution == "normal" and b < 0:
        raise _Unsupported(f"a normal draw with standard deviation {b}")
    want = _dtype(out.dtype)
    if want not in _FLOATS:
        raise _Unsupported(f"a random draw of {out.dtype}")
    return t.f.random(_out_type(out), distribution, float(a), float(b))


def _rand(distribution):
    """rand / randn (a size) and rand_like / randn_like (a tensor's)."""
    def build(t, node, out, size_or_like, *args, generator=None, **kwargs):
        return _draw(t, out, distribution, 0.0, 1.0, generator)
    return build


def _uniform(t, node, out, x, low=0.0, high=1.0, generator=None):
    """x.uniform_(low, high): a draw of x's shape (x's values are
    overwritten, so no gradient reaches them, as in torch)."""
    if low > high:
        raise _Unsupported(f"uniform_ on the empty range [{low}, {high})")
    return _draw(t, out, "uniform", low, high, generator)


def _normal(t, node, out, x, mean=0.0, std=1.0, generator=None):
    """x.normal_(mean, std): a draw of x's shape, as uniform_."""
    return _draw(t, out, "normal", mean, std, generator)


def _exponential(t, node, out, x, lambd=1.0, generator=None):
    """x.exponential_(lambd): -log(1 - u) / lambd of a uniform draw u in
    [0, 1) (1 - u is exact and positive), as F.gumbel_softmax's Gumbel
    noise -log(exponential) draws it."""
    if not isinstance(lambd, (int, float)) or lambd <= 0:
        raise _Unsupported(f"exponential_ with rate {lambd}")
    u = _draw(t, out, "uniform", 0.0, 1.0, generator)
    one_minus_u = t.f.add(t.f.scale(u, -1.0), _scalar(t, 1.0, u.type.dtype))
    return t.f.scale(t.f.log(one_minus_u), -1.0 / float(lambd))


def _bernoulli_of(t, node, out, probs, generator=None):
    """torch.bernoulli(probs): 1 where a uniform draw is below the
    probability, else 0; no gradient reaches probs, as in torch (a
    straight-through estimator adds it back by hand)."""
    u = _draw(t, out, "uniform", 0.0, 1.0, generator)
    if not isinstance(probs, Value):
        probs = t.constant(probs, dtype=out.dtype)
    return t.f.compare("lt", u, probs)


def _normal_float_float(t, node, out, mean, std, size, *args,
                        generator=None, **kwargs):
    """torch.normal(mean, std, size) with numbers for mean and std."""
    return _draw(t, out, "normal", mean, std, generator)


def _randint(t, node, out, *args, generator=None, **kwargs):
    """torch.randint(low, high, size) / randint(high, size): the floor of
    a uniform f32 draw in [0, n), n = high - low, plus low. The draw has
    24 random bits, so n is at most 2^24 and each value's probability is
    within n / 2^24 of 1/n (relative); the draw stays below n."""
    low, high = (0, args[0]) if len(args) == 2 else args[:2]
    if generator is not None:
        raise _Unsupported("a random draw from a torch.Generator")
    if not 0 < high - low <= 1 << 24:
        raise _Unsupported(f"randint over [{low}, {high}): more than 2^24 "
                           "values, or none")
    want = _dtype(out.dtype)
    draw = t.f.random(TensorType(tuple(_shape(out)), "f32"), "uniform", 0.0,
                      float(high - low))
    ints = t.f.cast(draw, want)  # truncation: the floor of a non-negative
    return t.f.add(ints, _scalar(t, low, want)) if low else ints


def _unary(method):
    def build(t, node, out, x):
        return getattr(t.f, method)(_float(t, x, method))
    return build


def _pow(t, node, out, x, exponent):
    if not isinstance(exponent, (int, float)) or isinstance(exponent, bool):
        raise _Unsupported("pow with a tensor exponent")
    if exponent == 1:
        return x
    return t.f.pow(_float(t, x, "pow"), float(exponent))


def _clamp(t, node, out, x, min=None, max=None):
    """clamp, its bounds numbers or constant one-element tensors
    (cosine_similarity's eps as decomposed: clamp.Tensor)."""
    min, max = (_one_value(b) for b in (min, max))
    if min is None and max is None:
        return x
    if (any(_is_tensor(b) or isinstance(b, Value) for b in (min, max))
            or x.type.dtype in _INTEGERS):
        return _clamp_by_tensors(t, out, x, min, max)
    return t.f.clamp(_float(t, x, "clamp"),
                     None if min is None else float(min),
                     None if max is None else float(max))


def _one_value(bound):
    """A clamp bound as a number (None stays None), or the tensor itself."""
    if _is_tensor(bound) and bound.numel() == 1:
        return bound.item()
    return bound


def _clamp_by_tensors(t, out, x, low, high):
    """clamp with tensor bounds (computed at run time, or constants of
    several values: PhiMoE's sparsemixer), or of integers (HF's
    LabelSmoother clamps its labels at 0), as torch.where(x < low, low, x),
    then the same above `high`: each element's gradient reaches the bound
    it takes, x's where low <= x <= high, as torch's clamp backward, ties
    included; where low > high the result is high, as torch's."""
    dtype = _dtype(out.dtype)
    for bound, op in ((low, "lt"), (high, "gt")):
        if bound is not None:
            b = t.v(bound) if _is_tensor(bound) or isinstance(bound, Value) \
                else _scalar(t, float(bound), dtype)
            # Compared in f32, as every comparison (integers exactly
            # below 2^24).
            x = _keep_either(t, t.f.compare(op, _as_f32(t, x), _as_f32(t, b)),
                             b, x, dtype)
    return x


def _clamp_min(t, node, out, x, min):
    return _clamp(t, node, out, x, min=min)


def _clamp_max(t, node, out, x, max):
    return _clamp(t, node, out, x, max=max)


def _hardtanh(t, node, out, x, min_val=-1.0, max_val=1.0):
    """hardtanh (ReLU6: MobileNet) as clamp, mapped here rather than
    decomposed: a decomposition would functionalise the whole program,
    BatchNorm's in-place statistics with it. Its gradient passes at the
    bounds themselves, where torch's hardtanh_backward does not (x exactly
    at a bound)."""
    return _clamp(t, node, out, x, min_val, max_val)


def _relu6_shifted(t, x, what):
    """relu6(x + 3), the two hard activations' common part."""
    x = _float(t, x, what)
    return t.f.clamp(t.f.add(x, _scalar(t, 3.0, x.type.dtype)), 0.0, 6.0)


def _hardsigmoid(t, node, out, x):
    """relu6(x + 3) / 6, in torch's order; its gradient passes at ±3
    themselves, as _hardtanh's bounds (torch's is 0 there)."""
    return t.f.div(_relu6_shifted(t, x, "hardsigmoid"),
                   _scalar(t, 6.0, x.type.dtype))


def _hardswish(t, node, out, x):
    """x · relu6(x + 3) / 6, in torch's order (MobileNetV3). Its gradient
    is torch's everywhere: (2x + 3) / 6 inside [-3, 3], bounds included,
    0 below and 1 above."""
    return t.f.div(t.f.mul(x, _relu6_shifted(t, x, "hardswish")),
                   _scalar(t, 6.0, x.type.dtype))


def _to(t, node, out, x, *args, **kwargs):
    """to / _to_copy: a cast when the dtype changes (to bool: x != 0, a
    mask; to an integer type truncating toward zero, as torch's)."""
    import torch
    if not isinstance(x, Value):  # a constant cast like a run-time dtype
        return x.to(out.dtype) if _is_tensor(x) else x
    if out.dtype == torch.bool:
        return t.f.compare("ne", _as_f32(t, x), _scalar(t, 0.0, "f32"))
    want = _dtype(out.dtype)
    if want == x.type.dtype:
        return x
    return t.f.cast(x, want)


OPS: Dict[str, Callable] = {
    "add.Tensor": _binary("add"),
    "add.Scalar": _binary("add"),
    "sub.Tensor": _binary("sub"),
    "sub.Scalar": _binary("sub"),
    "mul.Tensor": _binary("mul"),
    "mul.Scalar": _binary("mul"),
    "div.Tensor": _binary("div"),
    "div.Scalar": _binary("div"),
    **{f"{c}.{k}": _compare(c) for c in _COMPARISONS
       for k in ("Tensor", "Scalar")},
    "where.self": _where,
    "where.ScalarSelf": _where,
    "where.ScalarOther": _where,
    "where.Scalar": _where,
    "masked_fill.Scalar": _masked_fill,
    "masked_fill.Tensor": _masked_fill,
    "logical_not.default": _logical_not,
    "bitwise_not.default": _logical_not,
    "logical_and.default": _logical_and,
    "bitwise_and.Tensor": _logical_and,
    "logical_or.default": _logical_or,
    "bitwise_or.Tensor": _logical_or,
    "__and__.Tensor": _logical_and,
    "__or__.Tensor": _logical_or,
    "__invert__.default": _logical_not,
    "rsub.Scalar": _rsub,
    "rsub.Tensor": _rsub,
    "neg.default": _neg,
    "relu.default": _unary("relu"),
    "silu.default": _unary("silu"),
    "tanh.default": _unary("tanh"),
    "sigmoid.default": _unary("sigmoid"),
    "exp.default": _unary("exp"),
    "log.default": _unary("log"),
    "sqrt.default": _unary("sqrt"),
    "rsqrt.default": _unary("rsqrt"),
    "erf.default": _unary("erf"),
    "sin.default": _unary("sin"),
    "cos.default": _unary("cos"),
    "acos.default": _unary("acos"),
    "asin.default": _unary("asin"),
    "atan.default": _unary("atan"),
    # NaN is the one value unequal to itself.
    "isnan.default": lambda t, node, out, x: t.f.compare(
        "ne", _float(t, x, "isnan"), x),
    "reciprocal.default": lambda t, node, out, x: t.f.div(
        _scalar(t, 1.0, x.type.dtype), _float(t, x, "reciprocal")),
    # As log(x) / ln 2 and exp(x · ln 2): a few ulps off torch's.
    "log2.default": lambda t, node, out, x: t.f.scale(
        t.f.log(_float(t, x, "log2")), 1.0 / math.log(2.0)),
    "exp2.default": lambda t, node, out, x: t.f.exp(
        t.f.scale(_float(t, x, "exp2"), math.log(2.0))),
    "pow.Tensor_Scalar": _pow,
    "square.default": lambda t, node, out, x: _pow(t, node, out, x, 2),
    # As exp(x) - 1 and log(1 + x): a few ulps off torch's near 0.
    "expm1.default": lambda t, node, out, x: t.f.add(
        t.f.exp(_float(t, x, "expm1")), _scalar(t, -1.0, x.type.dtype)),
    "log1p.default": lambda t, node, out, x: t.f.log(
        t.f.add(_float(t, x, "log1p"), _scalar(t, 1.0, x.type.dtype))),
    "clamp.default": _clamp,
    "clamp.Tensor": _clamp,
    "clamp_min.default": _clamp_min,
    "clamp_max.default": _clamp_max,
    "hardtanh.default": _hardtanh,
    "gelu.default": _gelu,
    "dropout.default": _dropout,
    "native_dropout.default": _native_dropout,
    "rand.default": _rand("uniform"),
    "rand.generator": _rand("uniform"),
    "randn.default": _rand("normal"),
    "randn.generator": _rand("normal"),
    "rand_like.default": _rand("uniform"),
    "randn_like.default": _rand("normal"),
    "uniform.default": _uniform,
    "uniform_.default": _uniform,
    "normal_functional.default": _normal,
    "normal.float_float": _normal_float_float,
    "randint.default": _randint,
    "randint.low": _randint,
    "exponential.default": _exponential,
    "exponential_.default": _exponential,
    "bernoulli.default": _bernoulli_of,
    "bernoulli_.float": _bernoulli,
    "bernoulli.p": _bernoulli,
    "hardsigmoid.default": _hardsigmoid,
    "hardswish.default": _hardswish,
    "to.dtype": _to,
    "to.dtype_layout": _to,
    "to.device": _to,
    "_to_copy.default": _to,
    "type_as.default": _to,
}
