//===- Staging.h - f32 views of 16-bit storage ------------------*- C++ -*-===//
//
// CPU kernels compute in f32. For f32 storage these views are the buffer
// itself; for bf16/f16 they convert into a scratch f32 array (and back, on
// commit), which keeps each kernel a single f32 implementation.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CPU_STAGING_H
#define FSDP_RT_CPU_STAGING_H

#include "fsdp/rt/DType.h"

#include <cstdint>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// convertOnHost (fsdp/rt/HostConvert.h) split over `threads`.
void convert(DType srcType, const void *src, DType dstType, void *dst,
             int64_t n, int threads);

/// Read-only f32 view; a null pointer stays null (absent optional operand).
class In {
public:
  In(DType dt, const void *ptr, int64_t n, int threads = 1);
  ~In();
  In(const In &) = delete;
  In &operator=(const In &) = delete;
  const float *get() const { return data_; }

private:
  const float *data_;
  std::vector<float> scratch_;
};

/// Writable f32 view; call commit() once the kernel has written it.
class Out {
public:
  /// `load` copies the current contents in (for in-place updates).
  Out(DType dt, void *ptr, int64_t n, bool load = false, int threads = 1);
  ~Out();
  Out(const Out &) = delete;
  Out &operator=(const Out &) = delete;
  float *get() { return data_; }
  void commit();

private:
  DType dt_;
  void *ptr_;
  int64_t n_;
  int threads_;
  float *data_;
  std::vector<float> scratch_;
};

} // namespace cpu
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CPU_STAGING_H
