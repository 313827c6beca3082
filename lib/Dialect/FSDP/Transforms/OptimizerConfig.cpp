//===- OptimizerConfig.cpp - the step's optimizer, validated once ---------===//
//
// The checks of fsdp-build-train-step's options, with PyTorch's defaults
// and constraints (AdamW's weight decay 0.01, Nesterov needing momentum),
// each diagnostic naming the pass and the option.
//
//===----------------------------------------------------------------------===//

#include "OptimizerConfig.h"

using namespace mlir;
using namespace mlir::fsdp;

FailureOr<OptimizerConfig>
OptimizerConfig::parse(const FSDPBuildTrainStepPassOptions &options,
                       Location loc) {
  const std::string &optimizer = options.optimizer;
  double lr = options.lr, momentum = options.momentum,
         dampening = options.dampening, weightDecay = options.weightDecay,
         beta1 = options.beta1, beta2 = options.beta2, eps = options.eps;
  bool nesterov = options.nesterov;
  OptimizerConfig config;
  if (optimizer != "sgd" && optimizer != "adamw")
    return emitError(loc, "fsdp-build-train-step: unknown optimizer '")
           << optimizer << "'; expected sgd or adamw";
  config.adamw = optimizer == "adamw";
  config.lr = lr;
  config.momentum = momentum;
  config.dampening = dampening;
  config.nesterov = nesterov;
  config.weightDecay =
      weightDecay < 0.0 ? (config.adamw ? 1e-2 : 0.0) : weightDecay;
  config.beta1 = beta1;
  config.beta2 = beta2;
  config.eps = eps;
  if (options.mode != "train" && options.mode != "eval")
    return emitError(loc, "fsdp-build-train-step: mode must be "
                          "train or eval, got '")
           << options.mode << "'";
  if (options.lossScale != "none" && options.lossScale != "dynamic")
    return emitError(loc, "fsdp-build-train-step: loss-scale must be none or "
                          "dynamic, got '")
           << options.lossScale << "'";
  config.lossScaling = options.lossScale == "dynamic";
  if (lr < 0.0)
    return emitError(loc, "fsdp-build-train-step: lr must be >= 0, got ") << lr;
  if (weightDecay < 0.0 && weightDecay != -1.0)
    return emitError(loc,
                     "fsdp-build-train-step: weight-decay must be >= 0, got ")
           << weightDecay;
  if (!config.adamw && (beta1 != 0.9 || beta2 != 0.999 || eps != 1e-8))
    return emitError(loc, "fsdp-build-train-step: beta1, beta2 and eps "
                          "are AdamW options; the optimizer is sgd");
  if (config.adamw && (momentum != 0.0 || dampening != 0.0 || nesterov))
    return emitError(loc, "fsdp-build-train-step: momentum, dampening "
                          "and nesterov are SGD options; the optimizer "
                          "is adamw");
  if (nesterov && (momentum <= 0.0 || dampening != 0.0))
    return emitError(loc, "fsdp-build-train-step: nesterov needs a "
                          "momentum and zero dampening (as torch.optim.SGD)");
  if (options.gradAccumSteps < 1)
    return emitError(
               loc,
               "fsdp-build-train-step: grad-accum-steps must be >= 1, got ")
           << options.gradAccumSteps;
  FailureOr<ParamGroups> groups =
      ParamGroups::parse(options.paramGroups, options.noDecay1d, loc);
  if (failed(groups))
    return failure();
  config.groups = std::move(*groups);
  if (options.clipGradNorm < 0.0)
    return emitError(loc,
                     "fsdp-build-train-step: clip-grad-norm must be >= 0, got ")
           << options.clipGradNorm;
  return config;
}
