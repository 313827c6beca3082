//===- Layout.cpp - transpose, split/concat slabs, strided slices ----------===//
//
// Pure data movement: these work on elements of any size without converting
// to f32, so bf16 tensors move half the bytes.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"
#include "Strided.h"

#include <array>
#include <cstring>

namespace fsdp {
namespace rt {
namespace cpu {

template <typename T>
static void transposeTyped(int threads, const T *x, T *y, const Shape &xShape,
                           const std::vector<int64_t> &perm) {
  std::vector<int64_t> xStrides = stridesOf(xShape);
  Shape yShape(perm.size());
  std::vector<int64_t> src(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    yShape[i] = xShape[perm[i]];
    src[i] = xStrides[perm[i]];
  }
  int64_t last = src.empty() ? 0 : src.back();
  parallelFor(threads, numelOf(yShape), 1 << 15, [&](int64_t b, int64_t e) {
    forEachRun<1>(yShape, {&src}, b, e,
                  [&](int64_t start, int64_t len, std::array<int64_t, 1> off) {
                    const T *from = x + off[0];
                    for (int64_t i = 0; i < len; ++i)
                      y[start + i] = from[i * last];
                  });
  });
}

void transpose(int threads, int64_t elemSize, const void *x, void *y,
               const Shape &xShape, const std::vector<int64_t> &perm) {
  switch (elemSize) {
  case 2:
    return transposeTyped(threads, static_cast<const uint16_t *>(x),
                          static_cast<uint16_t *>(y), xShape, perm);
  case 4:
    return transposeTyped(threads, static_cast<const uint32_t *>(x),
                          static_cast<uint32_t *>(y), xShape, perm);
  default:
    return transposeTyped(threads, static_cast<const uint64_t *>(x),
                          static_cast<uint64_t *>(y), xShape, perm);
  }
}

void copySlab(int threads, int64_t elemSize, const void *src, int64_t srcDim,
              int64_t srcOffset, void *dst, int64_t dstDim, int64_t dstOffset,
              int64_t outer, int64_t size, int64_t inner) {
  int64_t bytes = size * inner * elemSize;
  parallelFor(threads, outer,
              std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(bytes, 1)),
              [&](int64_t o0, int64_t o1) {
                for (int64_t o = o0; o < o1; ++o)
                  std::memcpy(static_cast<char *>(dst) +
                                  (o * dstDim + dstOffset) * inner * elemSize,
                              static_cast<const char *>(src) +
                                  (o * srcDim + srcOffset) * inner * elemSize,
                              bytes);
              });
}

/// One loop of `inner` typed elements per (outer, i) pair of the window:
/// GPT-J's interleaved halves have inner = 1, where a memcpy per element
/// ran at a seventh of the copy bandwidth.
template <typename T>
static void copyStridedTyped(int threads, const T *src, T *dst,
                             const StridedWindow &w, bool scatter) {
  int64_t bytes = w.inner * int64_t(sizeof(T));
  parallelFor(threads, w.outer * w.count,
              std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(bytes, 1)),
              [&](int64_t p0, int64_t p1) {
                // (o, i) of p, stepped along without a division each.
                int64_t o = p0 / w.count, i = p0 - o * w.count;
                for (int64_t p = p0; p < p1; ++p) {
                  int64_t whole = (o * w.dim + w.start + i * w.step) * w.inner,
                          part = p * w.inner;
                  const T *from = src + (scatter ? part : whole);
                  T *to = dst + (scatter ? whole : part);
                  for (int64_t j = 0; j < w.inner; ++j)
                    to[j] = from[j];
                  if (++i == w.count) {
                    i = 0;
                    ++o;
                  }
                }
              });
}

void copyStrided(int threads, int64_t elemSize, const void *src, void *dst,
                 const StridedWindow &w, bool scatter) {
  switch (elemSize) {
  case 2:
    return copyStridedTyped(threads, static_cast<const uint16_t *>(src),
                            static_cast<uint16_t *>(dst), w, scatter);
  case 4:
    return copyStridedTyped(threads, static_cast<const uint32_t *>(src),
                            static_cast<uint32_t *>(dst), w, scatter);
  default:
    return copyStridedTyped(threads, static_cast<const uint64_t *>(src),
                            static_cast<uint64_t *>(dst), w, scatter);
  }
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
