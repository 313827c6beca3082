//===- Parallel.cpp - Deterministic fork-join helpers ---------------------===//
#include "Parallel.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

void parallelFor(int threads, int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn) {
  if (n <= 0)
    return;
  int64_t chunks =
      std::min<int64_t>(std::max(threads, 1),
                        std::max<int64_t>(1, n / std::max<int64_t>(grain, 1)));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  std::exception_ptr failure;
  std::mutex failureMutex;
  auto runChunk = [&](int64_t c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    try {
      fn(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failureMutex);
      if (!failure)
        failure = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int64_t c = 1; c < chunks; ++c)
    workers.emplace_back(runChunk, c);
  runChunk(0);
  for (std::thread &t : workers)
    t.join();
  if (failure)
    std::rethrow_exception(failure);
}

double blockedSum(int threads, int64_t n,
                  const std::function<double(int64_t, int64_t)> &fn) {
  constexpr int64_t kBlock = 16384;
  int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
  parallelFor(threads, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      partial[b] = fn(b * kBlock, std::min(n, (b + 1) * kBlock));
  });
  double total = 0.0;
  for (double p : partial)
    total += p;
  return total;
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
