//===- CpuBackend.cpp - The CPU backend -----------------------------------===//
//
// Adapts the kernels of Kernels.h to the Backend interface. Pointwise kernels
// take the storage type directly (Storage.h); the others compute in f32 on
// 16-bit operands staged through HostStaging (Staging.h).
//
//===----------------------------------------------------------------------===//
#include "CpuBackend.h"
#include "HostStaging.h"
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/Error.h"
#include "fsdp/rt/fsdprt.h"
#include "fsdp/rt/backend/PackedAttention.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

namespace fsdp {
namespace rt {
namespace cpu {

namespace {

/// Host memory and slab copies for ContiguousAttention.
struct HostRows {
  struct Buffer {
    std::vector<char> bytes;
    void *data() { return bytes.data(); }
  };
  Buffer allocate(int64_t bytes) { return Buffer{std::vector<char>(bytes)}; }
  void copyRows(void *dst, int64_t dstPitch, const void *src,
                int64_t srcPitch, int64_t rowBytes, int64_t rows) {
    cpu::copySlab(threads, 1, src, srcPitch, 0, dst, dstPitch, 0, rows,
                  rowBytes, 1);
  }
  int threads;
};

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(int numThreads)
      : threads_(numThreads > 0
                     ? numThreads
                     : std::max(1u, std::thread::hardware_concurrency())) {
    // GEMMs are parallelised by cpu::gemm; OpenBLAS's own threads would make
    // results depend on the thread count (see Gemm.cpp). The setting is
    // process-wide.
    openblas_set_num_threads(1);
  }

  const char *name() const override { return "cpu"; }

  void *allocate(int64_t bytes) override {
    constexpr int64_t kAlign = FSDPRT_ARENA_ALIGNMENT;
    void *p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (!p)
      fail(Status::OutOfMemory, "cannot allocate a ", bytes,
           "-byte arena on the host");
    return p;
  }
  void deallocate(void *ptr) override { std::free(ptr); }
  bool hostAccessible() const override { return true; }
  void copy(void *dst, const void *src, int64_t bytes, CopyKind) override {
    std::memmove(dst, src, bytes);
  }
  void fill(DType dt, void *dst, int64_t n, double value) override;
  void addInteger(DType dt, void *dst, int64_t n, int64_t value) override {
    auto add = [&](auto *p) {
      for (int64_t i = 0; i < n; ++i)
        p[i] += value;
    };
    if (dt == DType::I32)
      add(static_cast<int32_t *>(dst));
    else
      add(static_cast<int64_t *>(dst));
  }
  void cast(DType srcType, const void *src, DType dstType, void *dst,
            int64_t n) override {
    convert(srcType, src, dstType, dst, n, threads_);
  }

  void linearForward(DType dt, const void *x, const void *w, const void *b,
                     void *y, int64_t m, int64_t k, int64_t n) override {
    HostStaging st = staging();
    cpu::linearForward(threads_, st.in(dt, x, m * k), st.in(dt, w, n * k),
                       st.in(dt, b, n), st.out(dt, y, m * n), m, k, n);
    st.commit();
  }
  void linearBackward(DType dt, const void *x, const void *w, const void *dy,
                      void *dx, void *dw, void *db, int64_t m, int64_t k,
                      int64_t n) override {
    HostStaging st = staging();
    cpu::linearBackward(threads_, st.in(dt, dw ? x : nullptr, m * k),
                        st.in(dt, dx ? w : nullptr, n * k),
                        st.in(dt, dy, m * n), st.out(dt, dx, m * k),
                        st.out(dt, dw, n * k), st.out(dt, db, n), m, k, n);
    st.commit();
  }
  void matmulForward(DType dt, const void *a, const void *b, void *c,
                     const MatmulDims &d) override {
    HostStaging st = staging();
    cpu::matmulForward(threads_, st.in(dt, a, d.batch * d.m * d.k),
                       st.in(dt, b, (d.bBatched ? d.batch : 1) * d.k * d.n),
                       st.out(dt, c, d.batch * d.m * d.n), d);
    st.commit();
  }
  void matmulBackward(DType dt, const void *a, const void *b, const void *dc,
                      void *da, void *db, const MatmulDims &d) override {
    int64_t bNumel = (d.bBatched ? d.batch : 1) * d.k * d.n;
    HostStaging st = staging();
    cpu::matmulBackward(threads_, st.in(dt, a, d.batch * d.m * d.k),
                        st.in(dt, b, bNumel),
                        st.in(dt, dc, d.batch * d.m * d.n),
                        st.out(dt, da, d.batch * d.m * d.k),
                        st.out(dt, db, bNumel), d);
    st.commit();
  }

