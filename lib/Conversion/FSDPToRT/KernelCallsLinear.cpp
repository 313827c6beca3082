//===- KernelCallsLinear.cpp - linear and matmul calls --------------------===//
//
// The GEMM family (CApiLinear.cpp): the shapes a GEMM wants (rows x in ->
// out of a linear layer, batch x m x k x n of a matmul).
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/NN/IR/NNOps.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

/// matmul: [batch..., m, k] x [k, n] or [batch..., k, n].
static LogicalResult emitMatmul(CallBuilder &l, nn::MatmulOp op) {
  ArrayRef<int64_t> a = shapeOf(op.getLhs()), bShape = shapeOf(op.getRhs());
  if (a.size() < 2 || bShape.size() < 2 ||
      (bShape.size() > 2 && bShape.size() != a.size()))
    return op.emitOpError("has no runtime lowering for operand ranks ")
           << a.size() << " and " << bShape.size();
  int64_t batch = 1;
  for (int64_t d : a.drop_back(2))
    batch *= d;
  int64_t m = op.getTransposeLhs() ? a[a.size() - 1] : a[a.size() - 2];
  int64_t k = op.getTransposeLhs() ? a[a.size() - 2] : a[a.size() - 1];
  int64_t n = op.getTransposeRhs() ? bShape[bShape.size() - 2]
                                   : bShape[bShape.size() - 1];
  Args{l}
      .i32(dtypeOf(op.getResult()))
      .t(op.getLhs())
      .t(op.getRhs())
      .t(op.getResult())
      .i64(batch)
      .i64(m)
      .i64(k)
      .i64(n)
      .i32(op.getTransposeLhs())
      .i32(op.getTransposeRhs())
      .i32(bShape.size() > 2)
      .call("matmul_forward");
  return success();
}

void fsdp::addLinearKernels(KernelEmitters &k) {
  k.add<nn::LinearOp>([](CallBuilder &calls, nn::LinearOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getWeight())
        .opt(o.getBias())
        .t(o.getResult())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .i64(shapeOf(o.getWeight())[0])
        .call("linear_forward");
    return success();
  });
  k.add<nn::LinearGradOp>([](CallBuilder &calls, nn::LinearGradOp o) {
    Args{calls}
        .i32(dtypeOf(o.getGrad()))
        .t(o.getInput())
        .t(o.getWeight())
        .t(o.getGrad())
        .t(o.getInputGrad())
        .t(o.getWeightGrad())
        .t(o.getBiasGrad())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .i64(shapeOf(o.getWeight())[0])
        .call("linear_backward");
    return success();
  });
  k.add<nn::LinearGeluOp>([](CallBuilder &calls, nn::LinearGeluOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getWeight())
        .opt(o.getBias())
        .t(o.getPre())
        .t(o.getResult())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .i64(shapeOf(o.getWeight())[0])
        .call("linear_gelu_forward");
    return success();
  });
  k.add<nn::LinearGeluGradOp>([](CallBuilder &calls, nn::LinearGeluGradOp o) {
    Args{calls}
        .i32(dtypeOf(o.getGrad()))
        .t(o.getInput())
        .t(o.getWeight())
        .t(o.getGrad())
        .t(o.getPre())
        .t(o.getInputGrad())
        .t(o.getWeightGrad())
        .t(o.getBiasGrad())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .i64(shapeOf(o.getWeight())[0])
        .call("linear_gelu_backward");
    return success();
  });
  k.add<nn::MatmulOp>(
      [](CallBuilder &calls, nn::MatmulOp o) { return emitMatmul(calls, o); });
}
