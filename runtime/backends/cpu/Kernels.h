//===- Kernels.h - CPU backend kernels --------------------------*- C++ -*-===//
//
// The CPU backend's kernels, on f32 arrays unless they take a DType (the
// backend stages 16-bit storage for the f32 ones through HostStaging.h).
// `threads` is the fork width; results do not depend on it. Outputs are
// overwritten; optional outputs/inputs may be null.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CPU_KERNELS_H
#define FSDP_RT_CPU_KERNELS_H

#include "fsdp/rt/backend/Backend.h"

#include <cstdint>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// Element i of an i32 or i64 index tensor (ids, targets, offsets).
inline int64_t loadIndex(DType type, const void *p, int64_t i) {
  return type == DType::I32 ? static_cast<const int32_t *>(p)[i]
                            : static_cast<const int64_t *>(p)[i];
}

/// Row-major C = alpha * op(A) * op(B) + beta * C through cblas_sgemm, in
/// shape-determined blocks spread over `threads` (see Gemm.cpp).
void gemm(int threads, bool transA, bool transB, int64_t m, int64_t n,
          int64_t k, float alpha, const float *a, int64_t lda, const float *b,
          int64_t ldb, float beta, float *c, int64_t ldc);

// Linear.cpp
void linearForward(int threads, const float *x, const float *w, const float *b,
                   float *y, int64_t m, int64_t k, int64_t n);
void linearBackward(int threads, const float *x, const float *w,
                    const float *dy, float *dx, float *dw, float *db, int64_t m,
                    int64_t k, int64_t n);
void matmulForward(int threads, const float *a, const float *b, float *c,
                   const MatmulDims &d);
void matmulBackward(int threads, const float *a, const float *b,
                    const float *dc, float *da, float *db, const MatmulDims &d);

// Pointwise.cpp: the forward kernels work directly on f32/bf16/f16
// storage (Storage.h); outputs may alias inputs.
void binaryForward(int threads, DType dt, BinaryOp op, const void *a,
                   const Shape &aShape, const void *b, const Shape &bShape,
                   void *out);
void binaryBackward(int threads, BinaryOp op, const float *a,
                    const Shape &aShape, const float *b, const Shape &bShape,
                    const float *dout, float *da, float *db);
void scale(int threads, DType dt, const void *x, void *y, int64_t n,
           float factor);
void activationForward(int threads, DType dt, Activation kind, const void *x,
                       void *y, int64_t n);
void unaryForward(int threads, DType dt, UnaryMath kind, const void *x,
                  void *y, int64_t n, float a, float b);
void unaryBackward(int threads, DType dt, UnaryMath kind, const void *x,
                   const void *dy, void *dx, int64_t n, float a, float b);
void activationBackward(int threads, DType dt, Activation kind, const void *x,
                        const void *dy, void *dx, int64_t n);

// Reduce.cpp
/// torch.cumsum along the middle dim of [outer, dim, inner] (any dtype).
void cumsum(int threads, DType dt, const void *x, void *y, int64_t outer,
            int64_t dim, int64_t inner, bool reverse);
/// y[kept] = sum (or mean) of x over `dims` (sorted, unique).
void reduceForward(int threads, ReduceKind kind, const float *x,
                   const Shape &xShape, const std::vector<int64_t> &dims,
                   float *y);
void reduceBackward(int threads, ReduceKind kind, const float *dy,
                    const Shape &xShape, const std::vector<int64_t> &dims,
                    float *dx);

// Routing.cpp: mixture-of-experts routing (math/Routing.h); the grouped
// GEMM and its weight gradient one OpenBLAS GEMM per segment.
void topkForward(int threads, DType dt, const void *x, void *values,
                 int64_t *indices, int64_t rows, int64_t n, int64_t k);
void sortForward(int threads, DType dt, const void *x, void *values,
                 int64_t *indices, int64_t rows, int64_t n);
