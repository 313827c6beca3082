//===- HostStaging.cpp - The CPU's f32 staging memory ---------------------===//
#include "HostStaging.h"
#include "Parallel.h"

#include "fsdp/rt/backend/HostConvert.h"

#include <algorithm>
#include <cstring>

namespace fsdp {
namespace rt {
namespace cpu {

namespace {

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

HostStagingMemory::Buffer::Buffer(int64_t n) : data_(acquire(n)) {}

HostStagingMemory::Buffer::~Buffer() { release(data_); }

} // namespace cpu
} // namespace rt
} // namespace fsdp
