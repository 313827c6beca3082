//===- StorageAlias.h - results that reuse an operand's storage -*- C++ -*-===//
//
// Which results of a train step are another value's storage under a new
// name: views of a flat parameter, reshapes, and the in-place updates
// (optimizer steps on their parameter and state, batch norm's running
// statistics). The report's liveness and the lowering's memory plan both
// follow them, so they agree on what is allocated.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STORAGEALIAS_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STORAGEALIAS_H

#include "mlir/IR/Value.h"

namespace mlir::fsdp {

/// The value whose storage `result` is, or null when it owns its storage.
Value storageAliasOf(Value result);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STORAGEALIAS_H
