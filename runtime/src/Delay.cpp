//===- Delay.cpp - Delay injection hooks ----------------------------------===//
#include "Delay.h"
#include "fsdp/rt/Error.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace fsdp {
namespace rt {

static int64_t readMs(const char *var) {
  const char *value = std::getenv(var);
  if (!value || !*value)
    return 0;
  char *end = nullptr;
  long long ms = std::strtoll(value, &end, 10);
  if (*end != '\0' || ms < 0 || ms > 3600 * 1000)
    fail(Status::InvalidArgument, var, "='", value,
         "' is not a delay in milliseconds (an integer in [0, 3600000])");
  return ms;
}

DelayConfig DelayConfig::fromEnvironment() {
  DelayConfig c;
  c.allGatherMs = readMs("FSDPRT_DELAY_ALLGATHER_MS");
  c.reduceScatterMs = readMs("FSDPRT_DELAY_REDUCE_SCATTER_MS");
  c.freeMs = readMs("FSDPRT_DELAY_FREE_MS");
  c.optimizerMs = readMs("FSDPRT_DELAY_OPTIMIZER_MS");
  c.offloadMs = readMs("FSDPRT_DELAY_OFFLOAD_MS");
  return c;
}

int64_t DelayConfig::delayMs(DelayPoint point) const {
  switch (point) {
  case DelayPoint::AllGather:
    return allGatherMs;
  case DelayPoint::ReduceScatter:
    return reduceScatterMs;
  case DelayPoint::Free:
    return freeMs;
  case DelayPoint::Optimizer:
    return optimizerMs;
  case DelayPoint::Offload:
    return offloadMs;
  }
  return 0;
}

void DelayConfig::apply(DelayPoint point) const {
  int64_t ms = delayMs(point);
  if (ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

} // namespace rt
} // namespace fsdp
