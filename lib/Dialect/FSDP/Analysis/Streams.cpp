//===- Streams.cpp - which stream runs each op of a scheduled step --------===//

#include "fsdp/Dialect/FSDP/Analysis/Streams.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

using namespace mlir;
using namespace mlir::fsdp;

StreamKind fsdp::streamOf(Operation *op) {
  if (auto collective = dyn_cast<CollectiveOpInterface>(op))
    return collective.getStream();
  if (isa<ToDeviceOp>(op))
    return StreamKind::HostToDevice;
  if (isa<ToHostOp>(op))
    return StreamKind::DeviceToHost;
  if (isOptimizerUpdate(op) &&
      isOffloaded(op->getParentOfType<func::FuncOp>()))
    return StreamKind::Host;
  return StreamKind::Compute;
}
