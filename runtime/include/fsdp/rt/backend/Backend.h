//===- Backend.h - What every compute backend implements --------*- C++ -*-===//
//
// A backend owns device memory, copies and kernels. Core code (context,
// arena bookkeeping, streams, the C ABI) is written once against this
// interface; backends register themselves by name, so callers never #ifdef.
// Pointers passed to kernels are backend memory (inside the arena) already
// bounds-checked by the caller; kernels validate data-dependent conditions
// (ids in range) themselves and throw fsdp::rt::Error.
//
// Floating-point operands share one storage dtype per call (`dt`); compute is
// f32 whatever the storage type.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_BACKEND_H
#define FSDP_RT_BACKEND_H

#include "fsdp/rt/AdafactorLayout.h"
#include "fsdp/rt/DType.h"
#include "fsdp/rt/backend/DeviceOrdering.h"
#include "fsdp/rt/backend/IndexCheck.h"
#include "fsdp/rt/backend/Shape.h"
#include "fsdp/rt/math/Adafactor.h"
#include "fsdp/rt/math/Conv.h"
#include "fsdp/rt/math/Optimizer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {

enum class BinaryOp : int32_t {
  Add = FSDPRT_ADD,
  Sub = FSDPRT_SUB,
  Mul = FSDPRT_MUL,
  Div = FSDPRT_DIV,
  Max = FSDPRT_MAX,
  Min = FSDPRT_MIN,
  MaxWeight = FSDPRT_MAX_WEIGHT,
  MinWeight = FSDPRT_MIN_WEIGHT,
  Keep = FSDPRT_KEEP,
  Lt = FSDPRT_LT,
  Le = FSDPRT_LE,
  Gt = FSDPRT_GT,
  Ge = FSDPRT_GE,
  Eq = FSDPRT_EQ,
  Ne = FSDPRT_NE,
  FloorDiv = FSDPRT_FLOOR_DIV,
  Fmod = FSDPRT_FMOD
};
/// FSDPRT_UNARY_*: pointwise math with up to two scalar parameters.
enum class UnaryMath : int32_t {
  Tanh = FSDPRT_UNARY_TANH,
  Sigmoid = FSDPRT_UNARY_SIGMOID,
  Exp = FSDPRT_UNARY_EXP,
  Log = FSDPRT_UNARY_LOG,
  Sqrt = FSDPRT_UNARY_SQRT,
  Rsqrt = FSDPRT_UNARY_RSQRT,
  Abs = FSDPRT_UNARY_ABS,
  Pow = FSDPRT_UNARY_POW,
  Clamp = FSDPRT_UNARY_CLAMP,
  Erf = FSDPRT_UNARY_ERF,
  Sin = FSDPRT_UNARY_SIN,
  Cos = FSDPRT_UNARY_COS,
  Acos = FSDPRT_UNARY_ACOS,
  Asin = FSDPRT_UNARY_ASIN,
  Atan = FSDPRT_UNARY_ATAN,
};
enum class Activation : int32_t {
  Relu = FSDPRT_RELU,
  Gelu = FSDPRT_GELU,
  GeluTanh = FSDPRT_GELU_TANH,
  Silu = FSDPRT_SILU,
};
enum class ReduceKind : int32_t {
  Sum = FSDPRT_REDUCE_SUM,
  Mean = FSDPRT_REDUCE_MEAN
};
enum class LossReduction : int32_t {
  Mean = FSDPRT_LOSS_MEAN,
  Sum = FSDPRT_LOSS_SUM
};
enum class Distribution : int32_t {
  Uniform = FSDPRT_RNG_UNIFORM,
  Normal = FSDPRT_RNG_NORMAL
};
/// HostToDevice / DeviceToHost: from / into the caller's memory, done when
/// the call returns. DeviceToDevice: ordered on the stream. Staged: a side
/// is a host buffer (CPU offload's pinned memory), ordered on the stream as
/// device work. HostBuffer: between the caller's memory and a host buffer,
/// done when the call returns.
enum class CopyKind {
  HostToDevice,
  DeviceToHost,
  DeviceToDevice,
  Staged,
  HostBuffer
};

