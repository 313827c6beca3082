//===- Autodiff.cpp - reverse-mode differentiation of a straight-line trace ===//

#include "Autodiff.h"

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/Interfaces/DifferentiableOpInterface.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"

using namespace mlir;
using namespace mlir::fsdp;

/// Records the ops a builder creates, so that they can be attributed to the
/// forward op whose VJP they implement.
namespace {
struct CreatedOps : public OpBuilder::Listener {
  SmallVector<Operation *> ops;
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
};
} // namespace

LogicalResult fsdp::differentiate(
    OpBuilder &builder, ArrayRef<Operation *> trace, Value output, Value seed,
    ArrayRef<Value> inputs,
    llvm::function_ref<void(Operation *, Operation *)> onBackwardOp,
    llvm::DenseMap<Value, Value> &gradients) {
  // Forward activity: values that depend on an input.
  llvm::DenseSet<Value> active(inputs.begin(), inputs.end());
  for (Operation *op : trace)
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return active.contains(v); }))
      active.insert(op->result_begin(), op->result_end());

  llvm::DenseMap<Value, Value> cotangents;
  cotangents[output] = seed;
  auto accumulate = [&](Value value, Value cotangent) {
    Value &slot = cotangents[value];
    slot = slot ? nn::AddOp::create(builder, value.getLoc(), slot, cotangent)
                      .getResult()
                : cotangent;
  };

  CreatedOps created;
  OpBuilder::Listener *previousListener = builder.getListener();
  builder.setListener(&created);
  llvm::scope_exit restore([&] { builder.setListener(previousListener); });

  for (Operation *op : llvm::reverse(trace)) {
    SmallVector<Value> resultCotangents;
    for (Value result : op->getResults())
      resultCotangents.push_back(cotangents.lookup(result));
    bool reachesOutput = llvm::any_of(resultCotangents,
                                      [](Value v) { return v != nullptr; });
    bool dependsOnInput = llvm::any_of(
        op->getOperands(), [&](Value v) { return active.contains(v); });
    if (!reachesOutput || !dependsOnInput)
      continue;
    auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable)
      return op->emitOpError("has no VJP (DifferentiableOpInterface), but the "
                             "loss depends on it through a trained parameter");
    created.ops.clear();
    FailureOr<SmallVector<Value>> operandCotangents =
        differentiable.buildVJP(builder, resultCotangents);
    if (failed(operandCotangents))
      return op->emitOpError("failed to build its VJP");
    for (auto [operand, cotangent] :
         llvm::zip(op->getOperands(), *operandCotangents))
      if (cotangent && active.contains(operand))
        accumulate(operand, cotangent);
    for (Operation *backwardOp : created.ops)
      onBackwardOp(op, backwardOp);
  }

  for (Value input : inputs)
    if (Value gradient = cotangents.lookup(input))
      gradients[input] = gradient;
  return success();
}
