//===- Staging.cpp - f32 views of 16-bit storage --------------------------===//
#include "Staging.h"
#include "Parallel.h"

#include "fsdp/rt/HostConvert.h"

#include <algorithm>
#include <cstring>

namespace fsdp {
namespace rt {
namespace cpu {

namespace {

/// Per-thread recycled scratch arrays: large fresh allocations cost a page
/// fault per 4 KiB, which dominated 16-bit kernels before reuse.
thread_local std::vector<std::vector<float>> scratchPool;

std::vector<float> acquire(int64_t n) {
  auto best = scratchPool.end();
  for (auto it = scratchPool.begin(); it != scratchPool.end(); ++it)
    if (best == scratchPool.end() || it->capacity() > best->capacity())
      best = it;
  std::vector<float> v;
  if (best != scratchPool.end()) {
    v = std::move(*best);
    scratchPool.erase(best);
  }
  v.resize(n);
  return v;
}

void release(std::vector<float> &v) {
  if (v.capacity() > 0 && scratchPool.size() < 8)
    scratchPool.push_back(std::move(v));
}

} // namespace

void convert(DType srcType, const void *src, DType dstType, void *dst,
             int64_t n, int threads) {
  if (threads <= 1 || srcType == dstType)
    return convertOnHost(srcType, src, dstType, dst, n);
  int64_t srcSize = dtypeSize(srcType), dstSize = dtypeSize(dstType);
  parallelFor(threads, n, 1 << 16, [&](int64_t b, int64_t e) {
    convertOnHost(srcType, static_cast<const char *>(src) + b * srcSize,
                  dstType, static_cast<char *>(dst) + b * dstSize, e - b);
  });
}

In::In(DType dt, const void *ptr, int64_t n, int threads) {
  if (!ptr || dt == DType::F32) {
    data_ = static_cast<const float *>(ptr);
    return;
  }
  scratch_ = acquire(n);
  convert(dt, ptr, DType::F32, scratch_.data(), n, threads);
  data_ = scratch_.data();
}

In::~In() { release(scratch_); }

Out::Out(DType dt, void *ptr, int64_t n, bool load, int threads)
    : dt_(dt), ptr_(ptr), n_(n), threads_(threads) {
  if (!ptr || dt == DType::F32) {
    data_ = static_cast<float *>(ptr);
    return;
  }
  scratch_ = acquire(n);
  if (load)
    convert(dt, ptr, DType::F32, scratch_.data(), n, threads);
  data_ = scratch_.data();
}

Out::~Out() { release(scratch_); }

void Out::commit() {
  if (ptr_ && dt_ != DType::F32)
    convert(DType::F32, scratch_.data(), dt_, ptr_, n_, threads_);
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
