//===- Pointwise.cpp - add/sub/mul with broadcasting, scale, activations --===//
#include "Kernels.h"
#include "Parallel.h"
#include "Storage.h"
#include "Strided.h"

#include "fsdp/rt/math/Activation.h"
#include "fsdp/rt/math/Pointwise.h"
#include "fsdp/rt/math/Unary.h"

#include <algorithm>
#include <array>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// out = f(a, b) with broadcasting, on S's loaded values.
template <typename S, typename F>
static void binaryForwardT(int threads, F f, const void *a,
                           const Shape &aShape, const void *b,
                           const Shape &bShape, void *out) {
  using T = typename S::T;
  if (aShape == bShape)
    return mapBinary<S>(threads, a, b, out, numelOf(aShape), f);
  Shape shape = broadcastShapes(aShape, bShape);
  std::vector<int64_t> sa = broadcastStrides(aShape, shape);
  std::vector<int64_t> sb = broadcastStrides(bShape, shape);
  int64_t sal = shape.empty() ? 0 : sa.back();
  int64_t sbl = shape.empty() ? 0 : sb.back();
  parallelFor(
      threads, numelOf(shape), kPointwiseGrain,
      [&](int64_t begin, int64_t end) {
        forEachRun<2>(
            shape, {&sa, &sb}, begin, end,
            [&](int64_t start, int64_t len, std::array<int64_t, 2> off) {
              const T *pa = static_cast<const T *>(a) + off[0];
              const T *pb = static_cast<const T *>(b) + off[1];
              T *po = static_cast<T *>(out) + start;
              for (int64_t i = 0; i < len; ++i)
                po[i] = S::store(f(S::load(pa[i * sal]), S::load(pb[i * sbl])));
            });
      });
}

void binaryForward(int threads, DType dt, BinaryOp op, const void *a,
                   const Shape &aShape, const void *b, const Shape &bShape,
                   void *out) {
  int code = static_cast<int>(op);
  if (dt == DType::I32 || dt == DType::I64) {
    auto f = [code](int64_t x, int64_t y) {
      return integerBinaryApply(code, x, y);
    };
    if (dt == DType::I32)
      return binaryForwardT<IntegerStorage<int32_t>>(threads, f, a, aShape, b,
                                                     bShape, out);
    return binaryForwardT<IntegerStorage<int64_t>>(threads, f, a, aShape, b,
                                                   bShape, out);
  }
  auto f = [code](float x, float y) { return binaryApply(code, x, y); };
  withStorage(dt, [&](auto s) {
    binaryForwardT<decltype(s)>(threads, f, a, aShape, b, bShape, out);
  });
}

/// d(operand) = reduce_sum over the broadcast dims of `g` (out-shaped).
static void sumToShape(int threads, const float *g, const Shape &outShape,
                       const Shape &operand, float *d) {
  std::vector<int64_t> dims;
  size_t lead = outShape.size() - operand.size();
  for (size_t i = 0; i < outShape.size(); ++i)
    if (i < lead || (operand[i - lead] == 1 && outShape[i] != 1))
      dims.push_back(static_cast<int64_t>(i));
  if (dims.empty()) {
    std::copy(g, g + numelOf(outShape), d);
    return;
  }
  reduceForward(threads, ReduceKind::Sum, g, outShape, dims, d);
}

