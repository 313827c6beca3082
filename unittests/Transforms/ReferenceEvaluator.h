//===- ReferenceEvaluator.h - float64 interpreter for tests ----------------===//
//
// Evaluates a func.func of nn ops in double precision, with naive loops
// written independently of the runtime's kernels. It covers the ops that the
// VJPs compose (linear algebra, broadcasting elementwise ops, reductions,
// shape ops, softmax, mse_loss, relu) and SGD without momentum, which is
// enough to read a generated gradient back as param - new_param (lr = 1).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_UNITTESTS_TRANSFORMS_REFERENCEEVALUATOR_H
#define FSDP_UNITTESTS_TRANSFORMS_REFERENCEEVALUATOR_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace mlir::fsdp::test {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;

  static Tensor zeros(std::vector<int64_t> shape);
  int64_t numel() const;
};

/// Runs `func` on `args`; fails (with a message) on an op it does not know.
FailureOr<std::vector<Tensor>> evaluate(func::FuncOp func,
                                              const std::vector<Tensor> &args,
                                              std::string &error);

} // namespace mlir::fsdp::test

#endif // FSDP_UNITTESTS_TRANSFORMS_REFERENCEEVALUATOR_H
