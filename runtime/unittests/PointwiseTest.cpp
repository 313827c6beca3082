//===- PointwiseTest.cpp - binary ops, scale, activations -----------------===//
#include "TestUtil.h"

#include "fsdp/rt/math/Activation.h"
#include "fsdp/rt/math/Half.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class ElementwiseConformance : public ::testing::TestWithParam<std::string> {};

/// Numpy broadcasting of a[as] (op) b[bs] in float64.
std::vector<double> broadcastRef(int op, const std::vector<double> &a,
                                 const std::vector<int64_t> &as,
                                 const std::vector<double> &b,
                                 const std::vector<int64_t> &bs,
                                 const std::vector<int64_t> &os) {
  size_t r = os.size();
  int64_t n = 1;
  for (int64_t d : os)
    n *= d;
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> idx(r);
    int64_t rem = i;
    for (size_t d = r; d-- > 0;) {
      idx[d] = rem % os[d];
      rem /= os[d];
    }
    auto at = [&](const std::vector<int64_t> &s) {
      int64_t off = 0;
      for (size_t d = 0; d < s.size(); ++d) {
        int64_t id = idx[r - s.size() + d];
        off = off * s[d] + (s[d] == 1 ? 0 : id);
      }
      return off;
    };
    double x = a[at(as)], y = b[at(bs)];
    out[i] = op == FSDPRT_ADD   ? x + y
             : op == FSDPRT_SUB ? x - y
             : op == FSDPRT_MUL ? x * y
                                : x / y;
  }
  return out;
}

struct BroadcastCase {
  std::vector<int64_t> a, b, out;
};

TEST_P(ElementwiseConformance, BinaryOpsBroadcastForwardAndBackward) {
  Device dev(GetParam());
  std::vector<BroadcastCase> cases{
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, // same shape
      {{2, 3, 4}, {4}, {2, 3, 4}},       // bias-like trailing
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},    // both broadcast
      {{3, 1}, {2, 1, 5}, {2, 3, 5}},    // a of lower rank
      {{}, {2, 3}, {2, 3}},              // scalar
  };
  // |b| is in [0.1, 1] (randomVector), so division is well conditioned.
  for (int op : {FSDPRT_ADD, FSDPRT_SUB, FSDPRT_MUL, FSDPRT_DIV}) {
    for (const BroadcastCase &c : cases) {
      SCOPED_TRACE("op " + std::to_string(op) + ", a rank " +
                   std::to_string(c.a.size()) + ", b rank " +
                   std::to_string(c.b.size()));
      auto numel = [](const std::vector<int64_t> &s) {
        int64_t n = 1;
        for (int64_t d : s)
          n *= d;
        return n;
      };
      auto a = randomVector(numel(c.a), 21), b = randomVector(numel(c.b), 22),
           dout = randomVector(numel(c.out), 23);
      int64_t ba = dev.upload(a), bb = dev.upload(b), bd = dev.upload(dout);
      int64_t bo = dev.alloc(numel(c.out) * 4), bda = dev.alloc(a.size() * 4),
              bdb = dev.alloc(b.size() * 4);
      RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_F32, op, ba, 0,
                                  c.a.size(), c.a.data(), bb, 0, c.b.size(),
                                  c.b.data(), bo, 0));
      RT_OK(fsdprt_binary_backward(dev.ctx, dev.stream, FSDPRT_F32, op, ba, 0,
                                   c.a.size(), c.a.data(), bb, 0, c.b.size(),
                                   c.b.data(), bd, 0, bda, 0, bdb, 0));
      Reference ref = [&](const Inputs &in) {
        return broadcastRef(op, in[0], c.a, in[1], c.b, c.out);
      };
      Inputs in{toDouble(a), toDouble(b)};
      expectClose(dev.download(bo, numel(c.out)), ref(in), "out");
      expectGradients(
          ref, in, toDouble(dout),
          {dev.download(bda, a.size()), dev.download(bdb, b.size())},
          {"da", "db"});
    }
  }
}