  void binaryForward(DType dt, BinaryOp op, const void *a, const Shape &as,
                     const void *b, const Shape &bs, void *out) override {
    cpu::binaryForward(threads_, dt, op, a, as, b, bs, out);
  }
  void binaryBackward(DType dt, BinaryOp op, const void *a, const Shape &as,
                      const void *b, const Shape &bs, const void *dout,
                      void *da, void *db) override {
    bool needValues = op == BinaryOp::Mul || op == BinaryOp::Div;
    HostStaging st = staging();
    cpu::binaryBackward(threads_, op,
                        st.in(dt, needValues ? a : nullptr, numelOf(as)), as,
                        st.in(dt, needValues ? b : nullptr, numelOf(bs)), bs,
                        st.in(dt, dout, numelOf(broadcastShapes(as, bs))),
                        st.out(dt, da, numelOf(as)),
                        st.out(dt, db, numelOf(bs)));
    st.commit();
  }
  void scale(DType dt, const void *x, void *y, int64_t n,
             double factor) override {
    cpu::scale(threads_, dt, x, y, n, static_cast<float>(factor));
  }
  void unaryForward(DType dt, UnaryMath kind, const void *x, void *y,
                    int64_t n, double a, double b) override {
    cpu::unaryForward(threads_, dt, kind, x, y, n, static_cast<float>(a),
                      static_cast<float>(b));
  }
  void unaryBackward(DType dt, UnaryMath kind, const void *x, const void *dy,
                     void *dx, int64_t n, double a, double b) override {
    cpu::unaryBackward(threads_, dt, kind, x, dy, dx, n, static_cast<float>(a),
                       static_cast<float>(b));
  }
  void activationForward(DType dt, Activation kind, const void *x, void *y,
                         int64_t n) override {
    cpu::activationForward(threads_, dt, kind, x, y, n);
  }
  void activationBackward(DType dt, Activation kind, const void *x,
                          const void *dy, void *dx, int64_t n) override {
    cpu::activationBackward(threads_, dt, kind, x, dy, dx, n);
  }

  void layerNormForward(DType dt, const void *x, const void *w, const void *b,
                        void *y, int64_t rows, int64_t d, double eps) override {
    HostStaging st = staging();
    cpu::layerNormForward(threads_, st.in(dt, x, rows * d), st.in(dt, w, d),
                          st.in(dt, b, d), st.out(dt, y, rows * d), rows, d,
                          static_cast<float>(eps));
    st.commit();
  }
  void addLayerNormForward(DType dt, const void *a, const void *b,
                           const void *w, const void *bias, void *sum, void *y,
                           int64_t rows, int64_t d, double eps) override {
    HostStaging st = staging();
    cpu::addLayerNormForward(threads_, dt, a, b, st.in(dt, w, d),
                             st.in(dt, bias, d), sum, st.out(dt, y, rows * d),
                             rows, d, static_cast<float>(eps));
    st.commit();
  }
  void layerNormBackward(DType dt, const void *x, const void *w, const void *dy,
                         void *dx, void *dw, void *db, int64_t rows, int64_t d,
                         double eps) override {
    HostStaging st = staging();
    cpu::layerNormBackward(threads_, st.in(dt, x, rows * d), st.in(dt, w, d),
                           st.in(dt, dy, rows * d), st.out(dt, dx, rows * d),
                           st.out(dt, dw, d), st.out(dt, db, d), rows, d,
                           static_cast<float>(eps));
    st.commit();
  }
  void addLayerNormBackward(DType dt, const void *x, const void *w,
                            const void *dy, const void *addend, void *dx,
                            void *dw, void *db, int64_t rows, int64_t d,
                            double eps) override {
    HostStaging st = staging();
    cpu::addLayerNormBackward(threads_, dt, st.in(dt, x, rows * d),
                              st.in(dt, w, d), st.in(dt, dy, rows * d), addend,
                              dx, st.out(dt, dw, d), st.out(dt, db, d), rows, d,
                              static_cast<float>(eps));
    st.commit();
  }
  void rmsNormForward(DType dt, const void *x, const void *w, void *y,
                      int64_t rows, int64_t d, double eps) override {
    HostStaging st = staging();
    cpu::rmsNormForward(threads_, st.in(dt, x, rows * d), st.in(dt, w, d),
                        st.out(dt, y, rows * d), rows, d,
                        static_cast<float>(eps));
    st.commit();
  }
  void rmsNormBackward(DType dt, const void *x, const void *w, const void *dy,
                       void *dx, void *dw, int64_t rows, int64_t d,
                       double eps) override {
    HostStaging st = staging();
    cpu::rmsNormBackward(threads_, st.in(dt, x, rows * d), st.in(dt, w, d),
                         st.in(dt, dy, rows * d), st.out(dt, dx, rows * d),
                         st.out(dt, dw, d), rows, d, static_cast<float>(eps));
    st.commit();
  }
  void softmaxForward(DType dt, const void *x, void *y, int64_t outer,
                      int64_t dim, int64_t inner) override {
    int64_t n = outer * dim * inner;
    HostStaging st = staging();
    cpu::softmaxForward(threads_, st.in(dt, x, n), st.out(dt, y, n), outer,
                        dim, inner);
    st.commit();
  }
  void softmaxBackward(DType dt, const void *y, const void *dy, void *dx,
                       int64_t outer, int64_t dim, int64_t inner) override {
    int64_t n = outer * dim * inner;
    HostStaging st = staging();
    cpu::softmaxBackward(threads_, st.in(dt, y, n), st.in(dt, dy, n),
                         st.out(dt, dx, n), outer, dim, inner);
    st.commit();
  }

