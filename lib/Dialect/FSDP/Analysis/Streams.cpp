//===- Streams.cpp - which stream runs each op of a scheduled step --------===//

#include "fsdp/Dialect/FSDP/Analysis/Streams.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

using namespace mlir;
using namespace mlir::fsdp;

StreamKind fsdp::streamOf(Operation *op) {
  if (auto collective = dyn_cast<CollectiveOpInterface>(op))
    return collective.getStream();
  return StreamKind::Compute;
}
