//===- CpuBackend.cpp - The CPU backend -----------------------------------===//
//
// Adapts the kernels of Kernels.h to the Backend interface. Pointwise kernels
// take the storage type directly (Storage.h); for the others, 16-bit inputs
// are widened to f32 (In) and outputs narrowed back with round-to-nearest-even
// (Out::commit).
//
//===----------------------------------------------------------------------===//
#include "CpuBackend.h"
#include "Kernels.h"
#include "Parallel.h"
#include "Staging.h"

#include "fsdp/rt/Error.h"

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
    void *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
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
    In fx(dt, x, m * k, threads_), fw(dt, w, n * k, threads_),
        fb(dt, b, n, threads_);
    Out fy(dt, y, m * n, false, threads_);
    cpu::linearForward(threads_, fx.get(), fw.get(), fb.get(), fy.get(), m, k,
                       n);
    fy.commit();
  }
  void linearBackward(DType dt, const void *x, const void *w, const void *dy,
                      void *dx, void *dw, void *db, int64_t m, int64_t k,
                      int64_t n) override {
    In fx(dt, dw ? x : nullptr, m * k, threads_),
        fw(dt, dx ? w : nullptr, n * k, threads_), fdy(dt, dy, m * n, threads_);
    Out fdx(dt, dx, m * k, false, threads_),
        fdw(dt, dw, n * k, false, threads_), fdb(dt, db, n, false, threads_);
    cpu::linearBackward(threads_, fx.get(), fw.get(), fdy.get(), fdx.get(),
                        fdw.get(), fdb.get(), m, k, n);
    fdx.commit();
    fdw.commit();
    fdb.commit();
  }
  void matmulForward(DType dt, const void *a, const void *b, void *c,
                     const MatmulDims &d) override {
    In fa(dt, a, d.batch * d.m * d.k, threads_),
        fb(dt, b, (d.bBatched ? d.batch : 1) * d.k * d.n, threads_);
    Out fc(dt, c, d.batch * d.m * d.n, false, threads_);
    cpu::matmulForward(threads_, fa.get(), fb.get(), fc.get(), d);
    fc.commit();
  }
  void matmulBackward(DType dt, const void *a, const void *b, const void *dc,
                      void *da, void *db, const MatmulDims &d) override {
    int64_t bNumel = (d.bBatched ? d.batch : 1) * d.k * d.n;
    In fa(dt, a, d.batch * d.m * d.k, threads_), fb(dt, b, bNumel, threads_),
        fdc(dt, dc, d.batch * d.m * d.n, threads_);
    Out fda(dt, da, d.batch * d.m * d.k, false, threads_),
        fdb(dt, db, bNumel, false, threads_);
    cpu::matmulBackward(threads_, fa.get(), fb.get(), fdc.get(), fda.get(),
                        fdb.get(), d);
    fda.commit();
    fdb.commit();
  }

  void binaryForward(DType dt, BinaryOp op, const void *a, const Shape &as,
                     const void *b, const Shape &bs, void *out) override {
    cpu::binaryForward(threads_, dt, op, a, as, b, bs, out);
  }
  void binaryBackward(DType dt, BinaryOp op, const void *a, const Shape &as,
                      const void *b, const Shape &bs, const void *dout,
                      void *da, void *db) override {
    bool needValues = op == BinaryOp::Mul || op == BinaryOp::Div;
    In fa(dt, needValues ? a : nullptr, numelOf(as), threads_),
        fb(dt, needValues ? b : nullptr, numelOf(bs), threads_),
        fd(dt, dout, numelOf(broadcastShapes(as, bs)), threads_);
    Out fda(dt, da, numelOf(as), false, threads_),
        fdb(dt, db, numelOf(bs), false, threads_);
    cpu::binaryBackward(threads_, op, fa.get(), as, fb.get(), bs, fd.get(),
                        fda.get(), fdb.get());
    fda.commit();
    fdb.commit();
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
    In fx(dt, x, rows * d, threads_), fw(dt, w, d), fb(dt, b, d);
    Out fy(dt, y, rows * d, false, threads_);
    cpu::layerNormForward(threads_, fx.get(), fw.get(), fb.get(), fy.get(),
                          rows, d, static_cast<float>(eps));
    fy.commit();
  }
  void layerNormBackward(DType dt, const void *x, const void *w, const void *dy,
                         void *dx, void *dw, void *db, int64_t rows, int64_t d,
                         double eps) override {
    In fx(dt, x, rows * d, threads_), fw(dt, w, d),
        fdy(dt, dy, rows * d, threads_);
    Out fdx(dt, dx, rows * d, false, threads_), fdw(dt, dw, d), fdb(dt, db, d);
    cpu::layerNormBackward(threads_, fx.get(), fw.get(), fdy.get(), fdx.get(),
                           fdw.get(), fdb.get(), rows, d,
                           static_cast<float>(eps));
    fdx.commit();
    fdw.commit();
    fdb.commit();
  }
  void rmsNormForward(DType dt, const void *x, const void *w, void *y,
                      int64_t rows, int64_t d, double eps) override {
    In fx(dt, x, rows * d, threads_), fw(dt, w, d);
    Out fy(dt, y, rows * d, false, threads_);
    cpu::rmsNormForward(threads_, fx.get(), fw.get(), fy.get(), rows, d,
                        static_cast<float>(eps));
    fy.commit();
  }
  void rmsNormBackward(DType dt, const void *x, const void *w, const void *dy,
                       void *dx, void *dw, int64_t rows, int64_t d,
                       double eps) override {
    In fx(dt, x, rows * d, threads_), fw(dt, w, d),
        fdy(dt, dy, rows * d, threads_);
    Out fdx(dt, dx, rows * d, false, threads_), fdw(dt, dw, d);
    cpu::rmsNormBackward(threads_, fx.get(), fw.get(), fdy.get(), fdx.get(),
                         fdw.get(), rows, d, static_cast<float>(eps));
    fdx.commit();
    fdw.commit();
  }
  void softmaxForward(DType dt, const void *x, void *y, int64_t outer,
                      int64_t dim, int64_t inner) override {
    int64_t n = outer * dim * inner;
    In fx(dt, x, n, threads_);
    Out fy(dt, y, n, false, threads_);
    cpu::softmaxForward(threads_, fx.get(), fy.get(), outer, dim, inner);
    fy.commit();
  }
  void softmaxBackward(DType dt, const void *y, const void *dy, void *dx,
                       int64_t outer, int64_t dim, int64_t inner) override {
    int64_t n = outer * dim * inner;
    In fy(dt, y, n, threads_), fdy(dt, dy, n, threads_);
    Out fdx(dt, dx, n, false, threads_);
    cpu::softmaxBackward(threads_, fy.get(), fdy.get(), fdx.get(), outer, dim,
                         inner);
    fdx.commit();
  }

  void embeddingForward(DType dt, DType idsType, const void *ids,
                        const void *table, void *out, int64_t numIds,
                        int64_t vocab, int64_t dim) override {
    cpu::embeddingForward(threads_, idsType, ids, table, out, dtypeSize(dt),
                          numIds, vocab, dim);
  }
  void embeddingBackward(DType dt, DType idsType, const void *ids,
                         const void *dy, void *dtable, int64_t numIds,
                         int64_t vocab, int64_t dim) override {
    In fdy(dt, dy, numIds * dim, threads_);
    Out fdt(dt, dtable, vocab * dim, false, threads_);
    cpu::embeddingBackward(threads_, idsType, ids, fdy.get(), fdt.get(), numIds,
                           vocab, dim);
    fdt.commit();
  }
  void attentionForward(DType dt, const void *q, const void *k, const void *v,
                        const void *bias, void *out,
                        const AttentionDims &d) override {
    int64_t qn = d.batch * d.tq * d.heads * d.headDim;
    int64_t kvn = d.batch * d.tk * d.kvHeads * d.headDim;
    In fq(dt, q, qn, threads_), fk(dt, k, kvn, threads_),
        fv(dt, v, kvn, threads_), fb(dt, bias, d.biasNumel(), threads_);
    Out fo(dt, out, qn, false, threads_);
    cpu::attentionForward(threads_, fq.get(), fk.get(), fv.get(), fb.get(),
                          fo.get(), d);
    fo.commit();
  }
  void attentionBackward(DType dt, const void *q, const void *k, const void *v,
                         const void *bias, const void *dout, void *dq,
                         void *dk, void *dv, void *dbias,
                         const AttentionDims &d) override {
    int64_t qn = d.batch * d.tq * d.heads * d.headDim;
    int64_t kvn = d.batch * d.tk * d.kvHeads * d.headDim;
    In fq(dt, q, qn, threads_), fk(dt, k, kvn, threads_),
        fv(dt, v, kvn, threads_), fdo(dt, dout, qn, threads_),
        fb(dt, bias, d.biasNumel(), threads_);
    Out fdq(dt, dq, qn, false, threads_), fdk(dt, dk, kvn, false, threads_),
        fdv(dt, dv, kvn, false, threads_),
        fdb(dt, dbias, d.biasNumel(), false, threads_);
    cpu::attentionBackward(threads_, fq.get(), fk.get(), fv.get(), fb.get(),
                           fdo.get(), fdq.get(), fdk.get(), fdv.get(),
                           fdb.get(), d);
    fdb.commit();
    fdq.commit();
    fdk.commit();
    fdv.commit();
  }
  void rope(DType dt, const void *x, void *y, int64_t batch, int64_t seq,
            int64_t heads, int64_t headDim, double theta,
            bool inverse) override {
    int64_t n = batch * seq * heads * headDim;
    In fx(dt, x, n, threads_);
    Out fy(dt, y, n, false, threads_);
    cpu::rope(threads_, fx.get(), fy.get(), batch, seq, heads, headDim, theta,
              inverse);
    fy.commit();
  }
  // `live` is only set inside step graphs, which this backend has not.
  void dropout(DType dt, const void *x, void *y, int64_t n, double p,
               const RngKey &key, const RngKey *) override {
    cpu::dropout(threads_, dt, x, y, n, static_cast<float>(p), key);
  }
  void rngFill(DType dt, void *dst, int64_t n, Distribution dist, double a,
               double b, const RngKey &key, const RngKey *) override {
    Out fd(dt, dst, n, false, threads_);
    cpu::rngFill(threads_, fd.get(), n, dist, static_cast<float>(a),
                 static_cast<float>(b), key);
    fd.commit();
  }
  void batchNormForward(DType dt, const void *x, const void *w, const void *b,
                        void *runningMean, void *runningVar, void *y, int64_t n,
                        int64_t c, int64_t spatial, double eps, double momentum,
                        bool training) override {
    int64_t numel = n * c * spatial;
    In fx(dt, x, numel, threads_), fw(dt, w, c), fb(dt, b, c);
    Out frm(dt, runningMean, c, true), frv(dt, runningVar, c, true),
        fy(dt, y, numel, false, threads_);
    cpu::batchNormForward(threads_, fx.get(), fw.get(), fb.get(), frm.get(),
                          frv.get(), fy.get(), n, c, spatial,
                          static_cast<float>(eps), static_cast<float>(momentum),
                          training);
    fy.commit();
    if (training) {
      frm.commit();
      frv.commit();
    }
  }
  void batchNormBackward(DType dt, const void *x, const void *w,
                         const void *runningMean, const void *runningVar,
                         const void *dy, void *dx, void *dw, void *db,
                         int64_t n, int64_t c, int64_t spatial, double eps,
                         bool training) override {
    int64_t numel = n * c * spatial;
    In fx(dt, x, numel, threads_), fw(dt, w, c), frm(dt, runningMean, c),
        frv(dt, runningVar, c), fdy(dt, dy, numel, threads_);
    Out fdx(dt, dx, numel, false, threads_), fdw(dt, dw, c), fdb(dt, db, c);
    cpu::batchNormBackward(threads_, fx.get(), fw.get(), frm.get(), frv.get(),
                           fdy.get(), fdx.get(), fdw.get(), fdb.get(), n, c,
                           spatial, static_cast<float>(eps), training);
    fdx.commit();
    fdw.commit();
    fdb.commit();
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
  void reduceForward(DType dt, ReduceKind kind, const void *x,
                     const Shape &xShape, const std::vector<int64_t> &dims,
                     void *y) override {
    int64_t out = 1;
    for (size_t i = 0; i < xShape.size(); ++i)
      if (std::find(dims.begin(), dims.end(), int64_t(i)) == dims.end())
        out *= xShape[i];
    In fx(dt, x, numelOf(xShape), threads_);
    Out fy(dt, y, out, false, threads_);
    cpu::reduceForward(threads_, kind, fx.get(), xShape, dims, fy.get());
    fy.commit();
  }
  void reduceBackward(DType dt, ReduceKind kind, const void *dy,
                      const Shape &xShape, const std::vector<int64_t> &dims,
                      void *dx) override {
    int64_t out = 1;
    for (size_t i = 0; i < xShape.size(); ++i)
      if (std::find(dims.begin(), dims.end(), int64_t(i)) == dims.end())
        out *= xShape[i];
    In fdy(dt, dy, out, threads_);
    Out fdx(dt, dx, numelOf(xShape), false, threads_);
    cpu::reduceBackward(threads_, kind, fdy.get(), xShape, dims, fdx.get());
    fdx.commit();
  }

  void crossEntropyForward(DType dt, DType targetType, const void *logits,
                           const void *targets, void *loss, int64_t n,
                           int64_t c, LossReduction reduction,
                           int64_t ignoreIndex) override {
    In fl(dt, logits, n * c, threads_);
    Out fo(dt, loss, 1);
    cpu::crossEntropyForward(threads_, targetType, fl.get(), targets, fo.get(),
                             n, c, reduction, ignoreIndex);
    fo.commit();
  }
  void crossEntropyBackward(DType dt, DType targetType, const void *logits,
                            const void *targets, const void *dloss,
                            void *dlogits, int64_t n, int64_t c,
                            LossReduction reduction,
                            int64_t ignoreIndex) override {
    In fl(dt, logits, n * c, threads_), fdl(dt, dloss, 1);
    Out fd(dt, dlogits, n * c, false, threads_);
    cpu::crossEntropyBackward(threads_, targetType, fl.get(), targets,
                              fdl.get()[0], fd.get(), n, c, reduction,
                              ignoreIndex);
    fd.commit();
  }
  void mseLossForward(DType dt, const void *a, const void *b, void *loss,
                      int64_t n, LossReduction reduction) override {
    In fa(dt, a, n, threads_), fb(dt, b, n, threads_);
    Out fo(dt, loss, 1);
    cpu::mseLossForward(threads_, fa.get(), fb.get(), fo.get(), n, reduction);
    fo.commit();
  }
  void mseLossBackward(DType dt, const void *a, const void *b,
                       const void *dloss, void *da, void *db, int64_t n,
                       LossReduction reduction) override {
    In fa(dt, a, n, threads_), fb(dt, b, n, threads_), fdl(dt, dloss, 1);
    Out fda(dt, da, n, false, threads_), fdb(dt, db, n, false, threads_);
    cpu::mseLossBackward(threads_, fa.get(), fb.get(), fdl.get()[0], fda.get(),
                         fdb.get(), n, reduction);
    fda.commit();
    fdb.commit();
  }

  void sgdStep(DType gradType, float *param, const void *grad,
               float *momentumBuf, int64_t n, const SgdScalars &s,
               const SgdScalars *, const float *skip) override {
    if (skip && *skip != 0)
      return;
    In fg(gradType, grad, n, threads_);
    cpu::sgdStep(threads_, param, fg.get(), momentumBuf, n, s);
  }
  void adamwStep(DType gradType, float *param, const void *grad, float *expAvg,
                 float *expAvgSq, int64_t n, const AdamWScalars &s,
                 const AdamWScalars *, const float *skip) override {
    if (skip && *skip != 0)
      return;
    In fg(gradType, grad, n, threads_);
    cpu::adamwStep(threads_, param, fg.get(), expAvg, expAvgSq, n, s);
  }
  void gradSqNorm(DType dt, const void *grad, int64_t n, float *out,
                  bool accumulate) override {
    In fg(dt, grad, n, threads_);
    double sum = sumOfSquares(threads_, fg.get(), n);
    *out = static_cast<float>((accumulate ? *out : 0.0) + sum);
  }
  void nonfiniteFlag(DType dt, const void *grad, int64_t n, float *out,
                     bool accumulate) override {
    In fg(dt, grad, n, threads_);
    const float *g = fg.get();
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
  void clipCoefficient(const float *totalSq, float *norm, float *coef,
                       double maxNorm) override {
    *norm = std::sqrt(*totalSq);
    *coef = std::min(1.0f, static_cast<float>(maxNorm) / (*norm + 1e-6f));
  }

private:
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