/// `count` slices at start, start + step, ... of the middle dim of an
/// [outer, dim, inner] tensor.
struct StridedWindow {
  int64_t outer, dim, inner, start, step, count;
};

struct MatmulDims {
  int64_t batch, m, k, n;
  bool transA, transB, bBatched;
};

/// One tensor of an optimizer update: n elements of an f32 parameter, its
/// gradient (in the update's gradient dtype) and its f32 state tensors
/// (SGD: the momentum buffer or null, the same for every tensor of a call;
/// AdamW: exp_avg, exp_avg_sq; Lion: exp_avg; unused ones null).
struct UpdateTensors {
  float *param;
  const void *grad;
  float *state[2];
  int64_t n;
};

/// A grouped GEMM: x [rows, k], w [groups, k, n], y [rows, n].
struct GroupedDims {
  int64_t rows, groups, k, n;
};

struct AttentionDims {
  int64_t batch, tq, tk, heads, kvHeads, headDim;
  bool causal;
  double scale; // Already resolved: never <= 0 here.
  /// An additive bias [biasBatch, biasHeads, tq, tk] (each 1 or the full
  /// size: broadcast); 0 and 0 without one.
  int64_t biasBatch = 0, biasHeads = 0;
  /// Elements from one batch element's bias slices to the next (0 when
  /// the bias is broadcast over the batch).
  int64_t biasBatchStride() const {
    return biasBatch == 1 ? 0 : biasHeads * tq * tk;
  }
  /// Offset of the bias slice of (batch b, head h), in elements.
  int64_t biasOffset(int64_t b, int64_t h) const {
    return b * biasBatchStride() + (biasHeads == 1 ? 0 : h) * tq * tk;
  }
  int64_t biasNumel() const { return biasBatch * biasHeads * tq * tk; }
  /// Elements from one token's q (dq) to the next and from one token's k,
  /// v (dk, dv) to the next: 0 for contiguous (H·D and Hkv·D), more where
  /// q, k and v are slices of one packed projection [B, T, (H + 2·Hkv)·D].
  int64_t qRow = 0, kvRow = 0;
  int64_t qRowStride() const { return qRow ? qRow : heads * headDim; }
  int64_t kvRowStride() const { return kvRow ? kvRow : kvHeads * headDim; }
  bool contiguous() const {
    return qRowStride() == heads * headDim &&
           kvRowStride() == kvHeads * headDim;
  }
  /// Elements from q's first to one past its last (k, v: kvExtent).
  int64_t qExtent() const {
    int64_t tokens = batch * tq;
    return tokens > 0 ? (tokens - 1) * qRowStride() + heads * headDim : 0;
  }
  int64_t kvExtent() const {
    int64_t tokens = batch * tk;
    return tokens > 0 ? (tokens - 1) * kvRowStride() + kvHeads * headDim : 0;
  }
};

struct RngKey {
  uint64_t seed, step, rngId;
};

struct SgdOptions {
  double lr, momentum, dampening, weightDecay;
  bool nesterov;
};

struct AdamWOptions {
  double lr, beta1, beta2, eps, weightDecay;
  bool l2WeightDecay; // torch.optim.Adam: decay added to the gradient
};

struct LionOptions {
  double lr, beta1, beta2, weightDecay;
};

struct AdafactorOptions {
  double lr, eps1, eps2, d, weightDecay;
};

class Backend {
public:
  virtual ~Backend();
  virtual const char *name() const = 0;

