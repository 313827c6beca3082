//===- Kernels.cu - The CUDA backend's kernels ----------------------------===//
//
// See Kernels.h. Every kernel is a grid-stride loop (Device.h) over its
// independent items; the rows of norms, softmax and cross-entropy are in
// RowKernels.cu (one block per row).
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include "fsdp/rt/math/Activation.h"
#include "fsdp/rt/math/Unary.h"
#include "fsdp/rt/math/BatchNorm.h"
#include "fsdp/rt/math/Half.h"
#include "fsdp/rt/OptimizerScalars.h"
#include "fsdp/rt/math/Philox.h"
#include "fsdp/rt/math/Pointwise.h"
#include "fsdp/rt/math/Rotary.h"

#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <cstring>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

//===----------------------------------------------------------------------===//
// Conversions and fills
//===----------------------------------------------------------------------===//

__device__ inline float loadAsFloat(int srcType, const void *p, int64_t i) {
  switch (srcType) {
  case FSDPRT_F32:
    return static_cast<const float *>(p)[i];
  case FSDPRT_BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case FSDPRT_F16:
    return f16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case FSDPRT_I32:
    return static_cast<float>(static_cast<const int32_t *>(p)[i]);
  default:
    return static_cast<float>(static_cast<const int64_t *>(p)[i]);
  }
}

__global__ void convertKernel(int srcType, const void *src, int dstType,
                              void *dst, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    float v = loadAsFloat(srcType, src, i);
    if (dstType == FSDPRT_F32)
      static_cast<float *>(dst)[i] = v;
    else if (dstType == FSDPRT_BF16)
      static_cast<uint16_t *>(dst)[i] = floatToBf16(v);
    else
      static_cast<uint16_t *>(dst)[i] = floatToF16(v);
  }
}

template <typename T> __global__ void fillKernel(T *dst, T pattern, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) { dst[i] = pattern; }
}

template <typename T>
__global__ void addIntegerKernel(T *dst, T value, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) { dst[i] += value; }
}

//===----------------------------------------------------------------------===//
// Shapes passed by value to kernels
//===----------------------------------------------------------------------===//

constexpr int kMaxRank = 12;

struct Dims {
  int rank = 0;
  int64_t size[kMaxRank];
  int64_t strideA[kMaxRank];
  int64_t strideB[kMaxRank];
};

void requireRank(size_t rank, const char *what) {
  if (rank > static_cast<size_t>(kMaxRank))
    fail(Status::Unsupported, "cuda backend: ", what, " of rank ", rank,
         " (at most ", kMaxRank, " supported)");
}

/// Row-major strides of `operand` right-aligned in `shape`, 0 where it
/// broadcasts (as cpu::broadcastStrides).
std::vector<int64_t> broadcastStrides(const Shape &operand,
                                      const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 0);
  std::vector<int64_t> own = stridesOf(operand);
  size_t lead = shape.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i)
    strides[lead + i] = operand[i] == 1 ? 0 : own[i];
  return strides;
}

/// Offsets of linear index i (row-major over d.size) along strideA / strideB.
__device__ inline void offsetsOf(const Dims &d, int64_t i, int64_t &a,
                                 int64_t &b) {
  a = 0;
  b = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    int64_t idx = i % d.size[k];
    i /= d.size[k];
    a += idx * d.strideA[k];
    b += idx * d.strideB[k];
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename S>
__global__ void binarySameKernel(int op, const typename S::T *a,
                                 const typename S::T *b, typename S::T *out,
                                 int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    out[i] = S::store(binaryApply(op, S::load(a[i]), S::load(b[i])));
  }
}

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

template <typename S>
__global__ void scaleKernel(const typename S::T *x, typename S::T *y, int64_t n,
                            float factor) {
  FSDPRT_GRID_STRIDE(i, n) { y[i] = S::store(factor * S::load(x[i])); }
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

template <typename S>
__global__ void activationKernel(int kind, const typename S::T *x,
                                 typename S::T *y, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) { y[i] = S::store(activate(kind, S::load(x[i]))); }
}

template <typename S>
__global__ void activationBackwardKernel(int kind, const typename S::T *x,
                                         const typename S::T *dy,
                                         typename S::T *dx, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    dx[i] = S::store(activateBackward(kind, S::load(x[i]), S::load(dy[i])));
  }
}

template <typename S>
__global__ void unaryKernel(int kind, const typename S::T *x, typename S::T *y,
                            int64_t n, float a, float b) {
  FSDPRT_GRID_STRIDE(i, n) {
    y[i] = S::store(::fsdp::rt::unaryForward(kind, S::load(x[i]), a, b));
  }
}

template <typename S>
__global__ void unaryBackwardKernel(int kind, const typename S::T *x,
                                    const typename S::T *dy, typename S::T *dx,
                                    int64_t n, float a, float b) {
  FSDPRT_GRID_STRIDE(i, n) {
    dx[i] = S::store(
        ::fsdp::rt::unaryBackward(kind, S::load(x[i]), S::load(dy[i]), a, b));
  }
}

