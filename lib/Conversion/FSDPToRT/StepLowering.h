//===- StepLowering.h - rewriting one train step into rt ops ----*- C++ -*-===//
//
// The lowering's view of a step: the layout decided before any op is
// emitted (FSDPToRT.cpp) and the class that emits the rt ops in program
// order (StepLowering.cpp). Storage roots and liveness are Analysis's
// (StorageLiveness.h).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_CONVERSION_FSDPTORT_STEPLOWERING_H
#define FSDP_LIB_CONVERSION_FSDPTORT_STEPLOWERING_H

#include "CallBuilder.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageLiveness.h"
#include "fsdp/Dialect/FSDP/Analysis/Streams.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

#include <map>

namespace mlir::fsdp {

/// The persistent part of the arena (arguments, constants, the loss) and
/// the transient plan, decided before any op is emitted.
struct StepLayout {
  llvm::DenseMap<Value, int64_t> persistentOffset; // value -> byte offset
  int64_t persistentBytes = 0;
  /// CPU offload: what lives in the host buffer (flat parameters, their
  /// optimizer state, the gradients copied to the host), for the whole run.
  llvm::DenseMap<Value, int64_t> hostOffset;
  int64_t hostBytes = 0;
  /// Transient buffers: the value owning each, its planned arena offset
  /// and size.
  struct Transient {
    int64_t offset, bytes;
  };
  llvm::MapVector<Value, Transient> transients;
  /// Gradients written in place into their unit's flat gradient (an
  /// fsdp.flatten result) at a byte offset, instead of being copied there.
  FlatGradientSlots flatSlots;
  int64_t arenaBytes = 0;
  int64_t livePeakBytes = 0; // persistent + the transients' live peak
};

/// Where every tensor of a scheduled train step lives: the persistent and
/// host buffers, the flat-gradient slots and the transients' plan
/// (FSDPToRT.cpp). Fails with a diagnostic on a step the runner cannot use.
FailureOr<StepLayout> layOutStep(func::FuncOp step);

/// Rewrites the ops of a scheduled train step into a new function of rt
/// ops. One instance per step.
class StepLowering {
public:
  /// With `fuseUpdates`, each run of consecutive SGD / AdamW / Lion
  /// updates on one stream is emitted at its first op as multi-tensor
  /// calls (emitMultiTensorUpdates).
  StepLowering(func::FuncOp step, const StepLayout &layout, func::FuncOp out,
               bool fuseUpdates);

  /// Emits every op; fails with a diagnostic on an op it cannot lower.
  LogicalResult run();

private:
  LogicalResult emitOp(Operation *op);
  /// The run of updates starting at `first` as multi-tensor calls.
  void emitUpdateRun(Operation *first);
  void waitForOperands(Operation *op, StreamKind kind);
  Value rootOf(Value tensor) const;
  /// rt.alloc_at of a transient at its planned offset, once.
  void place(Value v);
  Value event();

  Value stream(StreamKind kind) { return streams[int(kind)]; }

  func::FuncOp step, out;
  const StepLayout &layout;
  bool fuseUpdates;
  /// Updates emitted with the run they start or belong to.
  llvm::DenseSet<Operation *> emittedWithRun;
  CallBuilder calls;
  OpBuilder &b; // calls.builder()
  Location loc;
  Value ctx, persistent, host, streams[kNumStreams];
  StreamKind current = StreamKind::Compute;
  llvm::DenseMap<Operation *, int64_t> index;
  /// The stream that produced a value, and the event recorded after it
  /// when another stream reads it.
  llvm::DenseMap<Value, StreamKind> producer;
  llvm::DenseMap<Value, Value> producedEvent;
  /// Events a stream already waits for (no need to wait twice).
  llvm::DenseSet<std::pair<int, Value>> waited;
  /// Per transient buffer: the ops that read or write it (through aliases),
  /// the stream of each, and where to free it.
  struct Uses {
    std::map<int, int64_t> lastOnStream; // stream -> last op index
    int64_t last = -1;
  };
  llvm::DenseMap<Value, Uses> uses;
  llvm::DenseMap<int64_t, SmallVector<Value>> freesAfter; // op index -> roots
  SmallVector<Value> events;
  OpBuilder::InsertPoint eventInsertPoint;
};

/// The value owning `tensor`'s storage under this layout: through views,
/// reshapes, in-place updates and flat-gradient slots.
inline Value storageRoot(Value tensor, const StepLayout &layout) {
  return storageRoot(tensor, &layout.flatSlots);
}

/// The value the step returns with result attribute `name`, or null.
Value returnedValue(func::FuncOp step, StringRef name);

} // namespace mlir::fsdp

#endif