  // Memory: one allocation per context holds the whole arena.
  virtual void *allocate(int64_t bytes) = 0;
  virtual void deallocate(void *ptr) = 0;
  /// Host memory the device can copy from and to asynchronously (pinned on
  /// GPUs): the host buffers of CPU offload.
  virtual void *allocateHost(int64_t bytes);
  virtual void deallocateHost(void *ptr);
  /// The most device memory held at once since the last reset: the arena
  /// plus per-call scratch (what PyTorch's max_memory_allocated counts);
  /// -1 where the backend does not track it (the CPU's host memory).
  virtual int64_t deviceHighWater() { return -1; }
  virtual void resetDeviceHighWater() {}
  /// Device memory held beside the arena between calls, each counted once:
  /// the streams' GEMM workspaces and per-call scratch reserves (sized by
  /// the largest call so far), and the operation of the largest call's
  /// scratch; -1 where the backend does not track them (the CPU's). Read
  /// between steps, with no call in flight.
  struct DeviceReserve {
    int64_t gemmWorkspaceBytes = -1;
    int64_t scratchBytes = -1;
    std::string scratchOp;
  };
  virtual DeviceReserve deviceReserve() { return {}; }
  /// Device-side ordering if calls return before their device work is done
  /// (DeviceOrdering.h); null when each call completes its work.
  virtual DeviceOrdering *deviceOrdering() { return nullptr; }
  /// Whether arena pointers are host-addressable (fsdprt_buffer_host_ptr),
  /// which host communicators (Gloo) need.
  virtual bool hostAccessible() const = 0;
  /// The communicator backend that reads this backend's memory, which
  /// fsdprt_comm_init "default" picks.
  virtual const char *communicator() const { return "gloo"; }
  /// The CUDA device this backend runs on (-1: none); its communicators
  /// use the same one (CommOptions::device).
  virtual int deviceOrdinal() const { return -1; }

  // Step graphs (CUDA graphs; Context::beginCapture drives them). Between
  // graphBegin and graphEnd, the device work of every thread that joined
  // is recorded into one graph instead of run. A per-step value (an
  // optimizer's scalars, an RNG key) is passed to its kernel both by value
  // and as `live`, a copy in the graph's live block that each launch
  // refreshes; kernels use *live when it is set. Backends without graphs
  // (CPU) throw Unsupported from graphBegin and never see `live` set.
  virtual bool hasStepGraphs() const { return false; }
  /// Starts a capture whose live block holds `liveBytes`; returns the
  /// block's device address.
  virtual void *graphBegin(int64_t liveBytes);
  /// The calling thread's device work joins / leaves the capture.
  virtual void graphJoin();
  virtual void graphLeave();
  /// Ends the capture (always) and returns the graph's id; throws when the
  /// capture failed (a host wait, an unsupported call while capturing).
  virtual int64_t graphEnd();
  /// On the calling thread's device queue: copies `live` (liveBytes, the
  /// refreshed values) into the graph's live block, then runs the graph.
  virtual void graphLaunch(int64_t graph, const void *live, int64_t liveBytes);
  virtual void graphDestroy(int64_t graph);

  virtual void copy(void *dst, const void *src, int64_t bytes,
                    CopyKind kind) = 0;
  virtual void fill(DType dt, void *dst, int64_t n, double value) = 0;
  /// dst[i] += value for an I32 or I64 tensor.
  virtual void addInteger(DType dt, void *dst, int64_t n, int64_t value) = 0;
  /// src may be an integer type; dst is a float type.
  virtual void cast(DType srcType, const void *src, DType dstType, void *dst,
                    int64_t n) = 0;

