//===- BenchUtil.h - What the runtime benchmarks share ----------*- C++ -*-===//
#ifndef FSDP_RT_BENCH_BENCHUTIL_H
#define FSDP_RT_BENCH_BENCHUTIL_H

#include "fsdp/rt/fsdprt.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace fsdp {
namespace rt {
namespace bench {

/// Exits naming `what` and the runtime's error unless `status` is OK.
inline void check(int32_t status, const char *what) {
  if (status != FSDPRT_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, fsdprt_last_error());
    std::exit(1);
  }
}

/// Best of `reps` timings of `iters` calls of f, each batch ended by `sync`
/// (seconds per call), after one warm-up call.
inline double timeIt(const std::function<void()> &f,
                     const std::function<void()> &sync, int iters,
                     int reps = 5) {
  f();
  sync();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      f();
    sync();
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count() / iters);
  }
  return best;
}

} // namespace bench
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_BENCH_BENCHUTIL_H
