//===- UnitPrecision.cpp - the mixed precision of one FSDP unit -----------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitPrecision.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

using namespace mlir;
using namespace mlir::fsdp;

UnitPrecision fsdp::getUnitPrecision(NNModuleOp unit, DictionaryAttr policy) {
  auto modelDtype = [&](StringRef key) {
    auto type = policy ? policy.getAs<TypeAttr>(key) : TypeAttr();
    return type ? type.getValue() : Type();
  };
  auto value = [](TypeAttr attr) { return attr ? attr.getValue() : Type(); };
  UnitPrecision precision;
  precision.paramDtype = modelDtype(kParamDtypeKey);
  precision.reduceDtype = modelDtype(kReduceDtypeKey);
  precision.castForwardInputs = unit.isRoot();
  fsdp::UnitAttr own = unit.getUnitAttr();
  if (!own)
    return precision;
  if (TypeAttr param = own.getParamDtype()) {
    precision.paramDtype = param.getValue();
    precision.reduceDtype = param.getValue();
    precision.castForwardInputs = true;
  }
  if (TypeAttr reduce = own.getReduceDtype())
    precision.reduceDtype = reduce.getValue();
  precision.outputDtype = value(own.getOutputDtype());
  if (BoolAttr cast = own.getCastForwardInputs())
    precision.castForwardInputs = cast.getValue();
  return precision;
}
