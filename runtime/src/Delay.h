//===- Delay.h - Delay injection hooks for schedule testing -----*- C++ -*-===//
//
// A schedule with a missing stream dependency can still give right answers
// when the racing work happens to finish first. Sleeping before selected
// operations makes such races lose reliably, so tests run with:
//   FSDPRT_DELAY_ALLGATHER_MS, FSDPRT_DELAY_REDUCE_SCATTER_MS,
//   FSDPRT_DELAY_FREE_MS, FSDPRT_DELAY_OPTIMIZER_MS, FSDPRT_DELAY_OFFLOAD_MS
//   (CPU offload's copies between host buffers and the device)
// (non-negative integers, milliseconds). The sleep happens on the stream that
// executes the operation, right before it runs.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_DELAY_H
#define FSDP_RT_DELAY_H

#include <cstdint>

namespace fsdp {
namespace rt {

enum class DelayPoint { AllGather, ReduceScatter, Free, Optimizer, Offload };

struct DelayConfig {
  int64_t allGatherMs = 0;
  int64_t reduceScatterMs = 0;
  int64_t freeMs = 0;
  int64_t optimizerMs = 0;
  int64_t offloadMs = 0;

  /// Reads the environment; throws Error(InvalidArgument) on a malformed
  /// value (a typo must not silently disable the injection).
  static DelayConfig fromEnvironment();
  int64_t delayMs(DelayPoint point) const;
  /// Sleeps for the configured delay of `point` (no-op when 0).
  void apply(DelayPoint point) const;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_DELAY_H
