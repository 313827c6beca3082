//===- MixedPrecision.cpp - the dtypes of compute and communication --------===//

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMIXEDPRECISIONPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The float type an option names, null for "", failure for anything else.
FailureOr<Type> parseDtype(MLIRContext *context, StringRef name) {
  Builder b(context);
  if (name.empty())
    return Type();
  if (name == "f32")
    return Type(b.getF32Type());
  if (name == "bf16")
    return Type(b.getBF16Type());
  if (name == "f16")
    return Type(b.getF16Type());
  return failure();
}

struct MixedPrecisionPass
    : public fsdp::impl::FSDPMixedPrecisionPassBase<MixedPrecisionPass> {
  using FSDPMixedPrecisionPassBase::FSDPMixedPrecisionPassBase;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    Location loc = getOperation().getLoc();
    SmallVector<NamedAttribute> policy;
    for (auto [key, name] :
         {std::pair<StringRef, StringRef>{kParamDtypeKey, paramDtype},
          {kReduceDtypeKey, reduceDtype.empty() ? paramDtype : reduceDtype},
          {kBufferDtypeKey, bufferDtype}}) {
      FailureOr<Type> type = parseDtype(context, name);
      if (failed(type)) {
        emitError(loc, "fsdp-mixed-precision: unknown dtype '")
            << name << "'; expected f32, bf16 or f16";
        return signalPassFailure();
      }
      if (*type)
        policy.push_back(
            NamedAttribute(StringAttr::get(context, key), TypeAttr::get(*type)));
    }
    if (keepLowPrecisionGrads)
      policy.push_back(NamedAttribute(
          StringAttr::get(context, kKeepLowPrecisionGradsKey),
          ::mlir::UnitAttr::get(context)));
    auto attr = DictionaryAttr::get(context, policy);
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      if (getTrainStep(model)) {
        model.emitOpError("already has a train step; run "
                          "fsdp-mixed-precision before fsdp-build-train-step");
        return signalPassFailure();
      }
      model->setAttr(kMixedPrecisionAttr, attr);
    }
  }
};

} // namespace
