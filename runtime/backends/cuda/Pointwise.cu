//===- Pointwise.cu - Pointwise kernels -----------------------------------===//
//
// Binary ops with broadcasting (integer add / sub / mul too), scale,
// activations and unary math (the CPU backend's FSDPRT_HD bodies, on the
// storage type), bias row seeds, rotary embeddings, dropout and random
// fills (Philox, as on the CPU).
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include "fsdp/rt/math/Activation.h"
#include "fsdp/rt/math/Philox.h"
#include "fsdp/rt/math/Pointwise.h"
#include "fsdp/rt/math/Rotary.h"
#include "fsdp/rt/math/Unary.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

template <typename S>
__global__ void binaryBroadcastKernel(int op, const typename S::T *a,
                                      const typename S::T *b,
                                      typename S::T *out, Dims d, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t oa, ob;
    offsetsOf(d, i, oa, ob);
    out[i] = S::store(binaryApply(op, S::load(a[oa]), S::load(b[ob])));
  }
}

/// Integer add / sub / mul / floor_div with broadcasting (d: both operands' strides).
template <typename I>
__global__ void integerBinaryKernel(int op, const I *a, const I *b, I *out,
                                    Dims d, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t oa, ob;
    offsetsOf(d, i, oa, ob);
    out[i] = IntegerStorage<I>::store(integerBinaryApply(op, a[oa], b[ob]));
  }
}

/// The broadcast shape's dims with each operand's strides.
Dims broadcastDims(const Shape &aShape, const Shape &bShape) {
  Shape shape = broadcastShapes(aShape, bShape);
  requireRank(shape.size(), "broadcast");
  std::vector<int64_t> sa = broadcastStrides(aShape, shape),
                       sb = broadcastStrides(bShape, shape);
  Dims d;
  d.rank = static_cast<int>(shape.size());
  for (int i = 0; i < d.rank; ++i) {
    d.size[i] = shape[i];
    d.strideA[i] = sa[i];
    d.strideB[i] = sb[i];
  }
  return d;
}

__global__ void addBatchesKernel(float *dst, const float *src,
                                 int64_t batch, int64_t n, int64_t srcStride) {
  FSDPRT_GRID_STRIDE(i, n) {
    for (int64_t b = 0; b < batch; ++b)
      dst[b * n + i] += src[b * srcStride + i];
  }
}

__global__ void accumulateBatchesKernel(float *dst, const float *src,
                                        int64_t batch, int64_t n,
                                        int64_t dstStride) {
  FSDPRT_GRID_STRIDE(i, n) {
    for (int64_t b = 0; b < batch; ++b) // one thread per element: in order
      dst[b * dstStride + i] += src[b * n + i];
  }
}

__device__ inline float activate(int kind, float v) {
  switch (kind) {
  case FSDPRT_RELU:
    return reluForward(v);
  case FSDPRT_GELU:
    return geluForward(v);
  case FSDPRT_GELU_TANH:
    return geluTanhForward(v);
  default:
    return siluForward(v);
  }
}

__device__ inline float activateBackward(int kind, float v, float g) {
  switch (kind) {
  case FSDPRT_RELU:
    return reluBackward(v, g);
  case FSDPRT_GELU:
    return geluBackward(v, g);
  case FSDPRT_GELU_TANH:
    return geluTanhBackward(v, g);
  default:
    return siluBackward(v, g);
  }
}

// The pointwise ops as mapKernel functors (KernelSupport.cuh).
struct BinaryF {
  int op;
  __device__ float operator()(float a, float b) const {
    return binaryApply(op, a, b);
  }
};
struct ScaleF {
  float factor;
  __device__ float operator()(float x, float) const { return factor * x; }
};
struct ActivationF {
  int kind;
  __device__ float operator()(float x, float) const { return activate(kind, x); }
};
struct ActivationBackwardF {
  int kind;
  __device__ float operator()(float x, float dy) const {
    return activateBackward(kind, x, dy);
  }
};
struct UnaryF {
  int kind;
  float a, b;
  __device__ float operator()(float x, float) const {
    return ::fsdp::rt::unaryForward(kind, x, a, b);
  }
};
struct UnaryBackwardF {
  int kind;
  float a, b;
  __device__ float operator()(float x, float dy) const {
    return ::fsdp::rt::unaryBackward(kind, x, dy, a, b);
  }
};

/// One block per row: no 64-bit division per element (emulated on GPUs).
template <typename T>
__global__ void seedRowsKernel(const T *b, T *y, int64_t m, int64_t n) {
  FSDPRT_ROW_STRIDE(r, m) {
    FSDPRT_COL_STRIDE(j, n) { y[r * n + j] = b[j]; }
  }
}

__global__ void ropeKernel(const float *x, float *y, int64_t pairs, int64_t seq,
                           int64_t heads, int64_t headDim, double theta,
                           float sign) {
  int64_t half = headDim / 2;
  FSDPRT_GRID_STRIDE(p, pairs) {
    int64_t i = p % half;
    int64_t rh = p / half; // (row, head)
    int64_t h = rh % heads, r = rh / heads, t = r % seq;
    float c, s;
    rotaryAngle(t, i, headDim, theta, c, s);
    int64_t at = r * heads * headDim + h * headDim + 2 * i;
    rotatePair(x[at], x[at + 1], c, sign * s, y[at], y[at + 1]);
  }
}

