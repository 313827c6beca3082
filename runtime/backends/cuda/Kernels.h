//===- Kernels.h - CUDA kernel launchers ------------------------*- C++ -*-===//
//
// Host functions that launch the CUDA backend's kernels on a given stream
// (they do not synchronise), defined by one file per kernel family
// (Conversions, Elementwise, Reductions, Embedding, Layout, Losses,
// Optimizers, RowKernels). Element-wise bodies call the shared FSDPRT_HD
// math of fsdp/rt/math, the same functions the CPU backend calls. Sums are
// in double in a fixed order: rows (norms, softmax, cross-entropy) one
// warp or block per row through a fixed reduction tree (RowKernels.cu),
// columns (reduce, norm weight gradients) in row chunks added in order, long
// sums in the CPU's 16384-element blocks. Results match the CPU oracle up to
// that order and the device's transcendental functions, and are the same
// bits run to run.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_KERNELS_H
#define FSDP_RT_CUDA_KERNELS_H

#include "Device.h"

#include "fsdp/rt/backend/Backend.h"
#include "fsdp/rt/backend/Staging.h"

#include <vector>

namespace fsdp {
namespace rt {
namespace cuda {

using Stream = cudaStream_t;

/// Element conversion (integers only as a source), as cpu::convert.
void convert(Stream s, DType srcType, const void *src, DType dstType, void *dst,
             int64_t n);
void fill(Stream s, DType dt, void *dst, int64_t n, double value);
/// dst[i] += value on an I32 or I64 tensor.
void addInteger(Stream s, DType dt, void *dst, int64_t n, int64_t value);

/// Staging's memory on the CUDA backend (fsdp/rt/backend/Staging.h): scratch on
/// the call's stream, conversions queued on it.
struct DeviceStagingMemory {
  struct Buffer {
    Scratch bytes;
    float *data() const { return bytes.as<float>(); }
  };
  Buffer allocate(int64_t n) { return Buffer{Scratch(s, n * 4)}; }
  void convert(DType srcType, const void *src, DType dstType, void *dst,
               int64_t n) {
    cuda::convert(s, srcType, src, dstType, dst, n);
  }