/// binary_forward of a [2, 4] and b [4] stored as `dt` (the values are
/// exact in bf16), read back as floats.
std::vector<float> binaryValues(Device &dev, int32_t dt, int op,
                                const std::vector<float> &a,
                                const std::vector<float> &b) {
  const std::vector<int64_t> as{2, 4}, bs{4};
  auto upload = [&](const std::vector<float> &v) {
    if (dt == FSDPRT_F32)
      return dev.upload(v);
    std::vector<uint16_t> h;
    for (float x : v)
      h.push_back(floatToBf16(x));
    return dev.upload(h);
  };
  int64_t ba = upload(a), bb = upload(b), bo = dev.alloc(8 * 4);
  RT_EXPECT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, dt, op, ba, 0, 2,
                                     as.data(), bb, 0, 1, bs.data(), bo, 0));
  if (dt == FSDPRT_F32)
    return dev.download(bo, 8);
  std::vector<float> got;
  for (uint16_t h : dev.download<uint16_t>(bo, 8))
    got.push_back(bf16ToFloat(h));
  return got;
}

/// Every element of binaryValues against want(a[i], b[i % 4]), for each op
/// and f32 / bf16; NaN must be NaN.
template <typename Want>
void checkBinaryValues(Device &dev, const std::vector<int> &ops,
                       const std::vector<float> &a,
                       const std::vector<float> &b, Want want) {
  for (int32_t dt : {FSDPRT_F32, FSDPRT_BF16})
    for (int op : ops) {
      SCOPED_TRACE("op " + std::to_string(op) + ", dtype " +
                   std::to_string(dt));
      std::vector<float> got = binaryValues(dev, dt, op, a, b);
      for (int i = 0; i < 8; ++i) {
        float w = want(op, a[i], b[i % 4]);
        if (w != w)
          EXPECT_TRUE(got[i] != got[i]) << "element " << i;
        else
          EXPECT_EQ(got[i], w) << "element " << i;
      }
    }
}

// torch.maximum / minimum and their subgradient weights, a [2, 4] against
// b [4]: values, a tie (the weight splits it: 1/2), a NaN on either side
// (maximum and minimum return it; its weight is 1); binary_backward
// refuses them.
TEST_P(ElementwiseConformance, MaximumMinimumAndTheirWeights) {
  Device dev(GetParam());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a{1.0f, -2.0f, 3.0f, nan, 0.5f, 4.0f, -1.0f, 2.0f};
  std::vector<float> b{2.0f, -2.0f, nan, 1.0f};
  checkBinaryValues(
      dev, {FSDPRT_MAX, FSDPRT_MIN, FSDPRT_MAX_WEIGHT, FSDPRT_MIN_WEIGHT}, a,
      b, [](int op, float x, float y) -> float {
        bool xn = x != x, yn = y != y;
        switch (op) {
        case FSDPRT_MAX:
          return xn ? x : yn ? y : std::max(x, y);
        case FSDPRT_MIN:
          return xn ? x : yn ? y : std::min(x, y);
        case FSDPRT_MAX_WEIGHT:
          return x == y ? 0.5f : x < y ? 0.0f : 1.0f;
        default:
          return x == y ? 0.5f : x > y ? 0.0f : 1.0f;
        }
      });
  const std::vector<int64_t> as{2, 4}, bs{4};
  int64_t ba = dev.upload(a), bb = dev.upload(b), bd = dev.upload(a);
  EXPECT_EQ(fsdprt_binary_backward(dev.ctx, dev.stream, FSDPRT_F32,
                                   FSDPRT_MAX, ba, 0, 2, as.data(), bb, 0, 1,
                                   bs.data(), bd, 0, ba, 0, 0, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_last_error()).find("FSDPRT_MAX_WEIGHT"),
            std::string::npos)
      << fsdprt_last_error();
}

// The comparisons (1 or 0) and keep (a where b != 0, else exactly 0: an
// -inf or NaN in the unselected branch of a where never reaches it).
TEST_P(ElementwiseConformance, ComparisonsAndKeep) {
  Device dev(GetParam());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a{1.0f, -2.0f, 3.0f, nan, -inf, 4.0f, 0.0f, 2.0f};
  std::vector<float> b{2.0f, -2.0f, nan, 1.0f};
  std::vector<int> ops;
  for (int op = FSDPRT_KEEP; op <= FSDPRT_NE; ++op)
    ops.push_back(op);
  checkBinaryValues(dev, ops, a, b, [](int op, float x, float y) -> float {
    switch (op) {
    case FSDPRT_KEEP:
      return y != 0.0f ? x : 0.0f;
    case FSDPRT_LT:
      return x < y;
    case FSDPRT_LE:
      return x <= y;
    case FSDPRT_GT:
      return x > y;
    case FSDPRT_GE:
      return x >= y;
    case FSDPRT_EQ:
      return x == y;
    default:
      return x != y;
    }
  });
}

