//===- StorageAlias.cpp - results that reuse an operand's storage ---------===//

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::fsdp;

/// Whether `op` is the last to read `value`'s storage: every other reader
/// of it, or of a view sharing it (reshapes), comes before `op` in its
/// block, and the storage is an activation an nn op computed (not an
/// argument, a constant or a gathered parameter). Readers in other blocks
/// count as later.
static bool isLastReader(Operation *op, Value value) {
  Value root = value;
  while (Value source = storageAliasOf(root))
    root = source;
  Operation *def = root.getDefiningOp();
  if (!def || !isa_and_nonnull<nn::NNDialect>(def->getDialect()))
    return false;
  SmallVector<Value> shared{root};
  while (!shared.empty()) {
    Value v = shared.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (user == op)
        continue;
      if (isa<nn::ReshapeOp>(user)) {
        shared.push_back(user->getResult(0));
        continue;
      }
      if (user->getBlock() != op->getBlock() || !user->isBeforeInBlock(op))
        return false;
    }
  }
  return true;
}

Value fsdp::storageAliasOf(Value result) {
  Operation *op = result.getDefiningOp();
  if (!op)
    return {};
  if (auto view = dyn_cast<ViewOp>(op))
    return view.getFlat();
  if (auto reshape = dyn_cast<nn::ReshapeOp>(op))
    return reshape.getInput();
  unsigned n = cast<OpResult>(result).getResultNumber();
  if (isa<SGDStepOp>(op)) // (param, momentum_buffer)
    return op->getOperand(n == 0 ? 0 : 2);
  if (isa<AdamWStepOp>(op)) // (param, exp_avg, exp_avg_sq)
    return op->getOperand(n == 0 ? 0 : 1 + n);
  // Batch norm's new running statistics, updated in place in training mode
  // (as F.batch_norm does) and unchanged in eval mode.
  if (isa<nn::BatchNormOp>(op) && n > 0)
    return op->getOperand(2 + n);
  if (auto add = dyn_cast<arith::AddIOp>(op))
    if (isCounterIncrement(add))
      return add.getLhs();
  // The logits' gradient overwrites the logits when nothing reads them
  // afterwards (a language model's head, whose backward reads its input
  // and weight): the kernels read a row before writing it. Saves a
  // logits-sized buffer at the step's peak.
  Value logits;
  if (auto grad = dyn_cast<nn::CrossEntropyGradOp>(op))
    logits = grad.getLogits();
  if (auto fused = dyn_cast<nn::CrossEntropyWithGradOp>(op); fused && n == 1)
    logits = fused.getLogits();
  if (logits && result.getType() == logits.getType() &&
      isLastReader(op, logits))
    return logits;
  return {};
}

bool fsdp::isCounterIncrement(arith::AddIOp add) {
  auto type = dyn_cast<RankedTensorType>(add.getType());
  if (!type || !add.getLhs().hasOneUse() ||
      !matchPattern(add.getRhs(), m_Constant<DenseIntElementsAttr>(nullptr)) ||
      !cast<DenseIntElementsAttr>(
           add.getRhs().getDefiningOp<arith::ConstantOp>().getValue())
           .isSplat())
    return false;
  // In place only if nothing else reads the storage: every value on the
  // lhs's alias chain (a reshape of a tensor read elsewhere) is used once.
  for (Value v = add.getLhs(); Value source = storageAliasOf(v); v = source)
    if (!source.hasOneUse())
      return false;
  return !isHostStepCounter(add);
}

bool fsdp::isHostStepCounter(Operation *op) {
  if (auto add = dyn_cast<arith::AddIOp>(op)) {
    auto count = dyn_cast<BlockArgument>(add.getLhs());
    auto step = count ? dyn_cast<func::FuncOp>(count.getOwner()->getParentOp())
                      : func::FuncOp();
    return step && step.getArgAttr(count.getArgNumber(), kStepCountArg);
  }
  return isa<arith::ConstantOp>(op) &&
         llvm::all_of(op->getUsers(), [](Operation *user) {
           return isa<arith::AddIOp>(user) && isHostStepCounter(user);
         });
}

bool fsdp::livesOnHost(Value v) {
  while (Value source = storageAliasOf(v))
    v = source;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto step = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    return step && isHostArgument(step, arg.getArgNumber());
  }
  return isa_and_nonnull<ToHostOp>(v.getDefiningOp());
}
