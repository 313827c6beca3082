//===- StorageAlias.h - results that reuse an operand's storage -*- C++ -*-===//
//
// Which results of a train step are another value's storage under a new
// name: views of a flat parameter, reshapes, and the in-place updates
// (optimizer steps on their parameter and state, batch norm's running
// statistics, integer counters, the cross-entropy gradient over logits
// nothing reads afterwards). The ops say so through StorageAliasOpInterface;
// integer counters (arith.addi) are recognised here. StorageLiveness.h
// follows these aliases for the report's liveness and the lowering's memory
// plan, so they agree on what is allocated.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STORAGEALIAS_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STORAGEALIAS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Value.h"

namespace mlir::fsdp {

/// The value whose storage `result` is, or null when it owns its storage.
Value storageAliasOf(Value result);

/// `x + c` on an integer tensor used only there, with a splat constant `c`
/// (a counter such as BatchNorm's num_batches_tracked): updated in place.
/// Not the step count, which the host keeps.
bool isCounterIncrement(arith::AddIOp add);

/// The step counter's bookkeeping (`arith.addi %count, c` on the step-count
/// argument, and the constants only it reads): it stays on the host, which
/// passes the count, so it has no storage and runs nothing.
bool isHostStepCounter(Operation *op);

/// Whether `v`'s storage is in host memory (CPU offload): an offloaded
/// step's flat parameters and optimizer state, what fsdp.to_host copied,
/// and the in-place updates and views of those.
bool livesOnHost(Value v);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STORAGEALIAS_H
