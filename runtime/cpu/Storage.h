//===- Storage.h - Pointwise loops directly on storage types ----*- C++ -*-===//
//
// Memory-bound pointwise kernels read and write bf16/f16 storage directly,
// widening each element to f32 and rounding each result once, which gives
// the same bits as staging whole tensors through f32 (Staging.h) at a third
// of the memory traffic.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CPU_STORAGE_H
#define FSDP_RT_CPU_STORAGE_H

#include "Parallel.h"

#include "fsdp/rt/DType.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/math/Half.h"

#include <cstdint>

namespace fsdp {
namespace rt {
namespace cpu {

struct F32Storage {
  using T = float;
  static float load(T v) { return v; }
  static T store(float f) { return f; }
};
struct Bf16Storage {
  using T = uint16_t;
  static float load(T v) { return bf16ToFloat(v); }
  static T store(float f) { return floatToBf16(f); }
};
struct F16Storage {
  using T = uint16_t;
  static float load(T v) { return f16ToFloat(v); }
  static T store(float f) { return floatToF16(f); }
};

/// Calls f(StorageTraits{}) for a floating-point dtype.
template <typename F> void withStorage(DType dt, F &&f) {
  switch (dt) {
  case DType::F32:
    return f(F32Storage{});
  case DType::BF16:
    return f(Bf16Storage{});
  case DType::F16:
    return f(F16Storage{});
  default:
    fail(Status::InvalidArgument, "dtype ", dtypeName(dt),
         " is not a floating-point storage type");
  }
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
