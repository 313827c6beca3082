//===- LrSchedule.cpp - The learning rate of each step --------------------===//
#include "driver/LrSchedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace fsdp {
namespace driver {

double LrSchedule::factor(int64_t step, int64_t totalSteps) const {
  if (step < warmupSteps)
    return double(step + 1) / double(warmupSteps + 1);
  if (kind == "constant")
    return 1.0;
  int64_t decay = decaySteps > 0 ? decaySteps
                                 : std::max<int64_t>(totalSteps - warmupSteps, 1);
  double progress = std::min(1.0, double(step - warmupSteps) / double(decay));
  double c = kind == "cosine" ? 0.5 * (1.0 + std::cos(M_PI * progress))
                              : 1.0 - progress;
  return minLrRatio + (1.0 - minLrRatio) * c;
}

void LrSchedule::validate() const {
  if (kind != "constant" && kind != "cosine" && kind != "linear")
    throw std::invalid_argument("lr schedule '" + kind +
                                "' is not constant, cosine or linear");
  if (warmupSteps < 0)
    throw std::invalid_argument("warmup steps must be >= 0, got " +
                                std::to_string(warmupSteps));
  if (decaySteps < 0)
    throw std::invalid_argument("decay steps must be >= 0, got " +
                                std::to_string(decaySteps));
  if (!(minLrRatio >= 0.0 && minLrRatio <= 1.0))
    throw std::invalid_argument("min lr ratio must be in [0, 1], got " +
                                std::to_string(minLrRatio));
}

} // namespace driver
} // namespace fsdp
