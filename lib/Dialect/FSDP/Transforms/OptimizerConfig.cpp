//===- OptimizerConfig.cpp - the step's optimizer, validated once ---------===//
//
// The checks of fsdp-build-train-step's options, with PyTorch's defaults
// and constraints (AdamW's weight decay 0.01, Adam's and SGD's 0, Nesterov
// needing momentum; Lion's paper's lr 1e-4 and betas (0.9, 0.99);
// Adafactor's lr 1e-2, beta2_decay -0.8, eps (f32 epsilon, 1e-3), d 1),
// each diagnostic naming the pass and the option.
//
//===----------------------------------------------------------------------===//

#include "OptimizerConfig.h"

#include "fsdp/rt/AdafactorLayout.h"

#include "llvm/ADT/StringSwitch.h"

#include <limits>

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
  using Kind = OptimizerConfig::Kind;
  std::optional<Kind> kind = llvm::StringSwitch<std::optional<Kind>>(optimizer)
                                 .Case("sgd", Kind::SGD)
                                 .Case("adam", Kind::Adam)
                                 .Case("adamw", Kind::AdamW)
                                 .Case("lion", Kind::Lion)
                                 .Case("adafactor", Kind::Adafactor)
                                 .Default(std::nullopt);
  if (!kind)
    return emitError(loc, "fsdp-build-train-step: unknown optimizer '")
           << optimizer << "'; expected sgd, adam, adamw, lion or adafactor";
  config.kind = *kind;
  bool lion = *kind == Kind::Lion;
  bool adafactor = *kind == Kind::Adafactor;
  // -1: the optimizer's default (Lion's paper: lr 1e-4, betas (0.9, 0.99);
  // torch.optim.Adafactor: lr 1e-2).
  config.lr = lr == -1.0 ? (lion ? 1e-4 : adafactor ? 1e-2 : 1e-3) : lr;
  config.momentum = momentum;
  config.dampening = dampening;
  config.nesterov = nesterov;
  config.weightDecay =
      weightDecay < 0.0 ? (*kind == Kind::AdamW ? 1e-2 : 0.0) : weightDecay;
  config.beta1 = beta1;
  config.beta2 = beta2 == -1.0 ? (lion ? 0.99 : 0.999) : beta2;
  config.eps = eps;
  config.beta2Decay = options.beta2Decay;
  // torch's eps1 None: the parameter dtype's machine epsilon (f32 masters).
  config.eps1 = options.eps1 == -1.0
                    ? double(std::numeric_limits<float>::epsilon())
                    : options.eps1;
  config.eps2 = options.eps2;
  config.clipThreshold = options.clipThreshold;
  if (options.mode != "train" && options.mode != "eval")
    return emitError(loc, "fsdp-build-train-step: mode must be "
                          "train or eval, got '")
           << options.mode << "'";
  if (options.lossScale != "none" && options.lossScale != "dynamic")
    return emitError(loc, "fsdp-build-train-step: loss-scale must be none or "
                          "dynamic, got '")
           << options.lossScale << "'";
  config.lossScaling = options.lossScale == "dynamic";
  if (lr < 0.0 && lr != -1.0)
    return emitError(loc, "fsdp-build-train-step: lr must be >= 0, got ") << lr;
  if (weightDecay < 0.0 && weightDecay != -1.0)
    return emitError(loc,
                     "fsdp-build-train-step: weight-decay must be >= 0, got ")
           << weightDecay;
  if ((*kind == Kind::SGD || adafactor) &&
      (beta1 != 0.9 || beta2 != -1.0 || eps != 1e-8))
    return emitError(loc, "fsdp-build-train-step: beta1, beta2 and eps "
                          "are Adam / AdamW options; the optimizer is ")
           << optimizer;
  if (!adafactor && (options.beta2Decay != -0.8 || options.eps1 != -1.0 ||
                     options.eps2 != 1e-3 || options.clipThreshold != 1.0))
    return emitError(loc, "fsdp-build-train-step: beta2-decay, eps1, eps2 "
                          "and clip-threshold are Adafactor options; the "
                          "optimizer is ")
           << optimizer;
  // torch.optim.Adafactor's ranges.
  if (adafactor && !(config.beta2Decay <= 0.0))
    return emitError(loc, "fsdp-build-train-step: beta2-decay must be <= 0, "
                          "got ")
           << config.beta2Decay;
  if (adafactor && !(config.eps1 >= 0.0 && config.eps2 >= 0.0))
    return emitError(loc, "fsdp-build-train-step: eps1 and eps2 must be >= 0, "
                          "got (")
           << config.eps1 << ", " << config.eps2 << ")";
  if (adafactor && !(config.clipThreshold >= 1.0))
    return emitError(loc, "fsdp-build-train-step: clip-threshold (Adafactor's "
                          "d) must be >= 1, got ")
           << config.clipThreshold;
  if (*kind != Kind::SGD && !adafactor &&
      !(config.beta1 >= 0.0 && config.beta1 < 1.0 && config.beta2 >= 0.0 &&
        config.beta2 < 1.0))
    return emitError(loc, "fsdp-build-train-step: beta1 and beta2 must be in "
                          "[0, 1), got (")
           << config.beta1 << ", " << config.beta2 << ")";
  if (lion && eps != 1e-8)
    return emitError(loc, "fsdp-build-train-step: eps is an Adam / AdamW "
                          "option; the optimizer is lion");
  if (*kind != Kind::SGD && (momentum != 0.0 || dampening != 0.0 || nesterov))
    return emitError(loc, "fsdp-build-train-step: momentum, dampening "
                          "and nesterov are SGD options; the optimizer "
                          "is ")
           << optimizer;
  if (nesterov && (momentum <= 0.0 || dampening != 0.0))
    return emitError(loc, "fsdp-build-train-step: nesterov needs a "
                          "momentum and zero dampening (as torch.optim.SGD)");
  if (options.gradAccumSteps < 1)
    return emitError(
               loc,
               "fsdp-build-train-step: grad-accum-steps must be >= 1, got ")
           << options.gradAccumSteps;
  SmallVector<StringRef> groupSettings =
      *kind == Kind::SGD ? SmallVector<StringRef>{"momentum", "dampening"}
      : lion             ? SmallVector<StringRef>{"beta1", "beta2"}
      : adafactor        ? SmallVector<StringRef>{}
                         : SmallVector<StringRef>{"beta1", "beta2", "eps"};
  FailureOr<ParamGroups> groups = ParamGroups::parse(
      options.paramGroups, options.noDecay1d, groupSettings, optimizer, loc);
  if (failed(groups))
    return failure();
  config.groups = std::move(*groups);
  // A group's SGD momentum: torch keeps a momentum buffer exactly where it is
  // non-zero; ours are the optimizer's state, every parameter's or none.
  for (auto [spec, value] : config.groups.groupsSetting("momentum"))
    if ((value != 0.0) != (momentum != 0.0) || (nesterov && value <= 0.0))
      return emitError(loc, "fsdp-build-train-step: param group '")
             << spec
             << "': a group's momentum must be non-zero exactly when the "
                "optimizer's is (momentum buffers are kept for every "
                "parameter or none)";
  if (nesterov)
    for (auto [spec, value] : config.groups.groupsSetting("dampening"))
      if (value != 0.0)
        return emitError(loc, "fsdp-build-train-step: param group '")
               << spec << "': nesterov needs zero dampening";
  if (options.clipGradNorm < 0.0)
    return emitError(loc,
                     "fsdp-build-train-step: clip-grad-norm must be >= 0, got ")
           << options.clipGradNorm;
  if (!(options.clipNormType > 0.0))
    return emitError(loc, "fsdp-build-train-step: clip-norm-type must be > 0 "
                          "or inf, got ")
           << options.clipNormType;
  config.clipNormType = options.clipNormType;
  return config;
}

RankedTensorType OptimizerConfig::stateType(RankedTensorType param) const {
  if (kind != Kind::Adafactor)
    return param;
  ::fsdp::rt::AdafactorParam p =
      ::fsdp::rt::adafactorParamOf(param.getShape().data(), param.getRank(), 0);
  return RankedTensorType::get({p.stateSize()},
                               Float32Type::get(param.getContext()));
}