  void embeddingForward(DType dt, DType idsType, const void *ids,
                        const void *table, void *out, int64_t numIds,
                        int64_t vocab, int64_t dim) override {
    cpu::embeddingForward(threads_, idsType, ids, table, out, dtypeSize(dt),
                          numIds, vocab, dim);
  }
  void checkIndices(DType idsType, const void *ids, int64_t n,
                    const IndexRange &range, const char *op) override {
    cpu::checkIndices(idsType, ids, n, range, op);
  }
  void embeddingBackward(DType dt, DType idsType, const void *ids,
                         const void *dy, void *dtable, int64_t numIds,
                         int64_t vocab, int64_t dim) override {
    HostStaging st = staging();
    cpu::embeddingBackward(threads_, idsType, ids, st.in(dt, dy, numIds * dim),
                           st.out(dt, dtable, vocab * dim), numIds, vocab,
                           dim);
    st.commit();
  }
  void attentionForward(DType dt, const void *q, const void *k, const void *v,
                        const void *bias, void *out, float *stats,
                        const AttentionDims &d) override {
    if (!d.contiguous()) { // slices of a packed projection
      ContiguousAttention<HostRows> c(HostRows{threads_}, dt, d);
      const void *cq = c.q(q), *ck = c.kv(k), *cv = c.kv(v);
      return attentionForward(dt, cq, ck, cv, bias, out, stats, c.dims());
    }
    int64_t qn = d.batch * d.tq * d.heads * d.headDim;
    int64_t kvn = d.batch * d.tk * d.kvHeads * d.headDim;
    HostStaging st = staging();
    cpu::attentionForward(threads_, st.in(dt, q, qn), st.in(dt, k, kvn),
                          st.in(dt, v, kvn), st.in(dt, bias, d.biasNumel()),
                          st.out(dt, out, qn), stats, d);
    st.commit();
  }
  // The CPU's backward needs the statistics only (not the forward's out).
  void attentionBackward(DType dt, const void *q, const void *k, const void *v,
                         const void *bias, const void *dout, const void *out,
                         const float *stats, void *dq, void *dk, void *dv,
                         void *dbias, const AttentionDims &d) override {
    if (!d.contiguous()) {
      ContiguousAttention<HostRows> c(HostRows{threads_}, dt, d);
      const void *cq = c.q(q), *ck = c.kv(k), *cv = c.kv(v);
      void *cdq = c.dq(dq), *cdk = c.dkv(dk), *cdv = c.dkv(dv);
      attentionBackward(dt, cq, ck, cv, bias, dout, out, stats, cdq, cdk, cdv,
                        dbias, c.dims());
      return c.finish();
    }
    int64_t qn = d.batch * d.tq * d.heads * d.headDim;
    int64_t kvn = d.batch * d.tk * d.kvHeads * d.headDim;
    HostStaging st = staging();
    cpu::attentionBackward(threads_, st.in(dt, q, qn), st.in(dt, k, kvn),
                           st.in(dt, v, kvn), st.in(dt, bias, d.biasNumel()),
                           st.in(dt, dout, qn), stats, st.out(dt, dq, qn),
                           st.out(dt, dk, kvn), st.out(dt, dv, kvn),
                           st.out(dt, dbias, d.biasNumel()), d);
    st.commit();
  }
  void rope(DType dt, const void *x, void *y, int64_t batch, int64_t seq,
            int64_t heads, int64_t headDim, double theta,
            bool inverse) override {
    int64_t n = batch * seq * heads * headDim;
    HostStaging st = staging();
    cpu::rope(threads_, st.in(dt, x, n), st.out(dt, y, n), batch, seq, heads,
              headDim, theta, inverse);
    st.commit();
  }
  // `live` is only set inside step graphs, which this backend has not.
  void dropout(DType dt, const void *x, void *y, int64_t n, double p,
               const RngKey &key, const RngKey *) override {
    cpu::dropout(threads_, dt, x, y, n, static_cast<float>(p), key);
  }
  void rngFill(DType dt, void *dst, int64_t n, Distribution dist, double a,
               double b, const RngKey &key, const RngKey *) override {
    HostStaging st = staging();
    cpu::rngFill(threads_, st.out(dt, dst, n), n, dist, static_cast<float>(a),
                 static_cast<float>(b), key);
    st.commit();
  }
  void batchNormForward(DType dt, const void *x, const void *w, const void *b,
                        void *runningMean, void *runningVar, void *y, int64_t n,
                        int64_t c, int64_t spatial, double eps, double momentum,
                        bool training) override {
    int64_t numel = n * c * spatial;
    HostStaging st = staging();
    cpu::batchNormForward(
        threads_, st.in(dt, x, numel), st.in(dt, w, c), st.in(dt, b, c),
        st.inout(dt, runningMean, c, training),
        st.inout(dt, runningVar, c, training), st.out(dt, y, numel),
        n, c, spatial, static_cast<float>(eps), static_cast<float>(momentum),
        training);
    st.commit();
  }
  void batchNormBackward(DType dt, const void *x, const void *w,
                         const void *runningMean, const void *runningVar,
                         const void *dy, void *dx, void *dw, void *db,
                         int64_t n, int64_t c, int64_t spatial, double eps,
                         bool training) override {
    int64_t numel = n * c * spatial;
    HostStaging st = staging();
    cpu::batchNormBackward(threads_, st.in(dt, x, numel), st.in(dt, w, c),
                           st.in(dt, runningMean, c),
                           st.in(dt, runningVar, c), st.in(dt, dy, numel),
                           st.out(dt, dx, numel), st.out(dt, dw, c),
                           st.out(dt, db, c), n, c, spatial,
                           static_cast<float>(eps), training);
    st.commit();
  }