  virtual void linearForward(DType dt, const void *x, const void *w,
                             const void *b, void *y, int64_t m, int64_t k,
                             int64_t n) = 0;
  virtual void linearBackward(DType dt, const void *x, const void *w,
                              const void *dy, void *dx, void *dw, void *db,
                              int64_t m, int64_t k, int64_t n) = 0;
  /// pre = linearForward(x, w, b), y = the tanh GELU of pre. By default
  /// the two unfused calls in turn (the CPU backend's, so its results are
  /// the unfused program's bits; CUDA's where its epilogue does not apply).
  virtual void linearGeluForward(DType dt, const void *x, const void *w,
                                 const void *b, void *pre, void *y, int64_t m,
                                 int64_t k, int64_t n) {
    linearForward(dt, x, w, b, pre, m, k, n);
    activationForward(dt, Activation::GeluTanh, pre, y, m * n);
  }
  /// linearBackward with dx = the tanh GELU's gradient at pre of dy * w;
  /// by default linearBackward, then the GELU's gradient in place on dx.
  virtual void linearGeluBackward(DType dt, const void *x, const void *w,
                                  const void *dy, const void *pre, void *dx,
                                  void *dw, void *db, int64_t m, int64_t k,
                                  int64_t n) {
    linearBackward(dt, x, w, dy, dx, dw, db, m, k, n);
    activationBackward(dt, Activation::GeluTanh, pre, dx, dx, m * k);
  }
  virtual void matmulForward(DType dt, const void *a, const void *b, void *c,
                             const MatmulDims &d) = 0;
  virtual void matmulBackward(DType dt, const void *a, const void *b,
                              const void *dc, void *da, void *db,
                              const MatmulDims &d) = 0;

  /// dt may be I32 or I64 for Add, Sub and Mul (math/Pointwise.h).
  virtual void binaryForward(DType dt, BinaryOp op, const void *a,
                             const Shape &aShape, const void *b,
                             const Shape &bShape, void *out) = 0;
  virtual void binaryBackward(DType dt, BinaryOp op, const void *a,
                              const Shape &aShape, const void *b,
                              const Shape &bShape, const void *dout, void *da,
                              void *db) = 0;
  virtual void scale(DType dt, const void *x, void *y, int64_t n,
                     double factor) = 0;
  /// y = f(x; a, b) and dx = dy * f'(x; a, b) (math/Unary.h).
  virtual void unaryForward(DType dt, UnaryMath kind, const void *x, void *y,
                            int64_t n, double a, double b) = 0;
  virtual void unaryBackward(DType dt, UnaryMath kind, const void *x,
                             const void *dy, void *dx, int64_t n, double a,
                             double b) = 0;
  virtual void activationForward(DType dt, Activation kind, const void *x,
                                 void *y, int64_t n) = 0;
  virtual void activationBackward(DType dt, Activation kind, const void *x,
                                  const void *dy, void *dx, int64_t n) = 0;

  virtual void layerNormForward(DType dt, const void *x, const void *w,
                                const void *b, void *y, int64_t rows, int64_t d,
                                double eps) = 0;
  /// sum = a + b rounded to dt, then layerNormForward of the stored sum.
  virtual void addLayerNormForward(DType dt, const void *a, const void *b,
                                   const void *w, const void *bias, void *sum,
                                   void *y, int64_t rows, int64_t d,
                                   double eps) = 0;
  virtual void layerNormBackward(DType dt, const void *x, const void *w,
                                 const void *dy, void *dx, void *dw, void *db,
                                 int64_t rows, int64_t d, double eps) = 0;
  /// layerNormBackward with dx = addend + the input gradient rounded to dt,
  /// the sum rounded as binaryForward's add; addend may be dx.
  virtual void addLayerNormBackward(DType dt, const void *x, const void *w,
                                    const void *dy, const void *addend,
                                    void *dx, void *dw, void *db, int64_t rows,
                                    int64_t d, double eps) = 0;
  virtual void rmsNormForward(DType dt, const void *x, const void *w, void *y,
                              int64_t rows, int64_t d, double eps) = 0;
  virtual void rmsNormBackward(DType dt, const void *x, const void *w,
                               const void *dy, void *dx, void *dw, int64_t rows,
                               int64_t d, double eps) = 0;
  /// Softmax over the middle dim of [outer, dim, inner].
  virtual void softmaxForward(DType dt, const void *x, void *y, int64_t outer,
                              int64_t dim, int64_t inner) = 0;
  virtual void softmaxBackward(DType dt, const void *y, const void *dy,
                               void *dx, int64_t outer, int64_t dim,
                               int64_t inner) = 0;

