//===- Scan.h - Running sums along one dimension ----------------*- C++ -*-===//
//
// cumsum's body, shared by the CPU loops and the CUDA kernel: one line of a
// [outer, dim, inner] tensor (elements `inner` apart) summed in order, or
// from its end (the VJP). Floats accumulate in double and each prefix is
// rounded to f32, as torch's CPU kernel for f32 (its accumulator is
// double), then to a 16-bit storage type (torch accumulates those in f32,
// so a bf16 / f16 prefix may differ from its by the last bit); integers
// accumulate in int64, as torch's.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_SCAN_H
#define FSDP_RT_MATH_SCAN_H

#include "fsdp/rt/math/Storage.h"

#include <cstdint>

namespace fsdp {
namespace rt {

/// A float storage type S scanned in double.
template <typename S> struct FloatScan {
  using T = typename S::T;
  using Acc = double;
  FSDPRT_HD static Acc load(T v) { return S::load(v); }
  FSDPRT_HD static T store(Acc a) { return S::store(static_cast<float>(a)); }
};

/// An integer type scanned in int64.
template <typename I> struct IntegerScan {
  using T = I;
  using Acc = int64_t;
  FSDPRT_HD static Acc load(T v) { return v; }
  FSDPRT_HD static T store(Acc a) { return static_cast<T>(a); }
};

/// y's line at `x`/`y` (first element; the next is `inner` further) is the
/// running sum of x's, from the last element when `reverse`.
template <typename Sc>
FSDPRT_HD inline void cumsumLine(const typename Sc::T *x, typename Sc::T *y,
                                 int64_t dim, int64_t inner, bool reverse) {
  typename Sc::Acc acc = 0;
  for (int64_t k = 0; k < dim; ++k) {
    int64_t at = (reverse ? dim - 1 - k : k) * inner;
    acc += Sc::load(x[at]);
    y[at] = Sc::store(acc);
  }
}

/// Calls f(ScanTraits{}) for any dtype.
template <typename F> void withScanTraits(DType dt, F &&f) {
  switch (dt) {
  case DType::I32:
    return f(IntegerScan<int32_t>{});
  case DType::I64:
    return f(IntegerScan<int64_t>{});
  default:
    return withStorageTraits("cumsum: ", dt,
                             [&](auto s) { f(FloatScan<decltype(s)>{}); });
  }
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_SCAN_H