/// One block per row: no 64-bit division per element (emulated on GPUs).
template <typename T>
__global__ void seedRowsKernel(const T *b, T *y, int64_t m, int64_t n) {
  FSDPRT_ROW_STRIDE(r, m) {
    FSDPRT_COL_STRIDE(j, n) { y[r * n + j] = b[j]; }
  }
}

/// Sums down columns (bias gradients, reduce, norm weight gradients) run in
/// two passes: chunk c of column k sums its `len` reduced indices in order
/// into partial[c * columns + k] (enough chunks for ~64k threads), then each
/// column adds its chunks in order: parallel, and the same bits every run.
struct ColumnChunks {
  int64_t count, len;
};
ColumnChunks columnChunks(int64_t columns, int64_t reduced) {
  int64_t want = (65536 + columns - 1) / std::max<int64_t>(columns, 1);
  int64_t count = std::max<int64_t>(1, std::min(want, (reduced + 63) / 64));
  int64_t len = std::max<int64_t>(1, (reduced + count - 1) / count);
  return {(reduced + len - 1) / len, len};
}

template <typename S>
__global__ void columnSumsPartialKernel(const typename S::T *x, double *partial,
                                        int64_t m, int64_t n, ColumnChunks ch) {
  FSDPRT_GRID_STRIDE(i, n * ch.count) {
    int64_t j = i % n, c = i / n, end = std::min(m, (c + 1) * ch.len);
    double acc = 0.0;
    for (int64_t r = c * ch.len; r < end; ++r)
      acc += S::load(x[r * n + j]);
    partial[i] = acc;
  }
}

/// out[k] = factor * sum_c partial[c * columns + k], chunks in order.
__global__ void columnChunksFinishKernel(const double *partial, float *out,
                                         int64_t columns, int64_t chunks,
                                         double factor) {
  FSDPRT_GRID_STRIDE(k, columns) {
    double acc = 0.0;
    for (int64_t c = 0; c < chunks; ++c)
      acc += partial[c * columns + k];
    out[k] = static_cast<float>(acc * factor);
  }
}

/// Kept dims (output index space) in strideA, reduced dims in strideB; the
/// reduced sub-space is walked row-major in dim order (as the CPU's
/// subspaceOffsets), so each output sums in the same order.
struct ReduceGeom {
  Dims kept;    // size + strideA
  Dims reduced; // size + strideA
  int64_t reducedCount;
};

__global__ void reducePartialKernel(const float *x, double *partial,
                                    ReduceGeom g, int64_t outCount,
                                    ColumnChunks ch) {
  FSDPRT_GRID_STRIDE(i, outCount * ch.count) {
    int64_t k = i % outCount, c = i / outCount, base, off, unused;
    offsetsOf(g.kept, k, base, unused);
    int64_t end = std::min(g.reducedCount, (c + 1) * ch.len);
    double acc = 0.0;
    for (int64_t r = c * ch.len; r < end; ++r) {
      offsetsOf(g.reduced, r, off, unused);
      acc += x[base + off];
    }
    partial[i] = acc;
  }
}

__global__ void reduceBackwardKernel(const float *dy, float *dx, Dims d,
                                     float factor, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t off, unused;
    offsetsOf(d, i, off, unused);
    dx[i] = dy[off] * factor;
  }
}

//===----------------------------------------------------------------------===//
// Norms: weight gradients (column sums) and batch_norm (one thread per
// channel); the row kernels are in RowKernels.cu
//===----------------------------------------------------------------------===//

/// Chunk sums (ColumnChunks) of dw[j] = sum_r dy * xhat and db[j] = sum_r dy
/// into pw / pb. mean == nullptr means rms_norm (xhat = x * rstd).
template <typename S>
__global__ void normColumnsPartialKernel(const typename S::T *x,
                                         const typename S::T *dy,
                                         const float *mean, const float *rstd,
                                         double *pw, double *pb, int64_t rows,
                                         int64_t d, ColumnChunks ch) {
  FSDPRT_GRID_STRIDE(i, d * ch.count) {
    int64_t j = i % d, c = i / d, end = std::min(rows, (c + 1) * ch.len);
    double aw = 0.0, ab = 0.0;
    for (int64_t r = c * ch.len; r < end; ++r) {
      float g = S::load(dy[r * d + j]), xv = S::load(x[r * d + j]);
      float xhat = mean ? (xv - mean[r]) * rstd[r] : xv * rstd[r];
      aw += static_cast<double>(g) * xhat;
      ab += g;
    }
    pw[i] = aw;
    pb[i] = ab;
  }
}

__global__ void batchNormKernel(const float *x, const float *w, const float *b,
                                float *runningMean, float *runningVar, float *y,
                                int64_t n, int64_t c, int64_t spatial,
                                float eps, float momentum, bool training) {
  FSDPRT_GRID_STRIDE(ch, c) {
    batchNormChannelForward(x, w, b, runningMean, runningVar, y, n, c, spatial,
                            ch, eps, momentum, training);
  }
}

__global__ void batchNormBackwardKernel(
    const float *x, const float *w, const float *runningMean,
    const float *runningVar, const float *dy, float *dx, float *dw, float *db,
    int64_t n, int64_t c, int64_t spatial, float eps, bool training) {
  FSDPRT_GRID_STRIDE(ch, c) {
    batchNormChannelBackward(x, w, runningMean, runningVar, dy, dx, dw, db, n,
                             c, spatial, ch, eps, training);
  }
}