// torch.fmod: a − trunc(a / b)·b, exact, with a's sign; a zero divisor or
// an infinite or NaN dividend gives NaN. Values by hand (each exact in
// bf16 too). Integer tensors and binary_backward refuse it.
TEST_P(ElementwiseConformance, Fmod) {
  Device dev(GetParam());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a{5.5f, -5.5f, 7.0f, nan, -0.75f, 2.0f, -inf, 3.25f};
  std::vector<float> b{2.0f, 1.5f, 0.0f, -0.5f};
  std::vector<float> want{1.5f, -1.0f, nan, nan, -0.75f, 0.5f, nan, 0.25f};
  for (int32_t dt : {FSDPRT_F32, FSDPRT_BF16}) {
    std::vector<float> got = binaryValues(dev, dt, FSDPRT_FMOD, a, b);
    for (int i = 0; i < 8; ++i)
      if (want[i] != want[i])
        EXPECT_TRUE(got[i] != got[i]) << "dtype " << dt << ", element " << i;
      else
        EXPECT_EQ(got[i], want[i]) << "dtype " << dt << ", element " << i;
  }
  const std::vector<int64_t> shape{4};
  int64_t ids = dev.alloc(4 * 8), grads = dev.upload(b);
  EXPECT_EQ(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_I64, FSDPRT_FMOD,
                                  ids, 0, 1, shape.data(), ids, 0, 1,
                                  shape.data(), ids, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_binary_backward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_FMOD,
                                   grads, 0, 1, shape.data(), grads, 0, 1,
                                   shape.data(), grads, 0, grads, 0, 0, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

TEST_P(ElementwiseConformance, ScaleForwardAndBackward) {
  Device dev(GetParam());
  auto x = randomVector(37, 31), dy = randomVector(37, 32);
  const double factor = -0.37;
  int64_t bx = dev.upload(x), bdy = dev.upload(dy), by = dev.alloc(37 * 4),
          bdx = dev.alloc(37 * 4);
  RT_OK(fsdprt_scale_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, by, 0, 37,
                             factor));
  RT_OK(fsdprt_scale_backward(dev.ctx, dev.stream, FSDPRT_F32, bdy, 0, bdx, 0,
                              37, factor));
  Reference ref = [&](const Inputs &in) {
    std::vector<double> y(in[0]);
    for (double &v : y)
      v *= factor;
    return y;
  };
  Inputs in{toDouble(x)};
  expectClose(dev.download(by, 37), ref(in), "y");
  expectGradients(ref, in, toDouble(dy), {dev.download(bdx, 37)}, {"dx"});
}

TEST_P(ElementwiseConformance, AddIntegerCountsInPlace) {
  Device dev(GetParam());
  std::vector<int64_t> counts{0, 7, -3, int64_t(1) << 40};
  std::vector<int32_t> small{5, -5};
  int64_t b64 = dev.upload(counts), b32 = dev.upload(small);
  RT_OK(fsdprt_add_integer(dev.ctx, dev.stream, FSDPRT_I64, b64, 8, 3, 2));
  RT_OK(fsdprt_add_integer(dev.ctx, dev.stream, FSDPRT_I64, b64, 8, 3, -1));
  RT_OK(fsdprt_add_integer(dev.ctx, dev.stream, FSDPRT_I32, b32, 0, 2, 3));
  EXPECT_EQ(dev.download<int64_t>(b64, 4),
            (std::vector<int64_t>{0, 8, -2, (int64_t(1) << 40) + 1}));
  EXPECT_EQ(dev.download<int32_t>(b32, 2), (std::vector<int32_t>{8, -2}));
  // Floats have binary_forward; asking here is an error, not a reinterpretation.
  EXPECT_NE(fsdprt_add_integer(dev.ctx, dev.stream, FSDPRT_F32, b32, 0, 1, 1),
            FSDPRT_OK);
}

TEST_P(ElementwiseConformance, IntegerAddSubMulBroadcastAndWrap) {
  Device dev(GetParam());
  // RoBERTa's position ids: (count + past) * mask + padding_idx, [2, 3] by
  // a [3] row and a 0-d scalar, in i64; then i32 products past 2^31 wrap
  // as torch's do.
  std::vector<int64_t> count{1, 2, 2, 1, 2, 3}, row{1, 1, 0}, pad{1};
  const std::vector<int64_t> shape{2, 3}, rowShape{3}, scalar{};
  int64_t bc = dev.upload(count), br = dev.upload(row), bp = dev.upload(pad),
          bm = dev.alloc(6 * 8), bo = dev.alloc(6 * 8);
  RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_I64, FSDPRT_MUL, bc,
                              0, 2, shape.data(), br, 0, 1, rowShape.data(),
                              bm, 0));
  RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_I64, FSDPRT_ADD, bm,
                              0, 2, shape.data(), bp, 0, 0, scalar.data(), bo,
                              0));
  EXPECT_EQ(dev.download<int64_t>(bo, 6),
            (std::vector<int64_t>{2, 3, 1, 2, 3, 1}));
  RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_I64, FSDPRT_SUB, bp,
                              0, 0, scalar.data(), bc, 0, 2, shape.data(), bo,
                              0));
  EXPECT_EQ(dev.download<int64_t>(bo, 6),
            (std::vector<int64_t>{0, -1, -1, 0, -1, -2}));
  std::vector<int32_t> big{1 << 30, -3}, two{2, 2};
  const std::vector<int64_t> pair{2};
  int64_t bb = dev.upload(big), bt = dev.upload(two), b32 = dev.alloc(2 * 4);
  RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_I32, FSDPRT_MUL, bb,
                              0, 1, pair.data(), bt, 0, 1, pair.data(), b32,
                              0));
  EXPECT_EQ(dev.download<int32_t>(b32, 2),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -6}));
  // Integers have no division, maximum or comparisons here (the importer
  // compares them as f32).
  for (int op : {FSDPRT_DIV, FSDPRT_MAX, FSDPRT_NE})
    EXPECT_EQ(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_I32, op, bb, 0,
                                    1, pair.data(), bt, 0, 1, pair.data(), b32,
                                    0),
              FSDPRT_ERR_INVALID_ARGUMENT)
        << "op " << op;
}

