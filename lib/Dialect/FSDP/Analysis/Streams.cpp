//===- Streams.cpp - which stream runs each op of a scheduled step --------===//

#include "fsdp/Dialect/FSDP/Analysis/Streams.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

using namespace mlir;
using namespace mlir::fsdp;

StreamKind fsdp::streamOf(Operation *op) {
  if (isa<UnshardOp, AllGatherOp>(op))
    return StreamKind::AllGather;
  if (isa<ReduceGradsOp, ReduceScatterOp, AllReduceOp, BroadcastOp>(op))
    return StreamKind::ReduceScatter;
  return StreamKind::Compute;
}