void histc(DType dt, const void *x, void *y, int64_t numel, int64_t bins,
           double min, double max);
void invertPermutation(DType dt, const void *p, void *y, int64_t n);
void groupedMatmulForward(int threads, DType offsetsType, const float *x,
                          const float *w, const void *offsets, float *y,
                          const GroupedDims &d);
void groupedMatmulBackwardWeight(int threads, DType offsetsType,
                                 const float *x, const float *dy,
                                 const void *offsets, float *dw,
                                 const GroupedDims &d);

// Conv.cpp: im2col + GEMM per image and group.
void convForward(int threads, const float *x, const float *w, const float *b,
                 float *y, const ConvGeometry &g);
void convBackwardInput(int threads, const float *dy, const float *w, float *dx,
                       const ConvGeometry &g);
void convBackwardWeight(int threads, const float *dy, const float *x, float *dw,
                        const ConvGeometry &g);

// MaxPool.cpp: the shared bodies of fsdp/rt/math/MaxPool.h.
void maxPoolForward(int threads, const float *x, float *y,
                    const ConvGeometry &g);
void maxPoolBackward(int threads, const float *x, const float *dy, float *dx,
                     const ConvGeometry &g);

// Norm.cpp
void layerNormForward(int threads, const float *x, const float *w,
                      const float *b, float *y, int64_t rows, int64_t d,
                      float eps);
/// sum = a + b on dt's storage (a, b, sum of rows x d), y = layer_norm(sum).
void addLayerNormForward(int threads, DType dt, const void *a, const void *b,
                         const float *w, const float *bias, void *sum,
                         float *y, int64_t rows, int64_t d, float eps);
void layerNormBackward(int threads, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t rows, int64_t d, float eps);
/// layerNormBackward with dx = addend + the input gradient on dt's storage
/// (addend, dx of rows x d; the gradient rounded to dt before the add).
void addLayerNormBackward(int threads, DType dt, const float *x, const float *w,
                          const float *dy, const void *addend, void *dx,
                          float *dw, float *db, int64_t rows, int64_t d,
                          float eps);
void rmsNormForward(int threads, const float *x, const float *w, float *y,
                    int64_t rows, int64_t d, float eps);
void rmsNormBackward(int threads, const float *x, const float *w,
                     const float *dy, float *dx, float *dw, int64_t rows,
                     int64_t d, float eps);
void batchNormForward(int threads, const float *x, const float *w,
                      const float *b, float *runningMean, float *runningVar,
                      float *y, int64_t n, int64_t c, int64_t spatial,
                      float eps, float momentum, bool training);
void batchNormBackward(int threads, const float *x, const float *w,
                       const float *runningMean, const float *runningVar,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t n, int64_t c, int64_t spatial, float eps,
                       bool training);

// Softmax.cpp
void softmaxForward(int threads, const float *x, float *y, int64_t outer,
                    int64_t dim, int64_t inner);
void softmaxBackward(int threads, const float *y, const float *dy, float *dx,
                     int64_t outer, int64_t dim, int64_t inner);

// Embedding.cpp (forward is a byte gather: no conversion needed)
void embeddingForward(int threads, DType idsType, const void *ids,
                      const void *table, void *out, int64_t elemSize,
                      int64_t numIds, int64_t vocab, int64_t dim);
void embeddingBackward(int threads, DType idsType, const void *ids,
                       const float *dy, float *dtable, int64_t numIds,
                       int64_t vocab, int64_t dim);
/// Fails naming `op` at the first id `range` does not allow.
void checkIndices(DType idsType, const void *ids, int64_t n,
                  const IndexRange &range, const char *op);

// Attention.cpp
/// bias (null: none) is added to the scaled scores; dbias (null: not
/// wanted) receives its gradient summed over the broadcast dimensions.
/// stats (null: not wanted / not kept): each query row's log-sum-exp
/// (Backend::attentionForward).
void attentionForward(int threads, const float *q, const float *k,
                      const float *v, const float *bias, float *out,
                      float *stats, const AttentionDims &d);
