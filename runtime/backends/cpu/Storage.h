//===- Storage.h - Pointwise loops directly on storage types ----*- C++ -*-===//
//
// Memory-bound pointwise kernels read and write bf16/f16 storage directly,
// widening each element to f32 and rounding each result once, which gives
// the same bits as staging whole tensors through f32 (HostStaging.h) at a third
// of the memory traffic. The storage traits are the CUDA backend's too
// (fsdp/rt/math/Storage.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CPU_STORAGE_H
#define FSDP_RT_CPU_STORAGE_H

#include "Parallel.h"

#include "fsdp/rt/math/Storage.h"

#include <cstdint>
#include <utility>

namespace fsdp {
namespace rt {
namespace cpu {

/// Calls f(StorageTraits{}) for a floating-point dtype.
template <typename F> void withStorage(DType dt, F &&f) {
  withStorageTraits("", dt, std::forward<F>(f));
}

constexpr int64_t kPointwiseGrain = 1 << 15;

/// y[i] = f(x[i]); y may alias x.
template <typename S, typename F>
void mapUnary(int threads, const void *x, void *y, int64_t n, F f) {
  auto *px = static_cast<const typename S::T *>(x);
  auto *py = static_cast<typename S::T *>(y);
  parallelFor(threads, n, kPointwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      py[i] = S::store(f(S::load(px[i])));
  });
}

/// out[i] = f(a[i], b[i]); out may alias a or b.
template <typename S, typename F>
void mapBinary(int threads, const void *a, const void *b, void *out, int64_t n,
               F f) {
  auto *pa = static_cast<const typename S::T *>(a);
  auto *pb = static_cast<const typename S::T *>(b);
  auto *po = static_cast<typename S::T *>(out);
  parallelFor(threads, n, kPointwiseGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i)
      po[i] = S::store(f(S::load(pa[i]), S::load(pb[i])));
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CPU_STORAGE_H
