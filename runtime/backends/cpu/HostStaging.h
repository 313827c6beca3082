//===- HostStaging.h - The CPU's f32 staging memory -------------*- C++ -*-===//
//
// CPU kernels compute in f32; their bf16 / f16 operands go through
// Staging (fsdp/rt/backend/Staging.h) with recycled host arrays.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CPU_STAGING_H
#define FSDP_RT_CPU_STAGING_H

#include "fsdp/rt/DType.h"
#include "fsdp/rt/backend/Staging.h"

#include <cstdint>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// convertOnHost (fsdp/rt/backend/HostConvert.h) split over `threads`.
void convert(DType srcType, const void *src, DType dstType, void *dst,
             int64_t n, int threads);

/// Staging's memory on the CPU: per-thread recycled arrays (large fresh
/// allocations cost a page fault per 4 KiB, which dominated 16-bit kernels
/// before reuse); conversions split over `threads`.
struct HostStagingMemory {
  class Buffer {
  public:
    explicit Buffer(int64_t n);
    ~Buffer();
    Buffer(Buffer &&) = default;
    Buffer &operator=(Buffer &&) = default;
    float *data() { return data_.data(); }

  private:
    std::vector<float> data_;
  };

  Buffer allocate(int64_t n) { return Buffer(n); }
  void convert(DType srcType, const void *src, DType dstType, void *dst,
               int64_t n) {
    cpu::convert(srcType, src, dstType, dst, n, threads);
  }

  int threads;
};

using HostStaging = Staging<HostStagingMemory>;

} // namespace cpu
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CPU_STAGING_H