  void convForward(DType dt, const void *x, const void *w, const void *b,
                   void *y, const ConvGeometry &g) override {
    HostStaging st = staging();
    cpu::convForward(threads_, st.in(dt, x, g.inputNumel()),
                     st.in(dt, w, g.weightNumel()), st.in(dt, b, g.o),
                     st.out(dt, y, g.outputNumel()), g);
    st.commit();
  }
  void convBackwardInput(DType dt, const void *dy, const void *w, void *dx,
                         const ConvGeometry &g) override {
    HostStaging st = staging();
    cpu::convBackwardInput(threads_, st.in(dt, dy, g.outputNumel()),
                           st.in(dt, w, g.weightNumel()),
                           st.out(dt, dx, g.inputNumel()), g);
    st.commit();
  }
  void convBackwardWeight(DType dt, const void *dy, const void *x, void *dw,
                          const ConvGeometry &g) override {
    HostStaging st = staging();
    cpu::convBackwardWeight(threads_, st.in(dt, dy, g.outputNumel()),
                            st.in(dt, x, g.inputNumel()),
                            st.out(dt, dw, g.weightNumel()), g);
    st.commit();
  }

  void maxPoolForward(DType dt, const void *x, void *y,
                      const ConvGeometry &g) override {
    HostStaging st = staging();
    cpu::maxPoolForward(threads_, st.in(dt, x, g.inputNumel()),
                        st.out(dt, y, g.outputNumel()), g);
    st.commit();
  }
  void maxPoolBackward(DType dt, const void *x, const void *dy, void *dx,
                       const ConvGeometry &g) override {
    HostStaging st = staging();
    cpu::maxPoolBackward(threads_, st.in(dt, x, g.inputNumel()),
                         st.in(dt, dy, g.outputNumel()),
                         st.out(dt, dx, g.inputNumel()), g);
    st.commit();
  }