//===----------------------------------------------------------------------===//
// Embedding, rope, random
//===----------------------------------------------------------------------===//


/// firstBad holds the smallest offending position (initialised to n).
__global__ void indexCheckInitKernel(unsigned long long *flags, int64_t n) {
  FSDPRT_GRID_STRIDE(i, 1) {
    flags[0] = static_cast<unsigned long long>(n);
    flags[1] = 0;
  }
}

__global__ void checkIndexKernel(bool i32, const void *ids, int64_t n,
                                 int64_t limit, bool hasIgnore,
                                 int64_t ignoreIndex,
                                 unsigned long long *firstBad,
                                 unsigned long long *count) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t v = loadIndex(i32, ids, i);
    if (hasIgnore && v == ignoreIndex)
      continue;
    if (v < 0 || v >= limit)
      atomicMin(firstBad, static_cast<unsigned long long>(i));
    else if (count)
      atomicAdd(count, 1ull); // integer: order-independent
  }
}

/// verdict = {first bad position, the index there} (n and 0 when none).
__global__ void indexVerdictKernel(bool i32, const void *ids, int64_t n,
                                   const unsigned long long *flags,
                                   int64_t *verdict) {
  FSDPRT_GRID_STRIDE(i, 1) {
    int64_t bad = static_cast<int64_t>(flags[0]);
    verdict[0] = bad;
    verdict[1] = bad < n ? loadIndex(i32, ids, bad) : 0;
  }
}

/// Rows of out-of-range ids (reported by the index check at the next
/// synchronisation) are left as they are: nothing outside the table is read.
template <typename T>
__global__ void gatherKernel(bool i32, const void *ids, const T *table, T *out,
                             int64_t numIds, int64_t vocab, int64_t dim) {
  FSDPRT_GRID_STRIDE(e, numIds * dim) {
    int64_t i = e / dim, j = e % dim, id = loadIndex(i32, ids, i);
    if (id >= 0 && id < vocab)
      out[e] = table[id * dim + j];
  }
}

/// One thread per table column; positions added in order (no atomics), as
/// the CPU backend does.
__global__ void iotaKernel(int64_t *out, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) { out[i] = i; }
}

/// Over the positions sorted by id (stable: equal ids keep position order),
/// the first position of each id sums its rows of dy in that order, as the
/// CPU's scatter-add does, into the id's row of dtable.
template <typename K>
__global__ void embeddingSegmentsKernel(const K *sortedIds,
                                        const int64_t *positions,
                                        const float *dy, float *dtable,
                                        int64_t numIds, int64_t vocab,
                                        int64_t dim) {
  FSDPRT_GRID_STRIDE(i, numIds * dim) {
    int64_t s = i / dim, j = i % dim;
    K id = sortedIds[s];
    if ((s > 0 && sortedIds[s - 1] == id) || id < 0 || id >= vocab)
      continue; // not a segment's start, or an id the check reports
    float acc = 0.0f;
    for (int64_t t = s; t < numIds && sortedIds[t] == id; ++t)
      acc += dy[positions[t] * dim + j];
    dtable[static_cast<int64_t>(id) * dim + j] = acc;
  }
}

/// Sorts (id, position) pairs by id with CUB's stable radix sort over the
/// bits the vocabulary needs, then sums each id's segment.
template <typename K>
void embeddingBackwardSorted(Stream s, const K *ids, const float *dy,
                             float *dtable, int64_t numIds, int64_t vocab,
                             int64_t dim) {
  int endBit = 1;
  while (endBit < 63 && (int64_t(1) << endBit) < vocab)
    ++endBit;
  Scratch keys(s, numIds * sizeof(K)), pos(s, 2 * numIds * 8);
  int64_t *posIn = pos.as<int64_t>(), *posOut = posIn + numIds;
  FSDPRT_LAUNCH(iotaKernel, numIds, s, posIn, numIds);
  size_t tempBytes = 0;
  checkCuda(cub::DeviceRadixSort::SortPairs(
                nullptr, tempBytes, ids, keys.as<K>(), posIn, posOut,
                numIds, 0, endBit, s),
            "cub::DeviceRadixSort::SortPairs (size)");
  Scratch temp(s, static_cast<int64_t>(tempBytes));
  checkCuda(cub::DeviceRadixSort::SortPairs(
                temp.as<void>(), tempBytes, ids, keys.as<K>(), posIn, posOut,
                numIds, 0, endBit, s),
            "cub::DeviceRadixSort::SortPairs");
  FSDPRT_LAUNCH(embeddingSegmentsKernel<K>, numIds * dim, s, keys.as<K>(),
                posOut, dy, dtable, numIds, vocab, dim);
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
                              int64_t n, float p, RngKey key) {
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
                              float b, RngKey key) {
  FSDPRT_GRID_STRIDE(blk, (n + 3) / 4) {
    Philox4x32 r = philoxBlock(key.seed, key.step, key.rngId, blk);
    float out[4];
    philoxSamples(r, uniform, a, b, out);
    for (int l = 0; l < 4 && blk * 4 + l < n; ++l)
      dst[blk * 4 + l] = out[l];
  }
}