void binaryBackward(int threads, BinaryOp op, const float *a,
                    const Shape &aShape, const float *b, const Shape &bShape,
                    const float *dout, float *da, float *db) {
  Shape shape = broadcastShapes(aShape, bShape);
  int64_t n = numelOf(shape);
  std::vector<float> g;
  if (da) {
    const float *ga = dout;
    if (op == BinaryOp::Mul || op == BinaryOp::Div) {
      // d/da (a*b) = b and d/da (a/b) = 1/b, broadcast to out shape
      g.resize(n);
      binaryForward(threads, DType::F32, op, dout, shape, b, bShape, g.data());
      ga = g.data();
    }
    sumToShape(threads, ga, shape, aShape, da);
  }
  if (db) {
    const float *gb = dout;
    if (op == BinaryOp::Mul) {
      g.resize(n);
      binaryForward(threads, DType::F32, BinaryOp::Mul, dout, shape, a, aShape,
                    g.data());
      gb = g.data();
    } else if (op == BinaryOp::Sub) {
      g.resize(n);
      scale(threads, DType::F32, dout, g.data(), n, -1.0f);
      gb = g.data();
    } else if (op == BinaryOp::Div) { // d/db (a/b) = -(a/b) / b
      std::vector<float> quotient(n);
      g.resize(n);
      binaryForward(threads, DType::F32, BinaryOp::Div, a, aShape, b, bShape,
                    quotient.data());
      binaryForward(threads, DType::F32, BinaryOp::Mul, dout, shape,
                    quotient.data(), shape, g.data());
      binaryForward(threads, DType::F32, BinaryOp::Div, g.data(), shape, b,
                    bShape, g.data());
      scale(threads, DType::F32, g.data(), g.data(), n, -1.0f);
      gb = g.data();
    }
    sumToShape(threads, gb, shape, bShape, db);
  }
}

void scale(int threads, DType dt, const void *x, void *y, int64_t n,
           float factor) {
  withStorage(dt, [&](auto s) {
    mapUnary<decltype(s)>(threads, x, y, n,
                          [factor](float v) { return factor * v; });
  });
}

void activationForward(int threads, DType dt, Activation kind, const void *x,
                       void *y, int64_t n) {
  withStorage(dt, [&](auto s) {
    using S = decltype(s);
    switch (kind) {
    case Activation::Relu:
      return mapUnary<S>(threads, x, y, n,
                         [](float v) { return reluForward(v); });
    case Activation::Gelu:
      return mapUnary<S>(threads, x, y, n,
                         [](float v) { return geluForward(v); });
    case Activation::GeluTanh:
      return mapUnary<S>(threads, x, y, n,
                         [](float v) { return geluTanhForward(v); });
    case Activation::Silu:
      return mapUnary<S>(threads, x, y, n,
                         [](float v) { return siluForward(v); });
    }
  });
}

void activationBackward(int threads, DType dt, Activation kind, const void *x,
                        const void *dy, void *dx, int64_t n) {
  withStorage(dt, [&](auto s) {
    using S = decltype(s);
    switch (kind) {
    case Activation::Relu:
      return mapBinary<S>(threads, x, dy, dx, n,
                          [](float v, float g) { return reluBackward(v, g); });
    case Activation::Gelu:
      return mapBinary<S>(threads, x, dy, dx, n,
                          [](float v, float g) { return geluBackward(v, g); });
    case Activation::GeluTanh:
      return mapBinary<S>(threads, x, dy, dx, n, [](float v, float g) {
        return geluTanhBackward(v, g);
      });
    case Activation::Silu:
      return mapBinary<S>(threads, x, dy, dx, n,
                          [](float v, float g) { return siluBackward(v, g); });
    }
  });
}

void unaryForward(int threads, DType dt, UnaryMath kind, const void *x,
                  void *y, int64_t n, float a, float b) {
  int code = static_cast<int>(kind);
  withStorage(dt, [&](auto s) {
    mapUnary<decltype(s)>(threads, x, y, n, [=](float v) {
      return ::fsdp::rt::unaryForward(code, v, a, b);
    });
  });
}

void unaryBackward(int threads, DType dt, UnaryMath kind, const void *x,
                   const void *dy, void *dx, int64_t n, float a, float b) {
  int code = static_cast<int>(kind);
  withStorage(dt, [&](auto s) {
    mapBinary<decltype(s)>(threads, x, dy, dx, n, [=](float v, float g) {
      return ::fsdp::rt::unaryBackward(code, v, g, a, b);
    });
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