template <typename S>
__global__ void dropoutKernel(const typename S::T *x, typename S::T *y,
                              int64_t n, float p, RngKey key,
                              const RngKey *live) {
  if (live) // a step graph's launch refreshes it (Backend.h)
    key = *live;
  FSDPRT_GRID_STRIDE(blk, (n + 3) / 4) {
    Philox4x32 r = philoxBlock(key.seed, key.step, key.rngId, blk);
    for (int l = 0; l < 4 && blk * 4 + l < n; ++l) {
      int64_t i = blk * 4 + l;
      y[i] =
          S::store(S::load(x[i]) * dropoutFactor(uniformFromBits(r.v[l]), p));
    }
  }
}

__global__ void rngFillKernel(float *dst, int64_t n, bool uniform, float a,
                              float b, RngKey key, const RngKey *live) {
  if (live)
    key = *live;
  FSDPRT_GRID_STRIDE(blk, (n + 3) / 4) {
    Philox4x32 r = philoxBlock(key.seed, key.step, key.rngId, blk);
    float out[4];
    philoxSamples(r, uniform, a, b, out);
    for (int l = 0; l < 4 && blk * 4 + l < n; ++l)
      dst[blk * 4 + l] = out[l];
  }
}

} // namespace

void seedRows(Stream s, DType dt, const void *b, void *y, int64_t m,
              int64_t n) {
  withStorage(dt, [&](auto st) {
    using T = typename decltype(st)::T;
    FSDPRT_LAUNCH_ROWS(seedRowsKernel<T>, n > 0 ? m : 0, s,
                       static_cast<const T *>(b), static_cast<T *>(y), m, n);
  });
}

void binaryForward(Stream s, DType dt, BinaryOp op, const void *a,
                   const Shape &aShape, const void *b, const Shape &bShape,
                   void *out) {
  int code = static_cast<int>(op);
  int64_t n = numelOf(broadcastShapes(aShape, bShape));
  if (dt == DType::I32) {
    FSDPRT_LAUNCH(integerBinaryKernel<int32_t>, n, s, code,
                  static_cast<const int32_t *>(a),
                  static_cast<const int32_t *>(b), static_cast<int32_t *>(out),
                  broadcastDims(aShape, bShape), n);
    return;
  }
  if (dt == DType::I64) {
    FSDPRT_LAUNCH(integerBinaryKernel<int64_t>, n, s, code,
                  static_cast<const int64_t *>(a),
                  static_cast<const int64_t *>(b), static_cast<int64_t *>(out),
                  broadcastDims(aShape, bShape), n);
    return;
  }
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    if (aShape == bShape)
      return launchMap<S>(s, BinaryF{code}, a, b, out, n);
    FSDPRT_LAUNCH(binaryBroadcastKernel<S>, n, s, code,
                  static_cast<const T *>(a), static_cast<const T *>(b),
                  static_cast<T *>(out), broadcastDims(aShape, bShape), n);
  });
}

void scale(Stream s, DType dt, const void *x, void *y, int64_t n,
           float factor) {
  withStorage(dt, [&](auto st) {
    launchMap<decltype(st)>(s, ScaleF{factor}, x, nullptr, y, n);
  });
}

void addBatches(Stream s, float *dst, const float *src, int64_t batch,
                int64_t n, int64_t srcStride) {
  FSDPRT_LAUNCH(addBatchesKernel, n, s, dst, src, batch, n, srcStride);
}

void accumulateBatches(Stream s, float *dst, const float *src, int64_t batch,
                       int64_t n, int64_t dstStride) {
  FSDPRT_LAUNCH(accumulateBatchesKernel, n, s, dst, src, batch, n, dstStride);
}

void activationForward(Stream s, DType dt, Activation kind, const void *x,
                       void *y, int64_t n) {
  withStorage(dt, [&](auto st) {
    launchMap<decltype(st)>(s, ActivationF{static_cast<int>(kind)}, x,
                            nullptr, y, n);
  });
}

void activationBackward(Stream s, DType dt, Activation kind, const void *x,
                        const void *dy, void *dx, int64_t n) {
  withStorage(dt, [&](auto st) {
    launchMap<decltype(st)>(s, ActivationBackwardF{static_cast<int>(kind)}, x,
                            dy, dx, n);
  });
}

void unaryForward(Stream s, DType dt, UnaryMath kind, const void *x, void *y,
                  int64_t n, float a, float b) {
  withStorage(dt, [&](auto st) {
    launchMap<decltype(st)>(s, UnaryF{static_cast<int>(kind), a, b}, x,
                            nullptr, y, n);
  });
}

void unaryBackward(Stream s, DType dt, UnaryMath kind, const void *x,
                   const void *dy, void *dx, int64_t n, float a, float b) {
  withStorage(dt, [&](auto st) {
    launchMap<decltype(st)>(s, UnaryBackwardF{static_cast<int>(kind), a, b},
                            x, dy, dx, n);
  });
}

void rope(Stream s, const float *x, float *y, int64_t batch, int64_t seq,
          int64_t heads, int64_t headDim, double theta, bool inverse) {
  int64_t pairs = batch * seq * heads * (headDim / 2);
  FSDPRT_LAUNCH(ropeKernel, pairs, s, x, y, pairs, seq, heads, headDim, theta,
                inverse ? -1.0f : 1.0f);
}

void dropout(Stream s, DType dt, const void *x, void *y, int64_t n, float p,
             const RngKey &key, const RngKey *live) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(dropoutKernel<S>, (n + 3) / 4, s, static_cast<const T *>(x),
                  static_cast<T *>(y), n, p, key, live);
  });
}

void rngFill(Stream s, float *dst, int64_t n, Distribution dist, float a,
             float b, const RngKey &key, const RngKey *live) {
  FSDPRT_LAUNCH(rngFillKernel, (n + 3) / 4, s, dst, n,
                dist == Distribution::Uniform, a, b, key, live);
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
