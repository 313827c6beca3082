//===- Streams.h - which stream runs each op of a scheduled step -*- C++ -*-===//
//
// The step's streams (StreamKind, Collectives.h): a collective runs on the
// stream its CollectiveOpInterface names, everything else on the compute
// stream. The lowering emits the ops there; fsdp-report's step-time
// prediction simulates the same streams.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STREAMS_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STREAMS_H

#include "fsdp/Dialect/FSDP/IR/Collectives.h"

#include "mlir/IR/Operation.h"

namespace mlir::fsdp {

/// The stream an op of the scheduled step runs on.
StreamKind streamOf(Operation *op);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STREAMS_H
