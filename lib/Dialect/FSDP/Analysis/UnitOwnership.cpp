//===- UnitOwnership.cpp - which FSDP unit owns each parameter -------------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitOwnership.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::fsdp;

/// The lowest module enclosing both `a` and `b` (both in one model).
static NNModuleOp lowestCommonAncestor(NNModuleOp a, NNModuleOp b) {
  llvm::SmallPtrSet<Operation *, 8> ancestorsOfA;
  for (NNModuleOp m = a; m; m = m->getParentOfType<NNModuleOp>())
    ancestorsOfA.insert(m);
  for (NNModuleOp m = b; m; m = m->getParentOfType<NNModuleOp>())
    if (ancestorsOfA.contains(m))
      return m;
  return {};
}

NNModuleOp UnitOwnership::getEnclosingUnit(NNModuleOp module) const {
  for (NNModuleOp m = module; m; m = m->getParentOfType<NNModuleOp>())
    if (isUnit(m))
      return m;
  return {};
}

UnitOwnership::UnitOwnership(ModelOp model) {
  NNModuleOp root = model.getRoot();
  SymbolTableCollection tables;

  // The lowest module enclosing each parameter's declaration and readers.
  llvm::MapVector<ParamOp, NNModuleOp> span;
  root.walk([&](ParamOp param) {
    span[param] = param->getParentOfType<NNModuleOp>();
  });
  root.walk([&](GetParamOp read) {
    auto reader = read->getParentOfType<NNModuleOp>();
    auto param = dyn_cast_or_null<ParamOp>(
        tables.lookupSymbolIn(reader, read.getParam()));
    if (!param)
      return;
    NNModuleOp &lowest = span[param];
    NNModuleOp joined = lowestCommonAncestor(lowest, reader);
    if (joined != lowest && !llvm::is_contained(tied, param))
      tied.push_back(param);
    lowest = joined;
  });

  // Units and their parameters in pre-order (walk with a pre-order callback
  // visits parents before children and params in definition order).
  root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (auto module = dyn_cast<NNModuleOp>(op)) {
      if (isUnit(module)) {
        units.push_back(module);
        params[module];
      }
    } else if (auto param = dyn_cast<ParamOp>(op)) {
      NNModuleOp unit = getEnclosingUnit(span.lookup(param));
      owner[param] = unit;
      params[unit].push_back(param);
    }
  });
}

ArrayRef<ParamOp> UnitOwnership::getParams(NNModuleOp unit) const {
  auto it = params.find(unit);
  return it == params.end() ? ArrayRef<ParamOp>() : ArrayRef(it->second);
}
