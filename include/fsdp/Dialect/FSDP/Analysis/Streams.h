//===- Streams.h - which stream runs each op of a scheduled step -*- C++ -*-===//
//
// PyTorch FSDP's three streams: all-gathers on their own stream, gradient
// reductions on another, everything else on the compute stream. The
// lowering emits the ops there; fsdp-report's step-time prediction
// simulates the same three streams.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STREAMS_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STREAMS_H

#include "mlir/IR/Operation.h"

namespace mlir::fsdp {

enum class StreamKind { Compute = 0, AllGather = 1, ReduceScatter = 2 };

/// The stream an op of the scheduled step runs on.
StreamKind streamOf(Operation *op);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STREAMS_H
