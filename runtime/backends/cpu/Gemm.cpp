//===- Gemm.cpp - OpenBLAS GEMM wrapper -----------------------------------===//
//
// Every GEMM of the CPU backend goes through cblas_sgemm. OpenBLAS's own
// threading is not bitwise reproducible across thread counts (its kernel
// choice and blocking depend on how it partitions the problem; the
// determinism test catches this), so OpenBLAS runs single-threaded and the
// parallelism is ours: C is cut into fixed blocks of rows (or of columns
// when C is wide), chosen from the shape alone, and each block is an
// independent single-threaded sgemm. Every output element is therefore
// computed by the same call with the same operands whatever the thread count.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include <algorithm>
#include <cblas.h>

namespace fsdp {
namespace rt {
namespace cpu {

/// Number of blocks along `extent`: about one per 256 rows (large enough to
/// amortise OpenBLAS's packing), rounded up to a multiple of 4 so that 2 or
/// 4 threads get equal shares, and never blocks thinner than 16.
static int64_t blockCount(int64_t extent) {
  int64_t blocks = (extent + 255) / 256;
  if (blocks > 1)
    blocks = (blocks + 3) / 4 * 4;
  return std::max<int64_t>(1, std::min(blocks, extent / 16));
}

static void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, int64_t lda, const float *b,
                  int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(std::max<int64_t>(lda, 1)), b,
              static_cast<blasint>(std::max<int64_t>(ldb, 1)), beta, c,
              static_cast<blasint>(std::max<int64_t>(ldc, 1)));
}

void gemm(int threads, bool transA, bool transB, int64_t m, int64_t n,
          int64_t k, float alpha, const float *a, int64_t lda, const float *b,
          int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  bool byRows = m >= n;
  int64_t extent = byRows ? m : n;
  // Equal blocks, a function of the shape only.
  int64_t blocks = blockCount(extent);
  int64_t block = (extent + blocks - 1) / blocks;
  parallelFor(threads, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      int64_t start = blk * block, len = std::min(block, extent - start);
      if (len <= 0)
        continue;
      if (byRows) // rows [start, start+len) of op(A) and C
        sgemm(transA, transB, len, n, k, alpha,
              a + (transA ? start : start * lda), lda, b, ldb, beta,
              c + start * ldc, ldc);
      else // columns [start, start+len) of op(B) and C
        sgemm(transA, transB, m, len, k, alpha, a, lda,
              b + (transB ? start * ldb : start), ldb, beta, c + start, ldc);
    }
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
