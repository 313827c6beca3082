//===- ParamGroups.h - hyper-parameters per parameter ------------*- C++ -*-===//
//
// torch.optim's parameter groups, chosen by rule: `fsdp-build-train-step`'s
// `param-groups` list, each "SELECTOR:SETTING[:SETTING]" where SELECTOR is
// `ndim<K`, `ndim>=K`, `kind=CLASS` (the parameter's module) or a glob on
// the parameter's qualified name, and SETTING is `weight-decay=X`,
// `lr-scale=X` or one of the optimizer's own hyper-parameters (`beta1`,
// `beta2`, `eps`; `momentum`, `dampening`). The first group that selects a
// parameter decides; the rest keep the optimizer's. `no-decay-1d` is
// nanoGPT's rule, "ndim<2:weight-decay=0" (biases and norm weights), tried
// first.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_PARAMGROUPS_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_PARAMGROUPS_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/GlobPattern.h"

#include <optional>

namespace mlir::fsdp {

/// A parameter's hyper-parameters: the optimizer's, or its group's.
struct GroupSettings {
  double lrScale = 1.0;
  double weightDecay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double momentum = 0.0, dampening = 0.0;
};

class ParamGroups {
public:
  /// Parses the specs; `optimizerSettings` are the settings besides
  /// weight-decay and lr-scale that `optimizer` has. A malformed spec, or
  /// one setting what the optimizer does not have, is reported at `loc` and
  /// fails.
  static FailureOr<ParamGroups> parse(ArrayRef<std::string> specs,
                                      bool noDecay1d,
                                      ArrayRef<StringRef> optimizerSettings,
                                      StringRef optimizer, Location loc);

  /// The settings of `param`: its first group's, over `defaults`.
  GroupSettings settingsOf(ParamOp param, GroupSettings defaults) const;

  /// The groups that set `key` (e.g. "momentum"): spec and value each.
  SmallVector<std::pair<StringRef, double>> groupsSetting(StringRef key) const;

private:
  struct Group {
    std::string spec;
    std::optional<std::string> name; // a glob
    std::optional<std::string> kind;
    std::optional<int64_t> ndimBelow, ndimAtLeast;
    /// Setting name (as spelled in the spec) to value.
    llvm::StringMap<double> settings;
  };
  static FailureOr<Group> parseGroup(StringRef spec,
                                     ArrayRef<StringRef> optimizerSettings,
                                     StringRef optimizer, Location loc);
  bool selects(const Group &group, ParamOp param) const;

  SmallVector<Group> groups;
};

} // namespace mlir::fsdp

#endif
