//===- Embedding.cpp - embedding gather and deterministic scatter-add -----===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/Error.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// Ids come from data, so they are checked before anything is written.
static std::vector<int64_t> checkedIds(DType idsType, const void *ids,
                                       int64_t numIds, int64_t vocab) {
  std::vector<int64_t> out(numIds);
  for (int64_t i = 0; i < numIds; ++i) {
    out[i] = loadIndex(idsType, ids, i);
    if (out[i] < 0 || out[i] >= vocab)
      fail(Status::OutOfRange, "token id ", out[i], " at position ", i,
           " is outside the vocabulary [0, ", vocab, ")");
  }
  return out;
}

void embeddingForward(int threads, DType idsType, const void *ids,
                      const void *table, void *out, int64_t elemSize,
                      int64_t numIds, int64_t vocab, int64_t dim) {
  std::vector<int64_t> rows = checkedIds(idsType, ids, numIds, vocab);
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
  std::vector<int64_t> rows = checkedIds(idsType, ids, numIds, vocab);
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