double activationRef(int kind, double x) {
  const double pi = 3.14159265358979323846;
  switch (kind) {
  case FSDPRT_RELU:
    return x > 0 ? x : 0;
  case FSDPRT_GELU:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case FSDPRT_GELU_TANH:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
  default:
    return x / (1 + std::exp(-x));
  }
}

TEST_P(ElementwiseConformance, ActivationsForwardAndBackward) {
  Device dev(GetParam());
  const int64_t n = 101;
  // Magnitudes up to 3 cover the curved parts of gelu and silu.
  auto x = randomVector(n, 41, 0.1f, 3.0f), dy = randomVector(n, 42);
  int64_t bx = dev.upload(x), bdy = dev.upload(dy), by = dev.alloc(n * 4),
          bdx = dev.alloc(n * 4);
  for (int kind : {FSDPRT_RELU, FSDPRT_GELU, FSDPRT_GELU_TANH, FSDPRT_SILU}) {
    SCOPED_TRACE("activation kind " + std::to_string(kind));
    RT_OK(fsdprt_activation_forward(dev.ctx, dev.stream, FSDPRT_F32, kind, bx,
                                    0, by, 0, n));
    RT_OK(fsdprt_activation_backward(dev.ctx, dev.stream, FSDPRT_F32, kind, bx,
                                     0, bdy, 0, bdx, 0, n));
    Reference ref = [&](const Inputs &in) {
      std::vector<double> y(n);
      for (int64_t i = 0; i < n; ++i)
        y[i] = activationRef(kind, in[0][i]);
      return y;
    };
    Inputs in{toDouble(x)};
    expectClose(dev.download(by, n), ref(in), "y");
    expectGradients(ref, in, toDouble(dy), {dev.download(bdx, n)}, {"dx"});
  }
}

