//===- KernelCallsOptimizer.cpp - optimizer-phase calls -------------------===//
//
// The optimizer family (CApiOptimizer.cpp): GradScaler's loss scale and
// non-finite flag, the inf norm's max |g|, the clipping coefficient, and the
// updates, whose
// emitters are in OptimizerCalls.cpp.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

void fsdp::addOptimizerKernels(KernelEmitters &k) {
  k.add<SGDStepOp, AdamWStepOp, LionStepOp, AdafactorStatsOp, AdafactorFactorOp,
        AdafactorApplyOp>([](CallBuilder &calls, Operation *op) {
    [[maybe_unused]] bool emitted = emitOptimizer(calls, op);
    assert(emitted && "an update without its emitter");
    return success();
  });
  k.add<LossScaleOp>([](CallBuilder &calls, LossScaleOp o) {
    Args{calls}.t(o.getScale()).i32(o.getInverse()).call("loss_scale");
    return success();
  });
  k.add<FoundNonfiniteOp>([](CallBuilder &calls, FoundNonfiniteOp o) {
    for (auto [i, grad] : llvm::enumerate(o.getGrads()))
      Args{calls}
          .i32(dtypeOf(grad))
          .t(grad)
          .i64(numel(grad))
          .t(o.getFound())
          .i32(i > 0)
          .call("nonfinite_flag");
    return success();
  });
  k.add<MaxAbsOp>([](CallBuilder &calls, MaxAbsOp o) {
    for (auto [i, grad] : llvm::enumerate(o.getGrads()))
      Args{calls}
          .i32(dtypeOf(grad))
          .t(grad)
          .i64(numel(grad))
          .t(o.getMax())
          .i32(i > 0)
          .call("max_abs");
    return success();
  });
  k.add<ClipGradNormOp>([](CallBuilder &calls, ClipGradNormOp o) {
    Args{calls}
        .t(o.getTotal())
        .t(o.getNorm())
        .t(o.getCoefficient())
        .f64(o.getMaxNorm().convertToDouble())
        .f64(o.getNormType().convertToDouble())
        .call("clip_coefficient");
    return success();
  });
}