  void transpose(DType dt, const void *x, void *y, const Shape &xShape,
                 const std::vector<int64_t> &perm) override {
    cpu::transpose(threads_, dtypeSize(dt), x, y, xShape, perm);
  }
  void copySlab(DType dt, const void *src, int64_t srcDim, int64_t srcOffset,
                void *dst, int64_t dstDim, int64_t dstOffset, int64_t outer,
                int64_t size, int64_t inner) override {
    cpu::copySlab(threads_, dtypeSize(dt), src, srcDim, srcOffset, dst, dstDim,
                  dstOffset, outer, size, inner);
  }
  void copyStrided(DType dt, const void *src, void *dst, const StridedWindow &w,
                   bool scatter) override {
    cpu::copyStrided(threads_, dtypeSize(dt), src, dst, w, scatter);
  }
  void topkForward(DType dt, const void *x, void *values, int64_t *indices,
                   int64_t rows, int64_t n, int64_t k) override {
    cpu::topkForward(threads_, dt, x, values, indices, rows, n, k);
  }
  void sortForward(DType dt, const void *x, void *values, int64_t *indices,
                   int64_t rows, int64_t n) override {
    cpu::sortForward(threads_, dt, x, values, indices, rows, n);
  }
  void histc(DType dt, const void *x, void *y, int64_t numel, int64_t bins,
             double min, double max) override {
    cpu::histc(dt, x, y, numel, bins, min, max);
  }
  void invertPermutation(DType dt, const void *p, void *y,
                         int64_t n) override {
    cpu::invertPermutation(dt, p, y, n);
  }
  void groupedMatmulForward(DType dt, DType offsetsType, const void *x,
                            const void *w, const void *offsets, void *y,
                            const GroupedDims &d) override {
    HostStaging st = staging();
    cpu::groupedMatmulForward(threads_, offsetsType, st.in(dt, x, d.rows * d.k),
                              st.in(dt, w, d.groups * d.k * d.n), offsets,
                              st.out(dt, y, d.rows * d.n), d);
    st.commit();
  }
  void groupedMatmulBackwardWeight(DType dt, DType offsetsType, const void *x,
                                   const void *dy, const void *offsets,
                                   void *dw, const GroupedDims &d) override {
    HostStaging st = staging();
    cpu::groupedMatmulBackwardWeight(
        threads_, offsetsType, st.in(dt, x, d.rows * d.k),
        st.in(dt, dy, d.rows * d.n), offsets,
        st.out(dt, dw, d.groups * d.k * d.n), d);
    st.commit();
  }
  void cumsum(DType dt, const void *x, void *y, int64_t outer, int64_t dim,
              int64_t inner, bool reverse) override {
    cpu::cumsum(threads_, dt, x, y, outer, dim, inner, reverse);
  }
  void reduceForward(DType dt, ReduceKind kind, const void *x,
                     const Shape &xShape, const std::vector<int64_t> &dims,
                     void *y) override {
    int64_t out = 1;
    for (size_t i = 0; i < xShape.size(); ++i)
      if (std::find(dims.begin(), dims.end(), int64_t(i)) == dims.end())
        out *= xShape[i];
    HostStaging st = staging();
    cpu::reduceForward(threads_, kind, st.in(dt, x, numelOf(xShape)), xShape,
                       dims, st.out(dt, y, out));
    st.commit();
  }
  void reduceBackward(DType dt, ReduceKind kind, const void *dy,
                      const Shape &xShape, const std::vector<int64_t> &dims,
                      void *dx) override {
    int64_t out = 1;
    for (size_t i = 0; i < xShape.size(); ++i)
      if (std::find(dims.begin(), dims.end(), int64_t(i)) == dims.end())
        out *= xShape[i];
    HostStaging st = staging();
    cpu::reduceBackward(threads_, kind, st.in(dt, dy, out), xShape, dims,
                        st.out(dt, dx, numelOf(xShape)));
    st.commit();
  }