  Stream s;
};
using DeviceStaging = Staging<DeviceStagingMemory>;

/// y[r, :] = b for r < m, both in storage type dt.
void seedRows(Stream s, DType dt, const void *b, void *y, int64_t m,
              int64_t n);
/// out[j] = sum over rows r of x[r * n + j] (double, in row chunks added in
/// order).
void columnSums(Stream s, DType dt, const void *x, float *out, int64_t m,
                int64_t n, double factor = 1.0);

// Elementwise (directly on f32/bf16/f16 storage).
void binaryForward(Stream s, DType dt, BinaryOp op, const void *a,
                   const Shape &aShape, const void *b, const Shape &bShape,
                   void *out);
void scale(Stream s, DType dt, const void *x, void *y, int64_t n, float factor);
/// dst[b, i] += src[b * srcStride + i] for b < batch, i < n (srcStride 0:
/// one src row added to every batch element).
void addBatches(Stream s, float *dst, const float *src, int64_t batch,
                int64_t n, int64_t srcStride);
/// dst[b * dstStride + i] += src[b, i] (dstStride 0: summed over b, in b's
/// order: deterministic).
void accumulateBatches(Stream s, float *dst, const float *src, int64_t batch,
                       int64_t n, int64_t dstStride);
void activationForward(Stream s, DType dt, Activation kind, const void *x,
                       void *y, int64_t n);
void unaryForward(Stream s, DType dt, UnaryMath kind, const void *x, void *y,
                  int64_t n, float a, float b);
void unaryBackward(Stream s, DType dt, UnaryMath kind, const void *x,
                   const void *dy, void *dx, int64_t n, float a, float b);
void activationBackward(Stream s, DType dt, Activation kind, const void *x,
                        const void *dy, void *dx, int64_t n);

/// torch.cumsum along the middle dim of [outer, dim, inner] (any dtype):
/// one thread per line, in order (math/Scan.h), so results repeat bit for
/// bit and equal the CPU backend's.
void cumsum(Stream s, DType dt, const void *x, void *y, int64_t outer,
            int64_t dim, int64_t inner, bool reverse);

/// Mixture-of-experts routing (Routing.cu): the orders and bins of
/// math/Routing.h, a thread per row, element or bin; the grouped GEMM reads
/// its segment ends on the device (no host synchronisation).
void topkForward(Stream s, DType dt, const void *x, void *values,
                 int64_t *indices, int64_t rows, int64_t n, int64_t k);
void sortForward(Stream s, DType dt, const void *x, void *values,
                 int64_t *indices, int64_t rows, int64_t n);
void histc(Stream s, DType dt, const void *x, void *y, int64_t numel,
           int64_t bins, double min, double max);
void invertPermutation(Stream s, DType dt, const void *p, void *y, int64_t n);
void groupedMatmulForward(Stream s, DType dt, DType offsetsType,
                          const void *x, const void *w, const void *offsets,
                          void *y, const GroupedDims &d);
void groupedMatmulBackwardWeight(Stream s, DType dt, DType offsetsType,
                                 const void *x, const void *dy,
                                 const void *offsets, void *dw,
                                 const GroupedDims &d);

// Reductions (f32 results; the input in its storage type).
void reduceForward(Stream s, DType dt, ReduceKind kind, const void *x,
                   const Shape &xShape, const std::vector<int64_t> &dims,
                   float *y);
void reduceBackward(Stream s, ReduceKind kind, const float *dy,
                    const Shape &xShape, const std::vector<int64_t> &dims,
                    float *dx);

/// Which kernels run the norms' rows (docs/CUDA.md): the streaming ones
/// (RowKernels.cu, any shape), or the lean ones (LeanNorms.cu) where a row
/// fits them and the streaming ones elsewhere. Both give the same bits but
/// for NaN (the lean ones store the hardware's canonical NaN). A backend
/// reads FSDPRT_NORM_KERNELS when it is made (Worker.h).
enum class NormKernels { Streaming, Lean };

// layer_norm / rms_norm on the storage type (f32 math, each output rounded
// once); weight gradients in f32; backward row statistics live in
// stream-ordered scratch.
void layerNormForward(Stream s, DType dt, const void *x, const void *w,
                      const void *b, void *y, int64_t rows, int64_t d,
                      float eps, NormKernels kernels);
/// sum = a + b (the add kernel's rounding), y = layer_norm(sum as stored).
void addLayerNormForward(Stream s, DType dt, const void *a, const void *b,
                         const void *w, const void *bias, void *sum, void *y,
                         int64_t rows, int64_t d, float eps,
                         NormKernels kernels);
void layerNormBackward(Stream s, DType dt, const void *x, const void *w,
                       const void *dy, void *dx, float *dw, float *db,
                       int64_t rows, int64_t d, float eps, NormKernels kernels);
/// layerNormBackward with dx = addend + the input gradient (rounded to dt
/// before the add kernel's add); addend may be dx.
void addLayerNormBackward(Stream s, DType dt, const void *x, const void *w,
                          const void *dy, const void *addend, void *dx,
                          float *dw, float *db, int64_t rows, int64_t d,
                          float eps, NormKernels kernels);
void rmsNormForward(Stream s, DType dt, const void *x, const void *w, void *y,
                    int64_t rows, int64_t d, float eps,
                    NormKernels kernels);
void rmsNormBackward(Stream s, DType dt, const void *x, const void *w,
                     const void *dy, void *dx, float *dw, int64_t rows,
                     int64_t d, float eps, NormKernels kernels);
/// out[k] = factor * sum_c partial[c * columns + k] in double, chunks in
/// order (Reductions.cu).
void finishColumnChunks(Stream s, const double *partial, float *out,
                        int64_t columns, int64_t chunks, double factor);
void finishColumnChunks(Stream s, const float *partial, float *out,
                        int64_t columns, int64_t chunks, double factor);
/// The row half of the norm backwards (RowKernels.cu): each row's mean /
/// rstd into the arrays and, if dx, its input gradient, plus addend's row
/// if addend (the gradient rounded to dt first, the add kernel's rounding).
void layerNormRowsBackward(Stream s, DType dt, const void *x, const void *w,
                           const void *dy, const void *addend, void *dx,
                           float *mean, float *rstd, int64_t rows, int64_t d,
                           float eps, NormKernels kernels);
void rmsNormRowsBackward(Stream s, DType dt, const void *x, const void *w,
                         const void *dy, void *dx, float *rstd, int64_t rows,
                         int64_t d, float eps,
                         NormKernels kernels);
/// The lean kernels of the calls above (LeanNorms.cu) where the rows fit
/// them (a width they take, every pointer 16-byte aligned); false, having
/// launched nothing, otherwise.
bool leanLayerNormForward(Stream s, DType dt, const void *x, const void *w,
                          const void *b, void *y, int64_t rows, int64_t d,
                          float eps);
bool leanAddLayerNormForward(Stream s, DType dt, const void *a, const void *b,
                             const void *w, const void *bias, void *sum,
                             void *y, int64_t rows, int64_t d, float eps);
bool leanLayerNormRowsBackward(Stream s, DType dt, const void *x,
                               const void *w, const void *dy,
                               const void *addend, void *dx, float *mean,
                               float *rstd, int64_t rows, int64_t d,
                               float eps);
bool leanRmsNormForward(Stream s, DType dt, const void *x, const void *w,
                        void *y, int64_t rows, int64_t d, float eps);
bool leanRmsNormRowsBackward(Stream s, DType dt, const void *x, const void *w,
                             const void *dy, void *dx, float *rstd,
                             int64_t rows, int64_t d, float eps);
// Convolution on f32 (Conv.cu): one thread per result element.
void convForward(Stream s, const float *x, const float *w, const float *b,
                 float *y, const ConvGeometry &g);
void convBackwardInput(Stream s, const float *dy, const float *w, float *dx,
                       const ConvGeometry &g);
void convBackwardWeight(Stream s, const float *dy, const float *x, float *dw,
                        const ConvGeometry &g);

// Max pooling on f32 (Conv.cu): one thread per output, then per input.
void maxPoolForward(Stream s, const float *x, float *y, const ConvGeometry &g);
void maxPoolBackward(Stream s, const float *x, const float *dy, float *dx,
                     const ConvGeometry &g);

// batch_norm on f32 (one thread per channel).
void batchNormForward(Stream s, const float *x, const float *w, const float *b,
                      float *runningMean, float *runningVar, float *y,
                      int64_t n, int64_t c, int64_t spatial, float eps,
                      float momentum, bool training);
void batchNormBackward(Stream s, const float *x, const float *w,
                       const float *runningMean, const float *runningVar,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t n, int64_t c, int64_t spatial, float eps,
                       bool training);

// Softmax, one block per row (RowKernels.cu).
void softmaxForward(Stream s, const float *x, float *y, int64_t outer,
                    int64_t dim, int64_t inner);
void softmaxBackward(Stream s, const float *y, const float *dy, float *dx,
                     int64_t outer, int64_t dim, int64_t inner);
/// Attention score rows p[rows, tk] of one head, row r being query r % tq
/// of batch element r / tq: causal mask (if set) then softmax, in place;
/// with lse, each row's log-sum-exp also goes to
/// lse[(r / tq) * lseBatchStride + r % tq] (the head's softmax statistics).
void maskedSoftmaxRows(Stream s, float *p, int64_t rows, int64_t tq,
                       int64_t tk, bool causal, float *lse = nullptr,
                       int64_t lseBatchStride = 0);
/// The log-sum-exp of each masked row only, as maskedSoftmaxRows writes it.
void maskedLogSumExpRows(Stream s, const float *p, int64_t rows, int64_t tq,
                         int64_t tk, bool causal, float *lse,
                         int64_t lseBatchStride);
/// p = exp(p - lse) of each masked row (0 where masked), in place: the
/// backward's probabilities from the forward's statistics.
void maskedExpRows(Stream s, float *p, int64_t rows, int64_t tq, int64_t tk,
                   bool causal, const float *lse, int64_t lseBatchStride);
/// dp[r, :] = softmax backward of rows of p with dy = dp (in place).
void softmaxBackwardRows(Stream s, const float *p, float *dp, int64_t rows,
                         int64_t tk);

/// A device-side index check's result as it reaches pinned host memory:
/// the first position whose index is out of range (n when none) and that
/// index.
struct IndexVerdict {
  int64_t firstBad, value;
};
/// Queues the check of n indices (token ids, targets) against [0, limit)
/// (ignoreIndex allowed when hasIgnore): `verdict`, pinned host memory,
/// holds the result once the stream has passed it; the host reads it at the
/// next synchronisation instead of waiting here. countOut (device, may be
/// null) gets the number of valid, not ignored indices.
void queueIndexCheck(Stream s, DType type, const void *ids, int64_t n,
                     int64_t limit, bool hasIgnore, int64_t ignoreIndex,
                     int64_t *countOut, IndexVerdict *verdict);
/// Ids outside [0, vocab) leave their rows unwritten (the check reports
/// them).
void embeddingForward(Stream s, DType idsType, const void *ids,
                      const void *table, void *out, int64_t elemSize,
                      int64_t numIds, int64_t vocab, int64_t dim);
/// dy and dtable in storage dt (each row sum in f32, rounded once).
void embeddingBackward(Stream s, DType dt, DType idsType, const void *ids,
                       const void *dy, void *dtable, int64_t numIds,
                       int64_t vocab, int64_t dim);

void rope(Stream s, const float *x, float *y, int64_t batch, int64_t seq,
          int64_t heads, int64_t headDim, double theta, bool inverse);
/// `live` (may be null): the key in a step graph's live block (Backend.h).
void dropout(Stream s, DType dt, const void *x, void *y, int64_t n, float p,
             const RngKey &key, const RngKey *live);
void rngFill(Stream s, float *dst, int64_t n, Distribution dist, float a,
             float b, const RngKey &key, const RngKey *live);

void transpose(Stream s, int64_t elemSize, const void *x, void *y,
               const Shape &xShape, const std::vector<int64_t> &perm);
void copySlab(Stream s, int64_t elemSize, const void *src, int64_t srcDim,
              int64_t srcOffset, void *dst, int64_t dstDim, int64_t dstOffset,
              int64_t outer, int64_t size, int64_t inner);
/// strided_slice and its backward: one thread per window element.
void copyStrided(Stream s, int64_t elemSize, const void *src, void *dst,
                 const StridedWindow &w, bool scatter);

/// Cross-entropy logits: n rows of `width`, the first c of each the classes
/// (the rest pad the vocabulary: no part of the loss, a zero gradient).
struct LogitRows {
  int64_t n, c, width;
  bool lean = false; // FSDPRT_XENT_KERNELS=lean: CrossEntropyLean.cu
};

/// Logits in their storage type `dt`; the loss is f32. Targets outside
/// [0, c) (reported by queueIndexCheck) count as ignored.
void crossEntropyForward(Stream s, DType dt, DType targetType,
                         const void *logits, const void *targets,
                         const int64_t *count, float *loss, LogitRows rows,
                         LossReduction reduction, int64_t ignoreIndex);
/// terms[r] = logsumexp(logits[r, :c]) - logits[r, target] (0 for an
/// ignored row), one block per row on logits in their storage type `dt`
/// (RowKernels.cu).
void crossEntropyRowTerms(Stream s, DType dt, bool i32, const void *logits,
                          const void *targets, double *terms, LogitRows rows,
                          int64_t ignoreIndex);
/// One block per row on logits / dlogits in their storage type `dt` (f32
/// math, rounded once: the bits of staging through f32; RowKernels.cu).
void crossEntropyBackward(Stream s, DType dt, DType targetType,
                          const void *logits, const void *targets,
                          const int64_t *count, const float *dloss,
                          void *dlogits, LogitRows rows,
                          LossReduction reduction, int64_t ignoreIndex);
/// Both in one pass over the logits (dlogits may be logits), the same bits.
void crossEntropyForwardBackward(Stream s, DType dt, DType targetType,
                                 const void *logits, const void *targets,
                                 const int64_t *count, const float *dloss,
                                 float *loss, void *dlogits, LogitRows rows,
                                 LossReduction reduction, int64_t ignoreIndex);
/// The gradient rows of crossEntropyBackward and, where terms is given,
/// the row terms of crossEntropyRowTerms from the same pass.
void crossEntropyRowTermsAndGrad(Stream s, DType dt, bool i32,
                                 const void *logits, const void *targets,
                                 const int64_t *count, const float *dloss,
                                 double *terms, void *dlogits, LogitRows rows,
                                 bool mean, int64_t ignoreIndex);
void mseLossForward(Stream s, const float *a, const float *b, float *loss,
                    int64_t n, LossReduction reduction);
void mseLossBackward(Stream s, const float *a, const float *b,
                     const float *dloss, float *da, float *db, int64_t n,
                     LossReduction reduction);

/// The updates of `count` tensors, in one launch per kUpdateLaunchTensors
/// of them; they do nothing when *skip (device memory; null: never) is
/// non-zero; `live` (may be null) as for dropout. The gradients are in
/// storage type gradType, read as they are.
void sgdStep(Stream s, DType gradType, const UpdateTensors *tensors,
             int64_t count, const SgdScalars &sc, const SgdScalars *live,
             const float *skip);
void adamwStep(Stream s, DType gradType, const UpdateTensors *tensors,
               int64_t count, const AdamWScalars &sc, const AdamWScalars *live,
               const float *skip);
void lionStep(Stream s, DType gradType, const UpdateTensors *tensors,
              int64_t count, const LionScalars &sc, const LionScalars *live,
              const float *skip);
// Adafactor.cu: Backend::adafactorStats / Factor / Apply.
void adafactorStats(Stream s, const float *param, const float *grad, int64_t n,
                    int64_t flatBegin, const AdafactorLayout &layout,
                    float *stats);
void adafactorFactor(Stream s, const float *grad, int64_t n, int64_t flatBegin,
                     const AdafactorLayout &layout, float *state,
                     const float *stats, float *updateSq,
                     const AdafactorFactorScalars &sc,
                     const AdafactorFactorScalars *live, const float *skip);
void adafactorApply(Stream s, float *param, const float *grad, int64_t n,
                    int64_t flatBegin, const AdafactorLayout &layout,
                    const float *state, const float *stats,
                    const float *updateSq, const AdafactorApplyScalars &sc,
                    const AdafactorApplyScalars *live, const float *skip);
/// *out = 1 if any x is inf or NaN, else (accumulate ? *out : 0).
void nonfiniteFlag(Stream s, const float *x, int64_t n, float *out,
                   bool accumulate);
/// *out = (accumulate ? *out : 0) + sum(x^2), summed as cpu::sumOfSquares.
void gradSqNorm(Stream s, const float *x, int64_t n, float *out,
                bool accumulate);
void clipGrad(Stream s, DType dt, void *grad, int64_t n, const float *totalSq,
              double maxNorm);
void clipCoefficient(Stream s, const float *total, float *norm, float *coef,
                     double maxNorm, double normType);
/// *out = max |x| (NaN if any is NaN), or with `accumulate` the max of that
/// and *out; block maxima then one pass over them.
void maxAbs(Stream s, const float *x, int64_t n, float *out, bool accumulate);

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_KERNELS_H
