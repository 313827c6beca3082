//===- Parallel.h - Deterministic fork-join helpers -------------*- C++ -*-===//
//
// Kernels split work only across independent outputs, and every reduction
// runs in an order fixed by the data size alone (never by the thread count),
// so results are bitwise identical for any number of threads. Threads are
// plain std::threads forked per call: kernels here are large enough that the
// ~20us fork cost is noise, and there is no pool state to share between the
// stream threads that call kernels concurrently.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CPU_PARALLEL_H
#define FSDP_RT_CPU_PARALLEL_H

#include <cstdint>
#include <functional>

namespace fsdp {
namespace rt {
namespace cpu {

/// Runs fn(begin, end) over a partition of [0, n) into at most `threads`
/// contiguous chunks of at least `grain` items. Rethrows the first failure.
void parallelFor(int threads, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn);

/// Sum of fn(begin, end) over fixed blocks of [0, n), added in block order.
/// The block size does not depend on `threads`, hence neither does the sum.
double blockedSum(int threads, int64_t n,
                  const std::function<double(int64_t, int64_t)> &fn);

} // namespace cpu
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CPU_PARALLEL_H