//===----------------------------------------------------------------------===//
// Layout
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void transposeKernel(const T *x, T *y, Dims d, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t off, unused;
    offsetsOf(d, i, off, unused);
    y[i] = x[off];
  }
}

//===----------------------------------------------------------------------===//
// Blocked sums (as cpu::blockedSum: fixed 16384-element blocks, each summed
// in order, then the block sums added in block order)
//===----------------------------------------------------------------------===//

constexpr int64_t kSumBlock = 16384;

struct SquareTerm {
  const float *x;
  __device__ double operator()(int64_t i) const {
    return static_cast<double>(x[i]) * x[i];
  }
};
struct MseTerm {
  const float *a, *b;
  __device__ double operator()(int64_t i) const {
    double diff = static_cast<double>(a[i]) - b[i];
    return diff * diff;
  }
};
struct ArrayTerm {
  const double *v;
  __device__ double operator()(int64_t i) const { return v[i]; }
};

template <typename Term>
__global__ void blockSumKernel(Term term, int64_t n, double *partial) {
  FSDPRT_GRID_STRIDE(blk, (n + kSumBlock - 1) / kSumBlock) {
    int64_t end = (blk + 1) * kSumBlock < n ? (blk + 1) * kSumBlock : n;
    double sum = 0.0;
    for (int64_t i = blk * kSumBlock; i < end; ++i)
      sum += term(i);
    partial[blk] = sum;
  }
}

/// Finish kernels are launched with one block; only its first thread works
/// (they read-modify-write a single scalar).
__device__ inline bool firstThread() {
  return blockIdx.x == 0 && threadIdx.x == 0;
}

__device__ inline double totalOf(const double *partial, int64_t blocks) {
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b)
    total += partial[b];
  return total;
}

