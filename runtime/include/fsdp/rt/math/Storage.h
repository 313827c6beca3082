//===- Storage.h - Storage traits of the floating-point dtypes --*- C++ -*-===//
//
// Kernels that read and write bf16/f16 storage directly widen each element
// to f32 and round each result once, through the shared Half.h conversions:
// the same bits as staging whole tensors through f32 at a third of the
// memory traffic. The traits are written once, FSDPRT_HD, for the CPU
// backend's loops and the CUDA backend's kernels alike.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_STORAGE_H
#define FSDP_RT_MATH_STORAGE_H

#include "fsdp/rt/DType.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/math/Half.h"
#include "fsdp/rt/math/Hd.h"

#include <cstdint>

namespace fsdp {
namespace rt {

/// load widens an element to f32; store rounds an f32 result once.
struct F32Storage {
  using T = float;
  FSDPRT_HD static float load(T v) { return v; }
  FSDPRT_HD static T store(float f) { return f; }
};
struct Bf16Storage {
  using T = uint16_t;
  FSDPRT_HD static float load(T v) { return bf16ToFloat(v); }
  FSDPRT_HD static T store(float f) { return floatToBf16(f); }
};
struct F16Storage {
  using T = uint16_t;
  FSDPRT_HD static float load(T v) { return f16ToFloat(v); }
  FSDPRT_HD static T store(float f) { return floatToF16(f); }
};

/// Calls f(StorageTraits{}) for a floating-point dtype; any other fails,
/// the message starting with `who` ("cuda backend: "). Each backend wraps
/// it as its own withStorage(dt, f), which keeps its message.
template <typename F> void withStorageTraits(const char *who, DType dt, F &&f) {
  switch (dt) {
  case DType::F32:
    return f(F32Storage{});
  case DType::BF16:
    return f(Bf16Storage{});
  case DType::F16:
    return f(F16Storage{});
  default:
    fail(Status::InvalidArgument, who, "dtype ", dtypeName(dt),
         " is not a floating-point storage type");
  }
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_STORAGE_H
