//===- ParamGroups.h - weight decay and lr scale per parameter ---*- C++ -*-===//
//
// torch.optim's parameter groups, chosen by rule: `fsdp-build-train-step`'s
// `param-groups` list, each "SELECTOR:SETTING[:SETTING]" where SELECTOR is
// `ndim<K`, `ndim>=K`, `kind=CLASS` (the parameter's module) or a glob on
// the parameter's qualified name, and SETTING is `weight-decay=X` or
// `lr-scale=X`. The first group that selects a parameter decides; the rest
// keep the optimizer's weight decay and lr. `no-decay-1d` is nanoGPT's
// rule, "ndim<2:weight-decay=0" (biases and norm weights), tried first.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_PARAMGROUPS_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_PARAMGROUPS_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "llvm/Support/GlobPattern.h"

#include <optional>

namespace mlir::fsdp {

/// What a group sets for its parameters.
struct GroupSettings {
  double lrScale = 1.0;
  double weightDecay = 0.0;
};

class ParamGroups {
public:
  /// Parses the specs; a malformed one is reported at `loc` and fails.
  static FailureOr<ParamGroups> parse(ArrayRef<std::string> specs,
                                      bool noDecay1d, Location loc);

  /// The settings of `param`: its first group's, over `defaults`.
  GroupSettings settingsOf(ParamOp param, GroupSettings defaults) const;

private:
  struct Group {
    std::string spec;
    std::optional<std::string> name; // a glob
    std::optional<std::string> kind;
    std::optional<int64_t> ndimBelow, ndimAtLeast;
    std::optional<double> lrScale, weightDecay;
  };
  static FailureOr<Group> parseGroup(StringRef spec, Location loc);
  bool selects(const Group &group, ParamOp param) const;

  SmallVector<Group> groups;
};

} // namespace mlir::fsdp

#endif