/// Partial block sums of `term` over [0, n) into fresh scratch.
template <typename Term>
Scratch blockSums(Stream s, Term term, int64_t n, int64_t &blocks) {
  blocks = (n + kSumBlock - 1) / kSumBlock;
  Scratch partial(s, std::max<int64_t>(blocks, 1) * 8);
  FSDPRT_LAUNCH(blockSumKernel<Term>, blocks, s, term, n, partial.as<double>());
  return partial;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

__global__ void crossEntropyFinishKernel(const double *partial, int64_t blocks,
                                         const int64_t *count, bool mean,
                                         float *loss) {
  if (!firstThread())
    return;
  double total = totalOf(partial, blocks);
  *loss =
      static_cast<float>(mean ? total / static_cast<double>(*count) : total);
}

__global__ void mseFinishKernel(const double *partial, int64_t blocks,
                                int64_t n, bool mean, float *loss) {
  if (!firstThread())
    return;
  double total = totalOf(partial, blocks);
  *loss = static_cast<float>(mean ? total / static_cast<double>(n) : total);
}

__global__ void mseBackwardKernel(const float *a, const float *b,
                                  const float *dloss, float *da, float *db,
                                  int64_t n, bool mean) {
  float g = 2.0f * (mean ? *dloss / static_cast<float>(n) : *dloss);
  FSDPRT_GRID_STRIDE(i, n) {
    float d = g * (a[i] - b[i]);
    if (da)
      da[i] = d;
    if (db)
      db[i] = -d;
  }
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

__global__ void sgdKernel(float *param, const float *grad, float *momentumBuf,
                          int64_t n, SgdScalars s, const float *skip) {
  if (skip && *skip != 0.0f)
    return;
  FSDPRT_GRID_STRIDE(i, n) {
    sgdUpdate(param[i], grad[i], momentumBuf ? momentumBuf + i : nullptr, s);
  }
}

__global__ void adamwKernel(float *param, const float *grad, float *expAvg,
                            float *expAvgSq, int64_t n, AdamWScalars s,
                            const float *skip) {
  if (skip && *skip != 0.0f)
    return;
  FSDPRT_GRID_STRIDE(i, n) {
    adamwUpdate(param[i], grad[i], expAvg[i], expAvgSq[i], s);
  }
}

__global__ void clearUnlessKernel(float *out, bool keep) {
  if (firstThread() && !keep)
    *out = 0.0f;
}

// Threads that see a non-finite element all store 1: the same value.
__global__ void nonfiniteKernel(const float *x, int64_t n, float *out) {
  FSDPRT_GRID_STRIDE(i, n) {
    if (!std::isfinite(x[i]))
      *out = 1.0f;
  }
}

__global__ void sqNormFinishKernel(const double *partial, int64_t blocks,
                                   float *out, bool accumulate) {
  if (!firstThread())
    return;
  double sum = totalOf(partial, blocks);
  *out = static_cast<float>((accumulate ? *out : 0.0) + sum);
}

template <typename S>
__global__ void clipKernel(typename S::T *grad, int64_t n, const float *totalSq,
                           float maxNorm) {
  // torch.nn.utils.clip_grad_norm_: f32 arithmetic on the norm.
  float totalNorm = std::sqrt(*totalSq);
  float coef = maxNorm / (totalNorm + 1e-6f);
  if (coef >= 1.0f)
    return;
  FSDPRT_GRID_STRIDE(i, n) { grad[i] = S::store(coef * S::load(grad[i])); }
}

__global__ void clipCoefficientKernel(const float *totalSq, float *norm,
                                      float *coef, float maxNorm) {
  FSDPRT_GRID_STRIDE(i, 1) {
    (void)i; // one thread's worth of work
    *norm = std::sqrt(*totalSq);
    float c = maxNorm / (*norm + 1e-6f);
    *coef = c < 1.0f ? c : 1.0f;
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

void convert(Stream s, DType srcType, const void *src, DType dstType, void *dst,
             int64_t n) {
  if (srcType == dstType) {
    if (n > 0 && dst != src)
      checkCuda(cudaMemcpyAsync(dst, src, n * dtypeSize(srcType),
                                cudaMemcpyDeviceToDevice, s),
                "cudaMemcpyAsync (cast)");
    return;
  }
  if (!isFloat(dstType))
    fail(Status::InvalidArgument, "cannot convert ", dtypeName(srcType),
         " to integer type ", dtypeName(dstType));
  FSDPRT_LAUNCH(convertKernel, n, s, static_cast<int>(srcType), src,
                static_cast<int>(dstType), dst, n);
}

void fill(Stream s, DType dt, void *dst, int64_t n, double value) {
  switch (dt) {
  case DType::I32:
    FSDPRT_LAUNCH(fillKernel<int32_t>, n, s, static_cast<int32_t *>(dst),
                  static_cast<int32_t>(value), n);
    return;
  case DType::I64:
    FSDPRT_LAUNCH(fillKernel<int64_t>, n, s, static_cast<int64_t *>(dst),
                  static_cast<int64_t>(value), n);
    return;
  case DType::F32:
    FSDPRT_LAUNCH(fillKernel<float>, n, s, static_cast<float *>(dst),
                  static_cast<float>(value), n);
    return;
  case DType::BF16:
    FSDPRT_LAUNCH(fillKernel<uint16_t>, n, s, static_cast<uint16_t *>(dst),
                  floatToBf16(static_cast<float>(value)), n);
    return;
  case DType::F16:
    FSDPRT_LAUNCH(fillKernel<uint16_t>, n, s, static_cast<uint16_t *>(dst),
                  floatToF16(static_cast<float>(value)), n);
    return;
  }
}

void addInteger(Stream s, DType dt, void *dst, int64_t n, int64_t value) {
  if (dt == DType::I32)
    FSDPRT_LAUNCH(addIntegerKernel<int32_t>, n, s, static_cast<int32_t *>(dst),
                  static_cast<int32_t>(value), n);
  else
    FSDPRT_LAUNCH(addIntegerKernel<int64_t>, n, s, static_cast<int64_t *>(dst),
                  value, n);
}

void seedRows(Stream s, DType dt, const void *b, void *y, int64_t m,
              int64_t n) {
  withStorage(dt, [&](auto st) {
    using T = typename decltype(st)::T;
    FSDPRT_LAUNCH_ROWS(seedRowsKernel<T>, n > 0 ? m : 0, s,
                       static_cast<const T *>(b), static_cast<T *>(y), m, n);
  });
}

void columnSums(Stream s, DType dt, const void *x, float *out, int64_t m,
                int64_t n, double factor) {
  ColumnChunks ch = columnChunks(n, m);
  Scratch partial(s, n * ch.count * 8);
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH(columnSumsPartialKernel<S>, n * ch.count, s,
                  static_cast<const typename S::T *>(x), partial.as<double>(),
                  m, n, ch);
  });
  FSDPRT_LAUNCH(columnChunksFinishKernel, n, s, partial.as<double>(), out, n,
                ch.count, factor);
}

void binaryForward(Stream s, DType dt, BinaryOp op, const void *a,
                   const Shape &aShape, const void *b, const Shape &bShape,
                   void *out) {
  int code = static_cast<int>(op);
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    auto *pa = static_cast<const T *>(a);
    auto *pb = static_cast<const T *>(b);
    auto *po = static_cast<T *>(out);
    if (aShape == bShape) {
      int64_t n = numelOf(aShape);
      FSDPRT_LAUNCH(binarySameKernel<S>, n, s, code, pa, pb, po, n);
      return;
    }
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
    int64_t n = numelOf(shape);
    FSDPRT_LAUNCH(binaryBroadcastKernel<S>, n, s, code, pa, pb, po, d, n);
  });
}

void scale(Stream s, DType dt, const void *x, void *y, int64_t n,
           float factor) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(scaleKernel<S>, n, s, static_cast<const T *>(x),
                  static_cast<T *>(y), n, factor);
  });
}

void activationForward(Stream s, DType dt, Activation kind, const void *x,
                       void *y, int64_t n) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(activationKernel<S>, n, s, static_cast<int>(kind),
                  static_cast<const T *>(x), static_cast<T *>(y), n);
  });
}

void activationBackward(Stream s, DType dt, Activation kind, const void *x,
                        const void *dy, void *dx, int64_t n) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(activationBackwardKernel<S>, n, s, static_cast<int>(kind),
                  static_cast<const T *>(x), static_cast<const T *>(dy),
                  static_cast<T *>(dx), n);
  });
}