void attentionBackward(int threads, const float *q, const float *k,
                       const float *v, const float *bias, const float *dout,
                       const float *stats, float *dq, float *dk, float *dv,
                       float *dbias, const AttentionDims &d);

// Rope.cpp
void rope(int threads, const float *x, float *y, int64_t batch, int64_t seq,
          int64_t heads, int64_t headDim, double theta, bool inverse);

// Random.cpp
/// On f32/bf16/f16 storage; y may alias x.
void dropout(int threads, DType dt, const void *x, void *y, int64_t n, float p,
             const RngKey &key);
void rngFill(int threads, float *dst, int64_t n, Distribution dist, float a,
             float b, const RngKey &key);

// Layout.cpp (byte-generic: element size only)
void transpose(int threads, int64_t elemSize, const void *x, void *y,
               const Shape &xShape, const std::vector<int64_t> &perm);
void copySlab(int threads, int64_t elemSize, const void *src, int64_t srcDim,
              int64_t srcOffset, void *dst, int64_t dstDim, int64_t dstOffset,
              int64_t outer, int64_t size, int64_t inner);
void copyStrided(int threads, int64_t elemSize, const void *src, void *dst,
                 const StridedWindow &w, bool scatter);

// Loss.cpp
// Logits are n rows of `width`, the first c of each the classes; the rest
// take no part and their gradient is 0.
void crossEntropyForward(int threads, DType targetType, const float *logits,
                         const void *targets, float *loss, int64_t n, int64_t c,
                         int64_t width, LossReduction reduction,
                         int64_t ignoreIndex);
void crossEntropyBackward(int threads, DType targetType, const float *logits,
                          const void *targets, float dloss, float *dlogits,
                          int64_t n, int64_t c, int64_t width,
                          LossReduction reduction, int64_t ignoreIndex);
/// Both from one pass over the logits (dlogits may be logits).
void crossEntropyForwardBackward(int threads, DType targetType,
                                 const float *logits, const void *targets,
                                 float dloss, float *loss, float *dlogits,
                                 int64_t n, int64_t c, int64_t width,
                                 LossReduction reduction, int64_t ignoreIndex);
void mseLossForward(int threads, const float *a, const float *b, float *loss,
                    int64_t n, LossReduction reduction);
void mseLossBackward(int threads, const float *a, const float *b, float dloss,
                     float *da, float *db, int64_t n, LossReduction reduction);

// Optimizer.cpp
void sgdStep(int threads, float *param, const float *grad, float *momentumBuf,
             int64_t n, const SgdScalars &s);
void adamwStep(int threads, float *param, const float *grad, float *expAvg,
               float *expAvgSq, int64_t n, const AdamWScalars &s);
void lionStep(int threads, float *param, const float *grad, float *expAvg,
              int64_t n, const LionScalars &s);
double sumOfSquares(int threads, const float *x, int64_t n);

// Adafactor.cpp: Backend::adafactorStats / Factor / Apply.
void adafactorStats(const float *param, const float *grad, int64_t n,
                    int64_t flatBegin, const AdafactorLayout &layout,
                    float *stats);
void adafactorFactor(const float *grad, int64_t n, int64_t flatBegin,
                     const AdafactorLayout &layout, float *state,
                     const float *stats, float *updateSq,
                     const AdafactorFactorScalars &s);
void adafactorApply(int threads, float *param, const float *grad, int64_t n,
                    int64_t flatBegin, const AdafactorLayout &layout,
                    const float *state, const float *stats,
                    const float *updateSq, const AdafactorApplyScalars &s);
/// max |x| (NaN if any is NaN; 0 for none).
float maxAbs(int threads, const float *x, int64_t n);

} // namespace cpu
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CPU_KERNELS_H
