//===- StorageLiveness.cpp - storage roots, uses and spans ----------------===//
//
// The storage model the report, the step-time model and the lowering share
// (StorageLiveness.h): what owns storage, what runs, and the one walk that
// finds each storage root's first and last use.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/StorageLiveness.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Interfaces/StorageAliasOpInterface.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

bool fsdp::isStorageRename(Operation *op) {
  auto alias = dyn_cast<StorageAliasOpInterface>(op);
  return alias && alias.isStorageRename();
}

bool fsdp::isStorageFree(Operation *op) {
  return isStorageRename(op) || isHostStepCounter(op);
}

bool fsdp::emitsNothing(Operation *op) {
  if (auto alias = dyn_cast<StorageAliasOpInterface>(op);
      alias && alias.checksRenamedStorage())
    return false;
  return isStorageFree(op) || isa<WaitOp, ReshardOp>(op) ||
         op->hasTrait<OpTrait::IsTerminator>();
}

Value fsdp::storageRoot(Value tensor, const FlatGradientSlots *slots) {
  for (;;) {
    if (Value source = storageAliasOf(tensor)) {
      tensor = source;
      continue;
    }
    if (!slots)
      return tensor;
    auto slot = slots->find(tensor);
    if (slot == slots->end())
      return tensor;
    tensor = slot->second.first;
  }
}

void fsdp::forEachStorageUse(Block &body, StorageUses uses,
                             const FlatGradientSlots *slots,
                             function_ref<void(Operation *, Value)> fn) {
  for (Operation &op : body) {
    if (uses == StorageUses::Runtime &&
        (isStorageFree(&op) || isa<func::ReturnOp>(op)))
      continue;
    for (Value operand : op.getOperands())
      if (!isa<TokenType>(operand.getType()))
        fn(&op, storageRoot(operand, slots));
    for (Value result : op.getResults())
      if (!isa<TokenType>(result.getType()))
        fn(&op, storageRoot(result, slots));
    if (auto unshard = dyn_cast<UnshardOp>(op))
      fn(&op, cast<WaitOp>(*unshard->getUsers().begin()).getResult());
  }
}

StorageSpans fsdp::storageSpans(Block &body, StorageUses uses,
                                const FlatGradientSlots *slots) {
  llvm::DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(body))
    index[&op] = i;
  StorageSpans spans;
  forEachStorageUse(body, uses, slots, [&](Operation *op, Value root) {
    int64_t i = index[op];
    auto [it, inserted] = spans.insert({root, {i, i}});
    if (!inserted) {
      it->second.first = std::min(it->second.first, i);
      it->second.last = std::max(it->second.last, i);
    }
  });
  return spans;
}
