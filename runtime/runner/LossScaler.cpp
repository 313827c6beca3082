//===- LossScaler.cpp - GradScaler's dynamic loss scale -------------------===//
#include "LossScaler.h"

#include <cmath>
#include <stdexcept>
#include <string>

using namespace fsdp::driver;

void LossScalerConfig::validate() const {
  auto bad = [](const char *what, double v) {
    throw std::invalid_argument(std::string(what) + " " + std::to_string(v) +
                                " is out of range");
  };
  if (!std::isfinite(init) || init <= 0)
    bad("the initial loss scale", init);
  if (!(growthFactor > 1) || !std::isfinite(growthFactor))
    bad("the loss scale's growth factor (> 1)", growthFactor);
  if (!(backoffFactor > 0 && backoffFactor < 1))
    bad("the loss scale's backoff factor (in (0, 1))", backoffFactor);
  if (growthInterval < 1)
    bad("the loss scale's growth interval (>= 1)", double(growthInterval));
}

void LossScaler::update(bool foundInf) {
  if (foundInf) {
    scale_ *= config_.backoffFactor;
    growthTracker_ = 0;
    ++skipped_;
    return;
  }
  ++optimizerSteps_;
  if (++growthTracker_ == config_.growthInterval) {
    scale_ *= config_.growthFactor;
    growthTracker_ = 0;
  }
}

void LossScaler::restore(double scale, int64_t growthTracker, int64_t skipped,
                         int64_t optimizerSteps) {
  scale_ = scale;
  growthTracker_ = growthTracker;
  skipped_ = skipped;
  optimizerSteps_ = optimizerSteps;
}
