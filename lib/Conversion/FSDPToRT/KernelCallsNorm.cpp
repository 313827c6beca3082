//===- KernelCallsNorm.cpp - normalisation calls --------------------------===//
//
// The row-wise family (CApiNorm.cpp): layer norm, RMS norm and softmax over
// the last dimension (rows x d), batch norm over N x C x spatial.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/NN/IR/NNOps.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

/// The product of the dims after N and C of a batch-norm input [N, C, ...].
static int64_t batchNormSpatial(Value input) {
  ArrayRef<int64_t> s = shapeOf(input);
  return numel(input) / (s[0] * s[1]);
}

void fsdp::addNormKernels(KernelEmitters &k) {
  k.add<nn::LayerNormOp>([](CallBuilder &calls, nn::LayerNormOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .opt(o.getWeight())
        .opt(o.getBias())
        .t(o.getResult())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .f64(o.getEpsilon().convertToDouble())
        .call("layer_norm_forward");
    return success();
  });
  k.add<nn::AddLayerNormOp>([](CallBuilder &calls, nn::AddLayerNormOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getLhs())
        .t(o.getRhs())
        .opt(o.getWeight())
        .opt(o.getBias())
        .t(o.getSum())
        .t(o.getResult())
        .i64(rows(o.getLhs()))
        .i64(lastDim(o.getLhs()))
        .f64(o.getEpsilon().convertToDouble())
        .call("add_layer_norm_forward");
    return success();
  });
  k.add<nn::LayerNormGradOp>([](CallBuilder &calls, nn::LayerNormGradOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInputGrad()))
        .t(o.getInput())
        .opt(o.getWeight())
        .t(o.getGrad())
        .t(o.getInputGrad())
        .t(o.getWeightGrad())
        .t(o.getBiasGrad())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .f64(o.getEpsilon().convertToDouble())
        .call("layer_norm_backward");
    return success();
  });
  k.add<nn::AddLayerNormGradOp>(
      [](CallBuilder &calls, nn::AddLayerNormGradOp o) {
        Args{calls}
            .i32(dtypeOf(o.getInputGrad()))
            .t(o.getInput())
            .opt(o.getWeight())
            .t(o.getGrad())
            .t(o.getAddend())
            .t(o.getInputGrad())
            .t(o.getWeightGrad())
            .t(o.getBiasGrad())
            .i64(rows(o.getInput()))
            .i64(lastDim(o.getInput()))
            .f64(o.getEpsilon().convertToDouble())
            .call("add_layer_norm_backward");
        return success();
      });
  k.add<nn::RMSNormOp>([](CallBuilder &calls, nn::RMSNormOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .opt(o.getWeight())
        .t(o.getResult())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .f64(o.getEpsilon().convertToDouble())
        .call("rms_norm_forward");
    return success();
  });
  k.add<nn::RMSNormGradOp>([](CallBuilder &calls, nn::RMSNormGradOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInputGrad()))
        .t(o.getInput())
        .opt(o.getWeight())
        .t(o.getGrad())
        .t(o.getInputGrad())
        .t(o.getWeightGrad())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .f64(o.getEpsilon().convertToDouble())
        .call("rms_norm_backward");
    return success();
  });
  k.add<nn::BatchNormOp>([](CallBuilder &calls, nn::BatchNormOp o) {
    // Training updates the running statistics in place: the op's new
    // statistics alias them (storageAliasOf).
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getWeight())
        .t(o.getBias())
        .t(o.getRunningMean())
        .t(o.getRunningVar())
        .t(o.getResult())
        .i64(shapeOf(o.getInput())[0])
        .i64(shapeOf(o.getInput())[1])
        .i64(batchNormSpatial(o.getInput()))
        .f64(o.getEpsilon().convertToDouble())
        .f64(o.getMomentum().convertToDouble())
        .i32(o.getTraining())
        .call("batch_norm_forward");
    return success();
  });
  k.add<nn::BatchNormGradOp>([](CallBuilder &calls, nn::BatchNormGradOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInputGrad()))
        .t(o.getInput())
        .t(o.getWeight())
        .t(o.getRunningMean())
        .t(o.getRunningVar())
        .t(o.getGrad())
        .t(o.getInputGrad())
        .t(o.getWeightGrad())
        .t(o.getBiasGrad())
        .i64(shapeOf(o.getInput())[0])
        .i64(shapeOf(o.getInput())[1])
        .i64(batchNormSpatial(o.getInput()))
        .f64(o.getEpsilon().convertToDouble())
        .i32(o.getTraining())
        .call("batch_norm_backward");
    return success();
  });
  k.add<nn::SoftmaxOp>([](CallBuilder &calls, nn::SoftmaxOp o) {
    int64_t rank = shapeOf(o.getInput()).size();
    int64_t dim = o.getDim() < 0 ? o.getDim() + rank : o.getDim();
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getResult())
        .shape(o.getInput())
        .i32(dim)
        .call("softmax_forward");
    return success();
  });
}
