//===- KernelCallsLoss.cpp - loss calls -----------------------------------===//
//
// The loss family (CApiLoss.cpp): cross-entropy over class logits (forward,
// backward, or both in one pass) and the mean squared error.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/rt/fsdprt.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

static int32_t lossReduction(nn::Reduction r) {
  return r == nn::Reduction::sum ? FSDPRT_LOSS_SUM : FSDPRT_LOSS_MEAN;
}

void fsdp::addLossKernels(KernelEmitters &k) {
  k.add<nn::CrossEntropyOp>([](CallBuilder &calls, nn::CrossEntropyOp o) {
    Args{calls}
        .i32(dtypeOf(o.getLogits()))
        .i32(dtypeOf(o.getTargets()))
        .t(o.getLogits())
        .t(o.getTargets())
        .t(o.getResult())
        .i64(rows(o.getLogits()))
        .i64(o.getClassCount())
        .i64(lastDim(o.getLogits()))
        .i32(lossReduction(o.getReduction()))
        .i64(o.getIgnoreIndex())
        .call("cross_entropy_forward");
    return success();
  });
  k.add<nn::CrossEntropyGradOp>(
      [](CallBuilder &calls, nn::CrossEntropyGradOp o) {
        Args{calls}
            .i32(dtypeOf(o.getLogits()))
            .i32(dtypeOf(o.getTargets()))
            .t(o.getLogits())
            .t(o.getTargets())
            .t(o.getGrad())
            .t(o.getResult())
            .i64(rows(o.getLogits()))
            .i64(o.getClassCount())
            .i64(lastDim(o.getLogits()))
            .i32(lossReduction(o.getReduction()))
            .i64(o.getIgnoreIndex())
            .call("cross_entropy_backward");
        return success();
      });
  k.add<nn::CrossEntropyWithGradOp>(
      [](CallBuilder &calls, nn::CrossEntropyWithGradOp o) {
        Args{calls}
            .i32(dtypeOf(o.getLogits()))
            .i32(dtypeOf(o.getTargets()))
            .t(o.getLogits())
            .t(o.getTargets())
            .t(o.getGrad())
            .t(o.getLoss())
            .t(o.getLogitsGrad())
            .i64(rows(o.getLogits()))
            .i64(o.getClassCount())
            .i64(lastDim(o.getLogits()))
            .i32(lossReduction(o.getReduction()))
            .i64(o.getIgnoreIndex())
            .call("cross_entropy_forward_backward");
        return success();
      });
  k.add<nn::MSELossOp>([](CallBuilder &calls, nn::MSELossOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .t(o.getTarget())
        .t(o.getResult())
        .i64(numel(o.getInput()))
        .i32(lossReduction(o.getReduction()))
        .call("mse_loss_forward");
    return success();
  });
}
