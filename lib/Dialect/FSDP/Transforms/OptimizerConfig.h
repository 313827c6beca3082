//===- OptimizerConfig.h - the step's optimizer, validated once -*- C++ -*-===//
//
// torch.optim.SGD, Adam, AdamW, Adafactor or Lion as fsdp-build-train-step's
// options give them, with parameter groups (ParamGroups.h) and GradScaler's
// dynamic loss scaling. The options are checked once, before any step is built,
// so that the builder (BuildTrainStep.cpp) reads only valid settings.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_OPTIMIZERCONFIG_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_OPTIMIZERCONFIG_H

#include "ParamGroups.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

namespace mlir::fsdp {

/// The optimizer configuration, validated once.
struct OptimizerConfig {
  enum class Kind { SGD, Adam, AdamW, Lion, Adafactor };
  Kind kind = Kind::SGD;
  double lr, momentum, dampening, weightDecay, beta1, beta2, eps;
  /// Adafactor's beta2_decay, eps (eps1, eps2) and d.
  double beta2Decay, eps1, eps2, clipThreshold;
  bool nesterov;
  ParamGroups groups;
  /// Dynamic loss scaling (torch.amp.GradScaler).
  bool lossScaling = false;
  /// clip_grad_norm_'s norm_type (> 0 or inf), when clipping.
  double clipNormType = 2.0;

  /// Checks every option of fsdp-build-train-step (the step's mode,
  /// micro-batches and clipping as well as the optimizer's, in that order of
  /// diagnostics) and returns the optimizer's part; an invalid option is
  /// reported at `loc` and fails.
  static FailureOr<OptimizerConfig>
  parse(const FSDPBuildTrainStepPassOptions &options, Location loc);

  /// The optimizer's own settings, which parameter groups override.
  GroupSettings defaults() const {
    GroupSettings s;
    s.weightDecay = weightDecay;
    s.beta1 = beta1, s.beta2 = beta2, s.eps = eps;
    s.momentum = momentum, s.dampening = dampening;
    return s;
  }

  /// The type of a parameter's state tensors: the parameter's, or for
  /// Adafactor its factored second moment's (FSDPAdafactorOps.td).
  RankedTensorType stateType(RankedTensorType param) const;

  /// Per trainable parameter: the names of its state tensors.
  SmallVector<StringRef> stateNames() const {
    if (kind == Kind::Adam || kind == Kind::AdamW)
      return {"exp_avg", "exp_avg_sq"};
    if (kind == Kind::Lion)
      return {"exp_avg"};
    if (kind == Kind::Adafactor)
      return {"second_moment"};
    if (momentum != 0.0)
      return {"momentum_buffer"};
    return {};
  }
};

} // namespace mlir::fsdp

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_OPTIMIZERCONFIG_H
