//===- Staging.cpp - f32 views of 16-bit storage --------------------------===//
#include "Staging.h"
#include "Parallel.h"

#include "fsdp/rt/Error.h"
#include "fsdp/rt/math/Half.h"

#include <algorithm>
#include <cstring>

namespace fsdp {
namespace rt {
namespace cpu {

namespace {

template <typename Src, typename Dst, typename F>
void convertLoop(int threads, const void *src, void *dst, int64_t n, F f) {
  auto *s = static_cast<const Src *>(src);
  auto *d = static_cast<Dst *>(dst);
  parallelFor(threads, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      d[i] = f(s[i]);
  });
}

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
  if (srcType == dstType) {
    // An empty buffer may be null, which memmove does not accept even for 0
    // bytes.
    if (n > 0)
      std::memmove(dst, src, n * dtypeSize(srcType));
    return;
  }
  if (!isFloat(dstType))
    fail(Status::InvalidArgument, "cannot convert ", dtypeName(srcType),
         " to integer type ", dtypeName(dstType));
  if (dstType == DType::F32) {
    switch (srcType) {
    // Lambdas, not function pointers, so that the bodies inline and the
    // loops vectorise.
    case DType::BF16:
      return convertLoop<uint16_t, float>(
          threads, src, dst, n, [](uint16_t h) { return bf16ToFloat(h); });
    case DType::F16:
      return convertLoop<uint16_t, float>(
          threads, src, dst, n, [](uint16_t h) { return f16ToFloat(h); });
    case DType::I32:
      return convertLoop<int32_t, float>(threads, src, dst, n, [](int32_t v) {
        return static_cast<float>(v);
      });
    case DType::I64:
      return convertLoop<int64_t, float>(threads, src, dst, n, [](int64_t v) {
        return static_cast<float>(v);
      });
    case DType::F32:
      break;
    }
  }
  if (srcType == DType::F32 && dstType == DType::BF16)
    return convertLoop<float, uint16_t>(threads, src, dst, n,
                                        [](float f) { return floatToBf16(f); });
  if (srcType == DType::F32)
    return convertLoop<float, uint16_t>(threads, src, dst, n,
                                        [](float f) { return floatToF16(f); });
  // Any other pair goes through f32, which is exact for every 16-bit float
  // value and rounds integers exactly as a direct conversion would.
  std::vector<float> tmp = acquire(n);
  convert(srcType, src, DType::F32, tmp.data(), n, threads);
  convert(DType::F32, tmp.data(), dstType, dst, n, threads);
  release(tmp);
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