  void crossEntropyForward(DType dt, DType targetType, const void *logits,
                           const void *targets, void *loss, int64_t n,
                           int64_t c, int64_t width, LossReduction reduction,
                           int64_t ignoreIndex) override {
    HostStaging st = staging();
    cpu::crossEntropyForward(threads_, targetType,
                             st.in(dt, logits, n * width), targets,
                             st.out(dt, loss, 1), n, c, width, reduction,
                             ignoreIndex);
    st.commit();
  }
  void crossEntropyBackward(DType dt, DType targetType, const void *logits,
                            const void *targets, const void *dloss,
                            void *dlogits, int64_t n, int64_t c, int64_t width,
                            LossReduction reduction,
                            int64_t ignoreIndex) override {
    HostStaging st = staging();
    cpu::crossEntropyBackward(threads_, targetType,
                              st.in(dt, logits, n * width), targets,
                              st.in(dt, dloss, 1)[0],
                              st.out(dt, dlogits, n * width), n, c, width,
                              reduction, ignoreIndex);
    st.commit();
  }
  void crossEntropyForwardBackward(DType dt, DType targetType,
                                   const void *logits, const void *targets,
                                   const void *dloss, void *loss,
                                   void *dlogits, int64_t n, int64_t c,
                                   int64_t width, LossReduction reduction,
                                   int64_t ignoreIndex) override {
    HostStaging st = staging();
    cpu::crossEntropyForwardBackward(
        threads_, targetType, st.in(dt, logits, n * width), targets,
        st.in(dt, dloss, 1)[0], st.out(dt, loss, 1),
        st.out(dt, dlogits, n * width), n, c, width, reduction, ignoreIndex);
    st.commit();
  }
  void mseLossForward(DType dt, const void *a, const void *b, void *loss,
                      int64_t n, LossReduction reduction) override {
    HostStaging st = staging();
    cpu::mseLossForward(threads_, st.in(dt, a, n), st.in(dt, b, n),
                        st.out(dt, loss, 1), n, reduction);
    st.commit();
  }
  void mseLossBackward(DType dt, const void *a, const void *b,
                       const void *dloss, void *da, void *db, int64_t n,
                       LossReduction reduction) override {
    HostStaging st = staging();
    cpu::mseLossBackward(threads_, st.in(dt, a, n), st.in(dt, b, n),
                         st.in(dt, dloss, 1)[0], st.out(dt, da, n),
                         st.out(dt, db, n), n, reduction);
    st.commit();
  }