void unaryForward(Stream s, DType dt, UnaryMath kind, const void *x, void *y,
                  int64_t n, float a, float b) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(unaryKernel<S>, n, s, static_cast<int>(kind),
                  static_cast<const T *>(x), static_cast<T *>(y), n, a, b);
  });
}

void unaryBackward(Stream s, DType dt, UnaryMath kind, const void *x,
                   const void *dy, void *dx, int64_t n, float a, float b) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(unaryBackwardKernel<S>, n, s, static_cast<int>(kind),
                  static_cast<const T *>(x), static_cast<const T *>(dy),
                  static_cast<T *>(dx), n, a, b);
  });
}

void reduceForward(Stream s, DType dt, ReduceKind kind, const void *x,
                   const Shape &xShape, const std::vector<int64_t> &dims,
                   float *y) {
  requireRank(xShape.size(), "reduce input");
  std::vector<bool> reduced(xShape.size(), false);
  for (int64_t d : dims)
    reduced[d] = true;
  std::vector<int64_t> strides = stridesOf(xShape);
  ReduceGeom g;
  g.reducedCount = 1;
  int64_t outCount = 1;
  for (size_t d = 0; d < xShape.size(); ++d) {
    Dims &part = reduced[d] ? g.reduced : g.kept;
    part.size[part.rank] = xShape[d];
    part.strideA[part.rank] = strides[d];
    part.strideB[part.rank] = 0;
    ++part.rank;
    (reduced[d] ? g.reducedCount : outCount) *= xShape[d];
  }
  double factor = kind == ReduceKind::Mean
                      ? 1.0 / static_cast<double>(g.reducedCount)
                      : 1.0;
  // Leading dims reduced (bias gradients): the same chunks and order as
  // below, without walking the reduced sub-space index by index.
  bool leading = true;
  for (size_t d = 0; d < xShape.size(); ++d)
    leading = leading && reduced[d] == (d < dims.size());
  if (leading)
    return columnSums(s, dt, x, y, g.reducedCount, outCount, factor);
  F32In fx(s, dt, x, g.reducedCount * outCount);
  ColumnChunks ch = columnChunks(outCount, g.reducedCount);
  Scratch partial(s, outCount * ch.count * 8);
  FSDPRT_LAUNCH(reducePartialKernel, outCount * ch.count, s, fx.get(),
                partial.as<double>(), g, outCount, ch);
  FSDPRT_LAUNCH(columnChunksFinishKernel, outCount, s, partial.as<double>(), y,
                outCount, ch.count, factor);
}

void reduceBackward(Stream s, ReduceKind kind, const float *dy,
                    const Shape &xShape, const std::vector<int64_t> &dims,
                    float *dx) {
  requireRank(xShape.size(), "reduce input");
  Shape keptShape = xShape;
  int64_t count = 1;
  for (int64_t d : dims) {
    count *= xShape[d];
    keptShape[d] = 1;
  }
  float factor =
      kind == ReduceKind::Mean ? 1.0f / static_cast<float>(count) : 1.0f;
  std::vector<int64_t> sdy = broadcastStrides(keptShape, xShape);
  Dims d;
  d.rank = static_cast<int>(xShape.size());
  for (int i = 0; i < d.rank; ++i) {
    d.size[i] = xShape[i];
    d.strideA[i] = sdy[i];
    d.strideB[i] = 0;
  }
  int64_t n = numelOf(xShape);
  FSDPRT_LAUNCH(reduceBackwardKernel, n, s, dy, dx, d, factor, n);
}

/// dw and db (either may be null) of layer_norm / rms_norm, two passes.
static void normColumns(Stream s, DType dt, const void *x, const void *dy,
                        const float *mean, const float *rstd, float *dw,
                        float *db, int64_t rows, int64_t d) {
  ColumnChunks ch = columnChunks(d, rows);
  Scratch partial(s, 2 * d * ch.count * 8);
  double *pw = partial.as<double>(), *pb = pw + d * ch.count;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(normColumnsPartialKernel<S>, d * ch.count, s,
                  static_cast<const T *>(x), static_cast<const T *>(dy), mean,
                  rstd, pw, pb, rows, d, ch);
  });
  if (dw)
    FSDPRT_LAUNCH(columnChunksFinishKernel, d, s, pw, dw, d, ch.count, 1.0);
  if (db)
    FSDPRT_LAUNCH(columnChunksFinishKernel, d, s, pb, db, d, ch.count, 1.0);
}

void layerNormBackward(Stream s, DType dt, const void *x, const void *w,
                       const void *dy, void *dx, float *dw, float *db,
                       int64_t rows, int64_t d, float eps) {
  Scratch stats(s, 2 * rows * 4);
  float *mean = stats.as<float>(), *rstd = mean + rows;
  layerNormRowsBackward(s, dt, x, w, dy, dx, mean, rstd, rows, d, eps);
  if (dw || db)
    normColumns(s, dt, x, dy, mean, rstd, dw, db, rows, d);
}

