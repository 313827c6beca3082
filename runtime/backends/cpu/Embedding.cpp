//===- Embedding.cpp - embedding gather and deterministic scatter-add -----===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/Error.h"
#include "fsdp/rt/backend/IndexCheck.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// Ids come from data, so they are checked before anything is written.
static std::vector<int64_t> checkedIds(const char *op, DType idsType,
                                       const void *ids, int64_t numIds,
                                       int64_t vocab) {
  std::vector<int64_t> out(numIds);
  for (int64_t i = 0; i < numIds; ++i) {
    out[i] = loadIndex(idsType, ids, i);
    if (out[i] < 0 || out[i] >= vocab)
      failOnIndex(op, IndexKind::TokenId, {vocab}, out[i], i);
  }
  return out;
}

void checkIndices(DType idsType, const void *ids, int64_t n,
                  const IndexRange &range, const char *op) {
  for (int64_t i = 0; i < n; ++i)
    if (int64_t v = loadIndex(idsType, ids, i); !range.allows(v))
      failOnIndex(op, IndexKind::Index, range, v, i);
}

void embeddingForward(int threads, DType idsType, const void *ids,
                      const void *table, void *out, int64_t elemSize,
                      int64_t numIds, int64_t vocab, int64_t dim) {
  std::vector<int64_t> rows =
      checkedIds("embedding_forward", idsType, ids, numIds, vocab);
  int64_t rowBytes = dim * elemSize;
  parallelFor(threads, numIds, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(static_cast<char *>(out) + i * rowBytes,
                  static_cast<const char *>(table) + rows[i] * rowBytes,
                  rowBytes);
  });
}

void embeddingBackward(int threads, DType idsType, const void *ids,
                       const float *dy, float *dtable, int64_t numIds,
                       int64_t vocab, int64_t dim) {
  std::vector<int64_t> rows =
      checkedIds("embedding_backward", idsType, ids, numIds, vocab);
  // Threads own column ranges of the table and add positions in order, so a
  // repeated id accumulates in position order: no atomics, and the same bits
  // for any thread count.
  parallelFor(threads, dim, 16, [&](int64_t c0, int64_t c1) {
    for (int64_t v = 0; v < vocab; ++v)
      std::fill(dtable + v * dim + c0, dtable + v * dim + c1, 0.0f);
    for (int64_t i = 0; i < numIds; ++i) {
      float *dst = dtable + rows[i] * dim;
      const float *src = dy + i * dim;
      for (int64_t j = c0; j < c1; ++j)
        dst[j] += src[j];
    }
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