// Pointwise kernels may move whole 16-byte packs where every operand is
// aligned (the CUDA backend) and go item by item otherwise: the same bits
// either way. Each op runs on the same values at offset 0 and one element
// further (misaligned), in f32 and bf16, over a length with a tail.
TEST_P(ElementwiseConformance, AlignedAndUnalignedOperandsGiveTheSameBits) {
  Device dev(GetParam());
  const int64_t n = 1001;
  auto x = randomVector(n, 43, 0.1f, 3.0f), y = randomVector(n, 44);
  struct Operands {
    int64_t x, y, out, off;
  };
  for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16}) {
    int64_t es = dtype == FSDPRT_F32 ? 4 : 2, shape[1] = {n};
    int64_t fx = dev.upload(x), fy = dev.upload(y);
    std::vector<Operands> layouts;
    for (int64_t off : {int64_t(0), es}) {
      Operands o{dev.alloc((n + 1) * es), dev.alloc((n + 1) * es),
                 dev.alloc((n + 1) * es), off};
      RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, fx, 0, dtype, o.x,
                        off, n));
      RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, fy, 0, dtype, o.y,
                        off, n));
      layouts.push_back(o);
    }
    std::vector<std::function<int32_t(const Operands &)>> ops = {
        [&](const Operands &o) {
          return fsdprt_binary_forward(dev.ctx, dev.stream, dtype, FSDPRT_MUL,
                                       o.x, o.off, 1, shape, o.y, o.off, 1,
                                       shape, o.out, o.off);
        },
        [&](const Operands &o) {
          return fsdprt_scale_forward(dev.ctx, dev.stream, dtype, o.x, o.off,
                                      o.out, o.off, n, 0.3);
        },
        [&](const Operands &o) {
          return fsdprt_activation_forward(dev.ctx, dev.stream, dtype,
                                           FSDPRT_GELU_TANH, o.x, o.off, o.out,
                                           o.off, n);
        },
        [&](const Operands &o) {
          return fsdprt_activation_backward(dev.ctx, dev.stream, dtype,
                                            FSDPRT_SILU, o.x, o.off, o.y,
                                            o.off, o.out, o.off, n);
        },
        [&](const Operands &o) {
          return fsdprt_unary_forward(dev.ctx, dev.stream, dtype,
                                      FSDPRT_UNARY_TANH, o.x, o.off, o.out,
                                      o.off, n, 0.0, 0.0);
        },
        [&](const Operands &o) {
          return fsdprt_unary_backward(dev.ctx, dev.stream, dtype,
                                       FSDPRT_UNARY_SIGMOID, o.x, o.off, o.y,
                                       o.off, o.out, o.off, n, 0.0, 0.0);
        }};
    for (size_t i = 0; i < ops.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "dtype " << dtype << " op " << i);
      std::vector<std::vector<uint8_t>> results;
      for (const Operands &o : layouts) {
        RT_OK(ops[i](o));
        auto bytes = dev.download<uint8_t>(o.out, (n + 1) * es);
        results.emplace_back(bytes.begin() + o.off,
                             bytes.begin() + o.off + n * es);
      }
      EXPECT_EQ(results[0], results[1]);
      EXPECT_NE(results[0], std::vector<uint8_t>(n * es, 0));
    }
    // Casts to the other float type (f32 <-> bf16), and f16.
    for (int32_t to : {dtype == FSDPRT_F32 ? FSDPRT_BF16 : FSDPRT_F32,
                       FSDPRT_F16}) {
      SCOPED_TRACE(::testing::Message() << "cast to " << to);
      int64_t ts = to == FSDPRT_F32 ? 4 : 2;
      std::vector<std::vector<uint8_t>> results;
      for (const Operands &o : layouts) {
        int64_t dst = dev.alloc((n + 1) * ts), at = o.off / es * ts;
        RT_OK(fsdprt_cast(dev.ctx, dev.stream, dtype, o.x, o.off, to, dst, at,
                          n));
        auto bytes = dev.download<uint8_t>(dst, (n + 1) * ts);
        results.emplace_back(bytes.begin() + at, bytes.begin() + at + n * ts);
      }
      EXPECT_EQ(results[0], results[1]);
    }
  }
}

double unaryRef(int kind, double x, double a, double b) {
  switch (kind) {
  case FSDPRT_UNARY_TANH:
    return std::tanh(x);
  case FSDPRT_UNARY_SIGMOID:
    return 1 / (1 + std::exp(-x));
  case FSDPRT_UNARY_EXP:
    return std::exp(x);
  case FSDPRT_UNARY_LOG:
    return std::log(x);
  case FSDPRT_UNARY_SQRT:
    return std::sqrt(x);
  case FSDPRT_UNARY_RSQRT:
    return 1 / std::sqrt(x);
  case FSDPRT_UNARY_ABS:
    return std::fabs(x);
  case FSDPRT_UNARY_POW:
    return std::pow(x, a);
  case FSDPRT_UNARY_ERF:
    return std::erf(x);
  case FSDPRT_UNARY_SIN:
    return std::sin(x);
  case FSDPRT_UNARY_COS:
    return std::cos(x);
  case FSDPRT_UNARY_ACOS:
    return std::acos(x);
  case FSDPRT_UNARY_ASIN:
    return std::asin(x);
  case FSDPRT_UNARY_ATAN:
    return std::atan(x);
  default:
    return std::min(std::max(x, a), b);
  }
}