  virtual void embeddingForward(DType dt, DType idsType, const void *ids,
                                const void *table, void *out, int64_t numIds,
                                int64_t vocab, int64_t dim) = 0;
  virtual void embeddingBackward(DType dt, DType idsType, const void *ids,
                                 const void *dy, void *dtable, int64_t numIds,
                                 int64_t vocab, int64_t dim) = 0;
  /// Fails (IndexCheck.h, naming `op`) at the first of the n ids (idsType
  /// I32 or I64) that `range` does not allow; a device reports where its
  /// stream is next synchronised, as the embedding's check. `op` outlives
  /// the context (a step library's constant).
  virtual void checkIndices(DType idsType, const void *ids, int64_t n,
                            const IndexRange &range, const char *op) = 0;
  /// `bias` (null: none) is d.biasNumel() elements; `dbias` (null: not
  /// wanted) too. `stats` (null: not wanted) gets each query row's
  /// log-sum-exp of its scaled, masked scores, [batch, heads, tq]; the
  /// backward takes them with the forward's `out` (both null: it computes
  /// what it needs) and gives the same results either way.
  virtual void attentionForward(DType dt, const void *q, const void *k,
                                const void *v, const void *bias, void *out,
                                float *stats, const AttentionDims &d) = 0;
  virtual void attentionBackward(DType dt, const void *q, const void *k,
                                 const void *v, const void *bias,
                                 const void *dout, const void *out,
                                 const float *stats, void *dq, void *dk,
                                 void *dv, void *dbias,
                                 const AttentionDims &d) = 0;
  /// inverse = true rotates by -angle: the VJP of the forward rotation.
  virtual void rope(DType dt, const void *x, void *y, int64_t batch,
                    int64_t seq, int64_t heads, int64_t headDim, double theta,
                    bool inverse) = 0;
  /// y = x * mask / (1 - p); applied to dy it is also the backward.
  /// `live` (may be null): the key in a step graph's live block.
  virtual void dropout(DType dt, const void *x, void *y, int64_t n, double p,
                       const RngKey &key, const RngKey *live) = 0;
  virtual void rngFill(DType dt, void *dst, int64_t n, Distribution dist,
                       double a, double b, const RngKey &key,
                       const RngKey *live) = 0;
  virtual void batchNormForward(DType dt, const void *x, const void *w,
                                const void *b, void *runningMean,
                                void *runningVar, void *y, int64_t n, int64_t c,
                                int64_t spatial, double eps, double momentum,
                                bool training) = 0;
  virtual void batchNormBackward(DType dt, const void *x, const void *w,
                                 const void *runningMean,
                                 const void *runningVar, const void *dy,
                                 void *dx, void *dw, void *db, int64_t n,
                                 int64_t c, int64_t spatial, double eps,
                                 bool training) = 0;

  /// y = conv(x, w) + b (b may be null); the two gradients of it.
  virtual void convForward(DType dt, const void *x, const void *w,
                           const void *b, void *y, const ConvGeometry &g) = 0;
  virtual void convBackwardInput(DType dt, const void *dy, const void *w,
                                 void *dx, const ConvGeometry &g) = 0;
  virtual void convBackwardWeight(DType dt, const void *dy, const void *x,
                                  void *dw, const ConvGeometry &g) = 0;

  /// Max pooling on a convolution geometry (o = groups = c) and its
  /// input gradient.
  virtual void maxPoolForward(DType dt, const void *x, void *y,
                              const ConvGeometry &g) = 0;
  virtual void maxPoolBackward(DType dt, const void *x, const void *dy,
                               void *dx, const ConvGeometry &g) = 0;