void rmsNormBackward(Stream s, DType dt, const void *x, const void *w,
                     const void *dy, void *dx, float *dw, int64_t rows,
                     int64_t d, float eps) {
  Scratch stats(s, rows * 4);
  float *rstd = stats.as<float>();
  rmsNormRowsBackward(s, dt, x, w, dy, dx, rstd, rows, d, eps);
  if (dw)
    normColumns(s, dt, x, dy, nullptr, rstd, dw, nullptr, rows, d);
}

void batchNormForward(Stream s, const float *x, const float *w, const float *b,
                      float *runningMean, float *runningVar, float *y,
                      int64_t n, int64_t c, int64_t spatial, float eps,
                      float momentum, bool training) {
  FSDPRT_LAUNCH(batchNormKernel, c, s, x, w, b, runningMean, runningVar, y, n,
                c, spatial, eps, momentum, training);
}

void batchNormBackward(Stream s, const float *x, const float *w,
                       const float *runningMean, const float *runningVar,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t n, int64_t c, int64_t spatial, float eps,
                       bool training) {
  FSDPRT_LAUNCH(batchNormBackwardKernel, c, s, x, w, runningMean, runningVar,
                dy, dx, dw, db, n, c, spatial, eps, training);
}

void queueIndexCheck(Stream s, DType type, const void *ids, int64_t n,
                     int64_t limit, bool hasIgnore, int64_t ignoreIndex,
                     int64_t *countOut, IndexVerdict *verdict) {
  // flags: first bad position (n when none), count of valid indices; then
  // the verdict {first bad, its value} copied to the host.
  Scratch scratch(s, 32);
  auto *f = scratch.as<unsigned long long>();
  auto *v = reinterpret_cast<int64_t *>(f + 2);
  bool i32 = type == DType::I32;
  FSDPRT_LAUNCH(indexCheckInitKernel, 1, s, f, n);
  FSDPRT_LAUNCH(checkIndexKernel, n, s, i32, ids, n, limit, hasIgnore,
                ignoreIndex, f, countOut ? f + 1 : nullptr);
  FSDPRT_LAUNCH(indexVerdictKernel, 1, s, i32, ids, n, f, v);
  checkCuda(cudaMemcpyAsync(verdict, v, sizeof(IndexVerdict),
                            cudaMemcpyDeviceToHost, s),
            "cudaMemcpyAsync (index verdict)");
  if (countOut)
    checkCuda(cudaMemcpyAsync(countOut, f + 1, 8, cudaMemcpyDeviceToDevice, s),
              "cudaMemcpyAsync (index count)");
}

void embeddingForward(Stream s, DType idsType, const void *ids,
                      const void *table, void *out, int64_t elemSize,
                      int64_t numIds, int64_t vocab, int64_t dim) {
  bool i32 = idsType == DType::I32;
  int64_t n = numIds * dim;
  switch (elemSize) {
  case 2:
    FSDPRT_LAUNCH(gatherKernel<uint16_t>, n, s, i32, ids,
                  static_cast<const uint16_t *>(table),
                  static_cast<uint16_t *>(out), numIds,
                  vocab, dim);
    return;
  case 4:
    FSDPRT_LAUNCH(gatherKernel<uint32_t>, n, s, i32, ids,
                  static_cast<const uint32_t *>(table),
                  static_cast<uint32_t *>(out), numIds,
                  vocab, dim);
    return;
  default:
    FSDPRT_LAUNCH(gatherKernel<uint64_t>, n, s, i32, ids,
                  static_cast<const uint64_t *>(table),
                  static_cast<uint64_t *>(out), numIds,
                  vocab, dim);
  }
}

void embeddingBackward(Stream s, DType idsType, const void *ids,
                       const float *dy, float *dtable, int64_t numIds,
                       int64_t vocab, int64_t dim) {
  fill(s, DType::F32, dtable, vocab * dim, 0.0); // ids never seen: zero
  if (numIds == 0)
    return;
  if (idsType == DType::I32)
    embeddingBackwardSorted(s, static_cast<const int32_t *>(ids), dy, dtable,
                            numIds, vocab, dim);
  else
    embeddingBackwardSorted(s, static_cast<const int64_t *>(ids), dy, dtable,
                            numIds, vocab, dim);
}

void rope(Stream s, const float *x, float *y, int64_t batch, int64_t seq,
          int64_t heads, int64_t headDim, double theta, bool inverse) {
  int64_t pairs = batch * seq * heads * (headDim / 2);
  FSDPRT_LAUNCH(ropeKernel, pairs, s, x, y, pairs, seq, heads, headDim, theta,
                inverse ? -1.0f : 1.0f);
}

void dropout(Stream s, DType dt, const void *x, void *y, int64_t n, float p,
             const RngKey &key) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(dropoutKernel<S>, (n + 3) / 4, s, static_cast<const T *>(x),
                  static_cast<T *>(y), n, p, key);
  });
}

void rngFill(Stream s, float *dst, int64_t n, Distribution dist, float a,
             float b, const RngKey &key) {
  FSDPRT_LAUNCH(rngFillKernel, (n + 3) / 4, s, dst, n,
                dist == Distribution::Uniform, a, b, key);
}

