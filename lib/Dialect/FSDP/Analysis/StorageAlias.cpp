//===- StorageAlias.cpp - results that reuse an operand's storage ---------===//
//
// What an op says through StorageAliasOpInterface, plus the conditions only
// the step can decide: whether a dead operand is really dead here, and the
// integer counters (arith.addi, not our op) updated in place.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/Interfaces/StorageAliasOpInterface.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::fsdp;

/// Whether `op` is the last to read `value`'s storage: every other reader
/// of it, or of a rename sharing it (a reshape), comes before `op` in its
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
      if (auto alias = dyn_cast<StorageAliasOpInterface>(user);
          alias && alias.isStorageRename()) {
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
  auto opResult = dyn_cast<OpResult>(result);
  if (!opResult)
    return {};
  Operation *op = opResult.getOwner();
  unsigned n = opResult.getResultNumber();
  if (auto alias = dyn_cast<StorageAliasOpInterface>(op)) {
    OpOperand *operand = alias.getReusedOperand(n);
    if (!operand ||
        (alias.reusesOnlyDeadOperand(n) && !isLastReader(op, operand->get())))
      return {};
    return operand->get();
  }
  // Counters: arith.addi is upstream's op, so it is recognised here.
  if (auto add = dyn_cast<arith::AddIOp>(op))
    if (isCounterIncrement(add))
      return add.getLhs();
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
