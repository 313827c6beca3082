//===- ScratchLog.cpp - Per-call device scratch, reported by op ----------===//
//
// FSDPRT_CUDA_SCRATCH_LOG=1 prints each distinct (operation, size) of the
// per-call scratch (Device.h's Scratch: staging, cuDNN workspaces, padded
// GEMM operands, partial sums) once to stderr. That memory comes from the
// device pool outside the compiler's plan, so the pre-launch report does
// not count it: the log says which op needs how much.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "fsdp/rt/backend/CurrentOperation.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace fsdp {
namespace rt {
namespace cuda {

void noteScratch(int64_t bytes) {
  static const bool enabled = envFlag("FSDPRT_CUDA_SCRATCH_LOG");
  if (!enabled)
    return;
  static std::mutex mutex;
  static std::set<std::pair<std::string, int64_t>> seen;
  const std::string &op = currentOperation();
  std::lock_guard<std::mutex> lock(mutex);
  if (seen.emplace(op, bytes).second)
    std::fprintf(stderr,
                 "fsdprt cuda: op '%s' takes %lld bytes of scratch outside "
                 "the memory plan\n",
                 op.empty() ? "(none)" : op.c_str(),
                 static_cast<long long>(bytes));
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