  void sgdStep(DType gradType, const UpdateTensors *tensors, int64_t count,
               const SgdScalars &s, const SgdScalars *,
               const float *skip) override {
    forEachUpdate(gradType, tensors, count, skip,
                  [&](const UpdateTensors &t, const float *grad) {
                    cpu::sgdStep(threads_, t.param, grad, t.state[0], t.n, s);
                  });
  }
  void adamwStep(DType gradType, const UpdateTensors *tensors, int64_t count,
                 const AdamWScalars &s, const AdamWScalars *,
                 const float *skip) override {
    forEachUpdate(gradType, tensors, count, skip,
                  [&](const UpdateTensors &t, const float *grad) {
                    cpu::adamwStep(threads_, t.param, grad, t.state[0],
                                   t.state[1], t.n, s);
                  });
  }
  void lionStep(DType gradType, const UpdateTensors *tensors, int64_t count,
                const LionScalars &s, const LionScalars *,
                const float *skip) override {
    forEachUpdate(gradType, tensors, count, skip,
                  [&](const UpdateTensors &t, const float *grad) {
                    cpu::lionStep(threads_, t.param, grad, t.state[0], t.n, s);
                  });
  }
  void adafactorStats(DType gradType, const float *param, const void *grad,
                      int64_t n, int64_t flatBegin,
                      const AdafactorLayout &layout, float *stats) override {
    HostStaging st = staging();
    cpu::adafactorStats(param, st.in(gradType, grad, n), n, flatBegin, layout,
                        stats);
  }
  void adafactorFactor(DType gradType, const void *grad, int64_t n,
                       int64_t flatBegin, const AdafactorLayout &layout,
                       float *state, const float *stats, float *updateSq,
                       const AdafactorFactorScalars &s,
                       const AdafactorFactorScalars *,
                       const float *skip) override {
    if (skip && *skip != 0)
      return;
    HostStaging st = staging();
    cpu::adafactorFactor(st.in(gradType, grad, n), n, flatBegin, layout, state,
                         stats, updateSq, s);
  }
  void adafactorApply(DType gradType, float *param, const void *grad, int64_t n,
                      int64_t flatBegin, const AdafactorLayout &layout,
                      const float *state, const float *stats,
                      const float *updateSq, const AdafactorApplyScalars &s,
                      const AdafactorApplyScalars *,
                      const float *skip) override {
    if (skip && *skip != 0)
      return;
    HostStaging st = staging();
    cpu::adafactorApply(threads_, param, st.in(gradType, grad, n), n, flatBegin,
                        layout, state, stats, updateSq, s);
  }
  void gradSqNorm(DType dt, const void *grad, int64_t n, float *out,
                  bool accumulate) override {
    HostStaging st = staging();
    double sum = sumOfSquares(threads_, st.in(dt, grad, n), n);
    *out = static_cast<float>((accumulate ? *out : 0.0) + sum);
  }
  void maxAbs(DType dt, const void *grad, int64_t n, float *out,
              bool accumulate) override {
    HostStaging st = staging();
    float m = cpu::maxAbs(threads_, st.in(dt, grad, n), n);
    *out = accumulate ? maxAbsStep(*out, m) : m;
  }
  void nonfiniteFlag(DType dt, const void *grad, int64_t n, float *out,
                     bool accumulate) override {
    HostStaging st = staging();
    const float *g = st.in(dt, grad, n);
    bool found = std::any_of(g, g + n, [](float x) { return !std::isfinite(x); });
    *out = found ? 1.0f : (accumulate ? *out : 0.0f);
  }
  void clipGrad(DType dt, void *grad, int64_t n, const float *totalSq,
                double maxNorm) override {
    // torch.nn.utils.clip_grad_norm_: f32 tensor arithmetic on the norm.
    float totalNorm = std::sqrt(*totalSq);
    float coef = static_cast<float>(maxNorm) / (totalNorm + 1e-6f);
    if (coef >= 1.0f)
      return;
    cpu::scale(threads_, dt, grad, grad, n, coef);
  }
  void clipCoefficient(const float *total, float *norm, float *coef,
                       double maxNorm, double normType) override {
    *norm = gradNormOf(*total, normType);
    *coef = clipCoefficientOf(*norm, static_cast<float>(maxNorm));
  }

private:
  HostStaging staging() const { return HostStaging({threads_}); }

  /// update(tensor, its gradient in f32) for each tensor, unless a loss
  /// scaler's flag says skip.
  template <typename Update>
  void forEachUpdate(DType gradType, const UpdateTensors *tensors,
                     int64_t count, const float *skip, Update update) {
    if (skip && *skip != 0)
      return;
    for (int64_t k = 0; k < count; ++k) {
      HostStaging st = staging();
      update(tensors[k], st.in(gradType, tensors[k].grad, tensors[k].n));
    }
  }

  int threads_;
};

void CpuBackend::fill(DType dt, void *dst, int64_t n, double value) {
  switch (dt) {
  case DType::I32:
    std::fill_n(static_cast<int32_t *>(dst), n, static_cast<int32_t>(value));
    return;
  case DType::I64:
    std::fill_n(static_cast<int64_t *>(dst), n, static_cast<int64_t>(value));
    return;
  default: {
    float v = static_cast<float>(value);
    std::vector<float> one(1, v);
    // Convert once, then replicate the bit pattern.
    char pattern[4];
    convert(DType::F32, one.data(), dt, pattern, 1, 1);
    int64_t size = dtypeSize(dt);
    char *out = static_cast<char *>(dst);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out + i * size, pattern, size);
  }
  }
}

} // namespace

std::unique_ptr<Backend> createCpuBackend(int numThreads) {
  return std::make_unique<CpuBackend>(numThreads);
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