TEST_P(ElementwiseConformance, UnaryMathForwardAndBackward) {
  Device dev(GetParam());
  const int64_t n = 101;
  // Magnitudes in [0.1, 3] of both signs; their absolute values for log,
  // sqrt, rsqrt and fractional powers.
  auto signed_ = randomVector(n, 51, 0.1f, 3.0f), dy = randomVector(n, 52);
  std::vector<float> positive(signed_), unit(signed_);
  for (float &v : positive)
    v = std::fabs(v);
  // acos and asin: inside (-1, 1), away from its ends where the derivative
  // grows without bound.
  for (float &v : unit)
    v = 0.3f * v;
  struct Case {
    int kind;
    double a, b;
    const std::vector<float> &x;
  };
  const double inf = INFINITY;
  std::vector<Case> cases{
      {FSDPRT_UNARY_TANH, 0, 0, signed_},
      {FSDPRT_UNARY_SIGMOID, 0, 0, signed_},
      {FSDPRT_UNARY_EXP, 0, 0, signed_},
      {FSDPRT_UNARY_LOG, 0, 0, positive},
      {FSDPRT_UNARY_SQRT, 0, 0, positive},
      {FSDPRT_UNARY_RSQRT, 0, 0, positive},
      {FSDPRT_UNARY_ABS, 0, 0, signed_},
      {FSDPRT_UNARY_POW, 2, 0, signed_},
      {FSDPRT_UNARY_POW, 1.5, 0, positive},
      {FSDPRT_UNARY_POW, -0.5, 0, positive},
      {FSDPRT_UNARY_CLAMP, -0.5, 0.8, signed_},
      {FSDPRT_UNARY_CLAMP, -inf, 0.8, signed_},
      {FSDPRT_UNARY_ERF, 0, 0, signed_},
      {FSDPRT_UNARY_SIN, 0, 0, signed_},
      {FSDPRT_UNARY_COS, 0, 0, signed_},
      {FSDPRT_UNARY_ACOS, 0, 0, unit},
      {FSDPRT_UNARY_ASIN, 0, 0, unit},
      {FSDPRT_UNARY_ATAN, 0, 0, signed_},
  };
  int64_t bdy = dev.upload(dy), by = dev.alloc(n * 4), bdx = dev.alloc(n * 4);
  for (const Case &c : cases) {
    SCOPED_TRACE("unary kind " + std::to_string(c.kind) + " a " +
                 std::to_string(c.a));
    int64_t bx = dev.upload(c.x);
    RT_OK(fsdprt_unary_forward(dev.ctx, dev.stream, FSDPRT_F32, c.kind, bx, 0,
                               by, 0, n, c.a, c.b));
    RT_OK(fsdprt_unary_backward(dev.ctx, dev.stream, FSDPRT_F32, c.kind, bx,
                                0, bdy, 0, bdx, 0, n, c.a, c.b));
    Reference ref = [&](const Inputs &in) {
      std::vector<double> y(n);
      for (int64_t i = 0; i < n; ++i)
        y[i] = unaryRef(c.kind, in[0][i], c.a, c.b);
      return y;
    };
    Inputs in{toDouble(c.x)};
    expectClose(dev.download(by, n), ref(in), "y");
    expectGradients(ref, in, toDouble(dy), {dev.download(bdx, n)}, {"dx"});
  }
  EXPECT_NE(fsdprt_unary_forward(dev.ctx, dev.stream, FSDPRT_F32, 15, bdy, 0,
                                 by, 0, n, 0, 0),
            FSDPRT_OK);
}

// GELU (tanh) uses a rational tanh: it must stay within a few float ulps of
// tanh over the whole float range, including the clamp and tiny inputs.
TEST(TanhRational, WithinFourTenthsOfAMicroOfTanh) {
  double worst = 0;
  for (double v = -20; v <= 20; v += 1e-4) {
    float x = static_cast<float>(v);
    worst = std::max(worst, std::fabs(double(tanhRational(x)) -
                                      std::tanh(double(x))));
  }
  EXPECT_LT(worst, 4e-7);
  EXPECT_FLOAT_EQ(tanhRational(1e-20f), 1e-20f);
  EXPECT_EQ(tanhRational(0.0f), 0.0f);
  EXPECT_EQ(tanhRational(-1e4f), -tanhRational(1e4f));
}

FSDPRT_INSTANTIATE_CONFORMANCE(ElementwiseConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
