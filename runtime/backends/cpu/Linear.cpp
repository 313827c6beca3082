//===- Linear.cpp - linear and batched matmul, forward and backward -------===//
#include "Kernels.h"
#include "Parallel.h"

#include <algorithm>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

void linearForward(int threads, const float *x, const float *w, const float *b,
                   float *y, int64_t m, int64_t k, int64_t n) {
  // Seed y with the bias so that the GEMM adds into it (beta = 1): one pass
  // over y instead of two.
  parallelFor(threads, m, 256, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float *row = y + r * n;
      if (b)
        std::copy(b, b + n, row);
      else
        std::fill(row, row + n, 0.0f);
    }
  });
  gemm(threads, false, true, m, n, k, 1.0f, x, k, w, k, 1.0f, y, n);
}

void linearBackward(int threads, const float *x, const float *w,
                    const float *dy, float *dx, float *dw, float *db, int64_t m,
                    int64_t k, int64_t n) {
  if (dx) // dx[m,k] = dy[m,n] * w[n,k]
    gemm(threads, false, false, m, k, n, 1.0f, dy, n, w, k, 0.0f, dx, k);
  if (dw) // dw[n,k] = dy^T * x
    gemm(threads, true, false, n, k, m, 1.0f, dy, n, x, k, 0.0f, dw, k);
  if (db) {
    // Column sums; threads own column ranges and walk rows in order, so
    // each db[j] is summed in row order.
    parallelFor(threads, n, 64, [&](int64_t c0, int64_t c1) {
      std::vector<double> acc(c1 - c0, 0.0);
      for (int64_t r = 0; r < m; ++r) {
        const float *row = dy + r * n;
        for (int64_t j = c0; j < c1; ++j)
          acc[j - c0] += row[j];
      }
      for (int64_t j = c0; j < c1; ++j)
        db[j] = static_cast<float>(acc[j - c0]);
    });
  }
}

namespace {
/// Leading dimensions of the operands as stored.
struct MatmulLayout {
  int64_t lda, ldb, aStride, bStride;
  explicit MatmulLayout(const MatmulDims &d)
      : lda(d.transA ? d.m : d.k), ldb(d.transB ? d.k : d.n),
        aStride(d.m * d.k), bStride(d.bBatched ? d.k * d.n : 0) {}
};
} // namespace

void matmulForward(int threads, const float *a, const float *b, float *c,
                   const MatmulDims &d) {
  MatmulLayout l(d);
  for (int64_t i = 0; i < d.batch; ++i)
    gemm(threads, d.transA, d.transB, d.m, d.n, d.k, 1.0f, a + i * l.aStride,
         l.lda, b + i * l.bStride, l.ldb, 0.0f, c + i * d.m * d.n, d.n);
}

void matmulBackward(int threads, const float *a, const float *b,
                    const float *dc, float *da, float *db,
                    const MatmulDims &d) {
  MatmulLayout l(d);
  for (int64_t i = 0; i < d.batch; ++i) {
    const float *ai = a + i * l.aStride, *bi = b + i * l.bStride;
    const float *dci = dc + i * d.m * d.n;
    if (da) {
      float *dai = da + i * l.aStride;
      if (!d.transA) // da[m,k] = dc * op(b)^T
        gemm(threads, false, !d.transB, d.m, d.k, d.n, 1.0f, dci, d.n, bi,
             l.ldb, 0.0f, dai, d.k);
      else // da[k,m] = op(b) * dc^T
        gemm(threads, d.transB, true, d.k, d.m, d.n, 1.0f, bi, l.ldb, dci, d.n,
             0.0f, dai, d.m);
    }
    if (db) {
      // An unbatched b accumulates over the batch in batch order.
      float *dbi = db + i * l.bStride;
      float beta = (!d.bBatched && i > 0) ? 1.0f : 0.0f;
      if (!d.transB) // db[k,n] = op(a)^T * dc
        gemm(threads, !d.transA, false, d.k, d.n, d.m, 1.0f, ai, l.lda, dci,
             d.n, beta, dbi, d.n);
      else // db[n,k] = dc^T * op(a)
        gemm(threads, true, d.transA, d.n, d.k, d.m, 1.0f, dci, d.n, ai, l.lda,
             beta, dbi, d.k);
    }
  }
  if (db && d.batch == 0)
    std::fill(db, db + (d.bBatched ? 0 : d.k * d.n), 0.0f);
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