  virtual void transpose(DType dt, const void *x, void *y, const Shape &xShape,
                         const std::vector<int64_t> &perm) = 0;
  /// Copies a [outer, srcDim, inner] slab's [offset, offset+size) range of
  /// the middle dim into a [outer, size, inner] tensor, or back (split and
  /// concat are both made of these).
  virtual void copySlab(DType dt, const void *src, int64_t srcDim,
                        int64_t srcOffset, void *dst, int64_t dstDim,
                        int64_t dstOffset, int64_t outer, int64_t size,
                        int64_t inner) = 0;
  /// Gathers the window of `src` ([outer, dim, inner]) into `dst`
  /// ([outer, count, inner]), or with `scatter` writes `src` (the
  /// window's shape) into those positions of `dst`, leaving the rest.
  virtual void copyStrided(DType dt, const void *src, void *dst,
                           const StridedWindow &w, bool scatter) = 0;
  /// The running sum of x ([outer, dim, inner], any dtype) along the
  /// middle dim, from its end when `reverse` (math/Scan.h).
  virtual void cumsum(DType dt, const void *x, void *y, int64_t outer,
                      int64_t dim, int64_t inner, bool reverse) = 0;
  /// Mixture-of-experts routing along the last dim of [rows, n] (fsdprt.h):
  /// top-k and stable sort with i64 positions, histc, the inverse of a
  /// permutation (dt I32 or I64). Data-dependent faults (a non-permutation)
  /// are reported as the index checks are.
  virtual void topkForward(DType dt, const void *x, void *values,
                           int64_t *indices, int64_t rows, int64_t n,
                           int64_t k) = 0;
  virtual void sortForward(DType dt, const void *x, void *values,
                           int64_t *indices, int64_t rows, int64_t n) = 0;
  virtual void histc(DType dt, const void *x, void *y, int64_t numel,
                     int64_t bins, double min, double max) = 0;
  virtual void invertPermutation(DType dt, const void *p, void *y,
                                 int64_t n) = 0;
  /// The grouped GEMM over run-time segment ends `offsets` (offsetsType I32
  /// or I64) and its weight gradient (math/Grouped.h).
  virtual void groupedMatmulForward(DType dt, DType offsetsType, const void *x,
                                    const void *w, const void *offsets,
                                    void *y, const GroupedDims &d) = 0;
  virtual void groupedMatmulBackwardWeight(DType dt, DType offsetsType,
                                           const void *x, const void *dy,
                                           const void *offsets, void *dw,
                                           const GroupedDims &d) = 0;
  /// dims is a sorted list of reduced dims of xShape.
  virtual void reduceForward(DType dt, ReduceKind kind, const void *x,
                             const Shape &xShape,
                             const std::vector<int64_t> &dims, void *y) = 0;
  virtual void reduceBackward(DType dt, ReduceKind kind, const void *dy,
                              const Shape &xShape,
                              const std::vector<int64_t> &dims, void *dx) = 0;

  /// Logits are n rows of `width`, their first c columns the classes: the
  /// rest (vocabulary padding) take no part and get a zero gradient.
  virtual void crossEntropyForward(DType dt, DType targetType,
                                   const void *logits, const void *targets,
                                   void *loss, int64_t n, int64_t c,
                                   int64_t width, LossReduction reduction,
                                   int64_t ignoreIndex) = 0;
  virtual void crossEntropyBackward(DType dt, DType targetType,
                                    const void *logits, const void *targets,
                                    const void *dloss, void *dlogits, int64_t n,
                                    int64_t c, int64_t width,
                                    LossReduction reduction,
                                    int64_t ignoreIndex) = 0;
  /// Both of the above from one pass over the logits, the same bits;
  /// dlogits may be logits.
  virtual void crossEntropyForwardBackward(
      DType dt, DType targetType, const void *logits, const void *targets,
      const void *dloss, void *loss, void *dlogits, int64_t n, int64_t c,
      int64_t width, LossReduction reduction, int64_t ignoreIndex) = 0;
  virtual void mseLossForward(DType dt, const void *a, const void *b,
                              void *loss, int64_t n,
                              LossReduction reduction) = 0;
  virtual void mseLossBackward(DType dt, const void *a, const void *b,
                               const void *dloss, void *da, void *db, int64_t n,
                               LossReduction reduction) = 0;