void transpose(Stream s, int64_t elemSize, const void *x, void *y,
               const Shape &xShape, const std::vector<int64_t> &perm) {
  requireRank(xShape.size(), "transpose input");
  std::vector<int64_t> xStrides = stridesOf(xShape);
  Dims d;
  d.rank = static_cast<int>(perm.size());
  for (int i = 0; i < d.rank; ++i) {
    d.size[i] = xShape[perm[i]];
    d.strideA[i] = xStrides[perm[i]];
    d.strideB[i] = 0;
  }
  int64_t n = numelOf(xShape);
  switch (elemSize) {
  case 2:
    FSDPRT_LAUNCH(transposeKernel<uint16_t>, n, s,
                  static_cast<const uint16_t *>(x), static_cast<uint16_t *>(y),
                  d, n);
    return;
  case 4:
    FSDPRT_LAUNCH(transposeKernel<uint32_t>, n, s,
                  static_cast<const uint32_t *>(x), static_cast<uint32_t *>(y),
                  d, n);
    return;
  default:
    FSDPRT_LAUNCH(transposeKernel<uint64_t>, n, s,
                  static_cast<const uint64_t *>(x), static_cast<uint64_t *>(y),
                  d, n);
  }
}

void copySlab(Stream s, int64_t elemSize, const void *src, int64_t srcDim,
              int64_t srcOffset, void *dst, int64_t dstDim, int64_t dstOffset,
              int64_t outer, int64_t size, int64_t inner) {
  // outer rows of size * inner elements: one strided 2-D copy.
  int64_t row = inner * elemSize, width = size * row;
  if (outer == 0 || width == 0)
    return;
  checkCuda(cudaMemcpy2DAsync(static_cast<char *>(dst) + dstOffset * row,
                              dstDim * row,
                              static_cast<const char *>(src) + srcOffset * row,
                              srcDim * row, width, outer,
                              cudaMemcpyDeviceToDevice, s),
            "cudaMemcpy2DAsync (concat / split slab)");
}

void crossEntropyForward(Stream s, DType dt, DType targetType,
                         const void *logits, const void *targets,
                         const int64_t *count, float *loss,
                         int64_t n, int64_t c, LossReduction reduction,
                         int64_t ignoreIndex) {
  Scratch terms(s, std::max<int64_t>(n, 1) * 8);
  crossEntropyRowTerms(s, dt, targetType == DType::I32, logits, targets,
                       terms.as<double>(), n, c, ignoreIndex);
  int64_t blocks;
  Scratch partial = blockSums(s, ArrayTerm{terms.as<double>()}, n, blocks);
  FSDPRT_LAUNCH(crossEntropyFinishKernel, 1, s, partial.as<double>(), blocks,
                count, reduction == LossReduction::Mean, loss);
}

void mseLossForward(Stream s, const float *a, const float *b, float *loss,
                    int64_t n, LossReduction reduction) {
  int64_t blocks;
  Scratch partial = blockSums(s, MseTerm{a, b}, n, blocks);
  FSDPRT_LAUNCH(mseFinishKernel, 1, s, partial.as<double>(), blocks, n,
                reduction == LossReduction::Mean, loss);
}

void mseLossBackward(Stream s, const float *a, const float *b,
                     const float *dloss, float *da, float *db, int64_t n,
                     LossReduction reduction) {
  FSDPRT_LAUNCH(mseBackwardKernel, n, s, a, b, dloss, da, db, n,
                reduction == LossReduction::Mean);
}

void sgdStep(Stream s, float *param, const float *grad, float *momentumBuf,
             int64_t n, int64_t step, const SgdOptions &o, const float *skip) {
  SgdScalars sc = sgdScalars(o, step);
  FSDPRT_LAUNCH(sgdKernel, n, s, param, grad, momentumBuf, n, sc, skip);
}

void adamwStep(Stream s, float *param, const float *grad, float *expAvg,
               float *expAvgSq, int64_t n, int64_t step, const AdamWOptions &o,
               const float *skip) {
  AdamWScalars sc = adamwScalars(o, step);
  FSDPRT_LAUNCH(adamwKernel, n, s, param, grad, expAvg, expAvgSq, n, sc, skip);
}

void nonfiniteFlag(Stream s, const float *x, int64_t n, float *out,
                   bool accumulate) {
  FSDPRT_LAUNCH(clearUnlessKernel, 1, s, out, accumulate);
  if (n > 0)
    FSDPRT_LAUNCH(nonfiniteKernel, n, s, x, n, out);
}

void gradSqNorm(Stream s, const float *x, int64_t n, float *out,
                bool accumulate) {
  int64_t blocks;
  Scratch partial = blockSums(s, SquareTerm{x}, n, blocks);
  FSDPRT_LAUNCH(sqNormFinishKernel, 1, s, partial.as<double>(), blocks, out,
                accumulate);
}

void clipGrad(Stream s, DType dt, void *grad, int64_t n, const float *totalSq,
              double maxNorm) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH(clipKernel<S>, n, s, static_cast<typename S::T *>(grad), n,
                  totalSq, static_cast<float>(maxNorm));
  });
}

void clipCoefficient(Stream s, const float *totalSq, float *norm, float *coef,
                     double maxNorm) {
  FSDPRT_LAUNCH(clipCoefficientKernel, 1, s, totalSq, norm, coef,
                static_cast<float>(maxNorm));
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
