//===- KernelCallsRouting.cpp - mixture-of-experts routing calls ----------===//
//
// The routing family (CApiRouting.cpp): top-k and sort along the last
// dimension, histc, the inverse permutation, nn.id_range's check of ids,
// and the grouped GEMM with its weight gradient.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/rt/fsdprt.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

/// What an id check's error names: the op and its source line, where the
/// location has one ("net.py:12: nn.id_range").
static std::string checkName(Operation *op) {
  std::string name = op->getName().getStringRef().str();
  auto file = op->getLoc()->findInstanceOf<FileLineColLoc>();
  if (!file)
    return name;
  return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ": " +
          name)
      .str();
}

void fsdp::addRoutingKernels(KernelEmitters &k) {
  k.add<nn::TopkOp>([](CallBuilder &calls, nn::TopkOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .i64(o.getK())
        .t(o.getValues())
        .t(o.getIndices())
        .call("topk_forward");
    return success();
  });
  k.add<nn::SortOp>([](CallBuilder &calls, nn::SortOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .i64(rows(o.getInput()))
        .i64(lastDim(o.getInput()))
        .t(o.getValues())
        .t(o.getIndices())
        .call("sort_forward");
    return success();
  });
  k.add<nn::HistcOp>([](CallBuilder &calls, nn::HistcOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .i64(numel(o.getInput()))
        .i64(o.getBins())
        .f64(o.getMin().convertToDouble())
        .f64(o.getMax().convertToDouble())
        .t(o.getResult())
        .call("histc");
    return success();
  });
  k.add<nn::InvertPermutationOp>(
      [](CallBuilder &calls, nn::InvertPermutationOp o) {
        Args{calls}
            .i32(dtypeOf(o.getInput()))
            .t(o.getInput())
            .i64(numel(o.getInput()))
            .t(o.getResult())
            .call("invert_permutation");
        return success();
      });
  // A storage rename that also checks its ids (StepLowering runs it where
  // the rename is): the range torch checks where these ids index.
  k.add<nn::IdRangeOp>([](CallBuilder &calls, nn::IdRangeOp o) {
    IntegerAttr ignore = o.getIgnoreAttr();
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .i64(numel(o.getInput()))
        .i64(o.getCount())
        .i32(ignore ? 1 : 0)
        .i64(ignore ? ignore.getInt() : 0)
        .string(checkName(o))
        .call("index_check");
    return success();
  });
  k.add<nn::GroupedMatmulOp>([](CallBuilder &calls, nn::GroupedMatmulOp o) {
    ArrayRef<int64_t> w = shapeOf(o.getWeight());
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .i32(dtypeOf(o.getOffsets()))
        .t(o.getInput())
        .t(o.getWeight())
        .t(o.getOffsets())
        .t(o.getResult())
        .i64(shapeOf(o.getInput())[0])
        .i64(w[0])
        .i64(w[1])
        .i64(w[2])
        .call("grouped_matmul_forward");
    return success();
  });
  k.add<nn::GroupedMatmulGradWeightOp>(
      [](CallBuilder &calls, nn::GroupedMatmulGradWeightOp o) {
        ArrayRef<int64_t> dw = shapeOf(o.getResult());
        Args{calls}
            .i32(dtypeOf(o.getResult()))
            .i32(dtypeOf(o.getOffsets()))
            .t(o.getInput())
            .t(o.getGrad())
            .t(o.getOffsets())
            .t(o.getResult())
            .i64(shapeOf(o.getInput())[0])
            .i64(dw[0])
            .i64(dw[1])
            .i64(dw[2])
            .call("grouped_matmul_backward_weight");
        return success();
      });
}
