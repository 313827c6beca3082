//===- UnitOwnership.h - which FSDP unit owns each parameter ----*- C++ -*-===//
//
// PyTorch's rule: a parameter belongs to the nearest enclosing FSDP unit of
// its module. A parameter read by several modules (tied weights) belongs to
// the nearest unit enclosing the lowest module that encloses its declaration
// and all its readers, so that one unit's flat parameter holds it. The root
// is always a unit.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_ANALYSIS_UNITOWNERSHIP_H
#define FSDP_DIALECT_FSDP_ANALYSIS_UNITOWNERSHIP_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::fsdp {

/// How `module` is ignored by FSDP (`#fsdp.unit<ignored = ...>`): none for
/// any module that is not an ignored unit.
inline IgnoredGradSync getIgnored(NNModuleOp module) {
  return module.isUnit() ? module.getUnitAttr().getIgnored()
                         : IgnoredGradSync::none;
}

/// The ignored unit enclosing `module` (itself if it is one), or null.
inline NNModuleOp getIgnoredAncestor(NNModuleOp module) {
  for (NNModuleOp m = module; m; m = m->getParentOfType<NNModuleOp>())
    if (getIgnored(m) != IgnoredGradSync::none)
      return m;
  return {};
}

class UnitOwnership {
public:
  /// Computes the ownership of every parameter of a verified `model`.
  explicit UnitOwnership(ModelOp model);

  /// The units in pre-order, the root first.
  ArrayRef<NNModuleOp> getUnits() const { return units; }
  /// Whether `module` is a unit (marked, or the root).
  bool isUnit(NNModuleOp module) const { return module.isUnit() || module.isRoot(); }
  /// The unit owning `param`.
  NNModuleOp getOwner(ParamOp param) const { return owner.lookup(param); }
  /// The parameters of `unit`'s flat parameter, in definition order
  /// (named_parameters() order of the unit's subtree).
  ArrayRef<ParamOp> getParams(NNModuleOp unit) const;
  /// The parameters whose readers span several modules (tied weights).
  ArrayRef<ParamOp> getTiedParams() const { return tied; }
  /// The nearest unit enclosing `module` (itself if it is one).
  NNModuleOp getEnclosingUnit(NNModuleOp module) const;

private:
  SmallVector<NNModuleOp> units;
  llvm::DenseMap<ParamOp, NNModuleOp> owner;
  llvm::MapVector<NNModuleOp, SmallVector<ParamOp>> params;
  SmallVector<ParamOp> tied;
};

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_UNITOWNERSHIP_H