  /// The updates do nothing when `skip` (one f32 in device memory, or
  /// null) is non-zero: a loss scaler found a non-finite gradient. Each
  /// updates `count` tensors (the flat shards of several units, or runs of
  /// one) with the same scalars, OptimizerScalars.h's for the step; `live`
  /// (may be null) is their copy in a step graph's live block. A backend
  /// may do them in one launch: the tensors are disjoint.
  virtual void sgdStep(DType gradType, const UpdateTensors *tensors,
                       int64_t count, const SgdScalars &s,
                       const SgdScalars *live, const float *skip) = 0;
  virtual void adamwStep(DType gradType, const UpdateTensors *tensors,
                         int64_t count, const AdamWScalars &s,
                         const AdamWScalars *live, const float *skip) = 0;
  virtual void lionStep(DType gradType, const UpdateTensors *tensors,
                        int64_t count, const LionScalars &s,
                        const LionScalars *live, const float *skip) = 0;
  /// Adafactor over n elements of a flat parameter starting at its element
  /// flatBegin (AdafactorLayout.h; FSDPAdafactorOps.td): this rank's
  /// partial statistics (overwritten); the second moments from the summed
  /// ones, and this rank's partial Σ update² (overwritten); the update.
  virtual void adafactorStats(DType gradType, const float *param,
                              const void *grad, int64_t n, int64_t flatBegin,
                              const AdafactorLayout &layout, float *stats) = 0;
  virtual void adafactorFactor(DType gradType, const void *grad, int64_t n,
                               int64_t flatBegin, const AdafactorLayout &layout,
                               float *state, const float *stats,
                               float *updateSq, const AdafactorFactorScalars &s,
                               const AdafactorFactorScalars *live,
                               const float *skip) = 0;
  virtual void adafactorApply(DType gradType, float *param, const void *grad,
                              int64_t n, int64_t flatBegin,
                              const AdafactorLayout &layout, const float *state,
                              const float *stats, const float *updateSq,
                              const AdafactorApplyScalars &s,
                              const AdafactorApplyScalars *live,
                              const float *skip) = 0;
  /// *out = 1 if any of the n elements is inf or NaN, else
  /// (accumulate ? *out : 0).
  virtual void nonfiniteFlag(DType dt, const void *grad, int64_t n, float *out,
                             bool accumulate) = 0;
  virtual void gradSqNorm(DType dt, const void *grad, int64_t n, float *out,
                          bool accumulate) = 0;
  /// *out = max |grad| (NaN if any is NaN), or with `accumulate` the max of
  /// that and *out.
  virtual void maxAbs(DType dt, const void *grad, int64_t n, float *out,
                      bool accumulate) = 0;
  virtual void clipGrad(DType dt, void *grad, int64_t n, const float *totalSq,
                        double maxNorm) = 0;
  /// norm = gradNormOf(total, normType) (math/Optimizer.h); coef = min(1,
  /// maxNorm / (norm + 1e-6)), in f32 as torch.nn.utils.clip_grad_norm_
  /// computes them.
  virtual void clipCoefficient(const float *total, float *norm, float *coef,
                               double maxNorm, double normType) = 0;
};

using BackendFactory = std::function<std::unique_ptr<Backend>(int numThreads)>;

/// Registers a backend under `name`; returns true so it can initialise a
/// static in the backend's translation unit.
bool registerBackend(const std::string &name, BackendFactory factory);
/// Throws Error(Unsupported) listing the registered names if unknown.
std::unique_ptr<Backend> createBackend(const std::string &name, int numThreads);
std::vector<std::string> registeredBackends();

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_BACKEND_H
