//===- StepLowering.h - rewriting one train step into rt ops -----*- C++ -*-===//

#ifndef FSDP_LIB_CONVERSION_FSDPTORT_STEPLOWERING_H
#define FSDP_LIB_CONVERSION_FSDPTORT_STEPLOWERING_H

#include "fsdp/Dialect/FSDP/Analysis/Streams.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

#include <map>

namespace mlir::fsdp {


/// Where a tensor lives: a buffer and a byte offset into it.
struct TensorRef {
  Value buffer;
  int64_t offset = 0;
};

/// The persistent part of the arena (arguments, constants, the loss) and
/// the transient plan, decided before any op is emitted.
struct StepLayout {
  llvm::DenseMap<Value, int64_t> persistentOffset; // value -> byte offset
  int64_t persistentBytes = 0;
  /// Transient buffers: the value owning each, its planned arena offset
  /// and size.
  struct Transient {
    int64_t offset, bytes;
  };
  llvm::MapVector<Value, Transient> transients;
  /// Gradients written in place into their unit's flat gradient (an
  /// fsdp.flatten result) at a byte offset, instead of being copied there.
  llvm::DenseMap<Value, std::pair<Value, int64_t>> flatSlots;
  int64_t arenaBytes = 0;
  int64_t livePeakBytes = 0; // persistent + the transients' live peak
};

/// Rewrites the ops of a scheduled train step into a new function of rt
/// ops. One instance per step.
class StepLowering {
public:
  StepLowering(func::FuncOp step, const StepLayout &layout, func::FuncOp out);

  /// Emits every op; fails with a diagnostic on an op it cannot lower.
  LogicalResult run();

  // For the per-op emitters (KernelCalls.cpp).
  OpBuilder &builder() { return b; }
  Value i32(int64_t v);
  Value i64(int64_t v);
  Value f64(double v);
  Value nullBuffer();
  TensorRef ref(Value tensor);
  /// Appends (buffer, offset) of `tensor` to `args`.
  void pushTensor(SmallVectorImpl<Value> &args, Value tensor);
  /// Appends a null buffer and offset 0 (an absent optional operand).
  void pushNull(SmallVectorImpl<Value> &args);
  Value array(ArrayRef<int64_t> values);
  Value array(ArrayRef<Value> values);
  /// rt.call @name(ctx, stream-of-current-op, args...).
  void call(StringRef name, ArrayRef<Value> args);
  Value stream(StreamKind kind);
  Value comm(bool replicate);
  Value stepCount() { return stepPlusOne; }
  /// The run's seed and the rng_id that keys a dropout mask. The step
  /// numbers its S dropout sites (every call, every micro-batch) in their
  /// low 32 bits; rank r continues the numbering at r x S, so that N ranks
  /// drop what one rank with N times the micro-batches drops.
  Value seed() { return runSeed; }
  Value dropoutKey(int64_t rngId);

  /// Emits the runtime call(s) of a compute op; fails if it has none.
  LogicalResult emitKernel(Operation *op);

private:
  LogicalResult emitOp(Operation *op);
  void waitForOperands(Operation *op, StreamKind kind);
  Value rootOf(Value tensor) const;
  /// rt.alloc_at of a transient at its planned offset, once.
  void place(Value v);
  Value event();

  func::FuncOp step, out;
  const StepLayout &layout;
  OpBuilder b;
  Location loc;
  Value ctx, persistent, streams[kNumStreams], shardComm, replicateComm, stepPlusOne,
      runSeed, rank;
  int64_t dropoutSites = 0;
  StreamKind current = StreamKind::Compute;
  std::map<std::pair<int, int64_t>, Value> intConstants;
  std::map<double, Value> floatConstants;
  Value null;
  llvm::DenseMap<Value, TensorRef> refs;
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
  llvm::DenseMap<int64_t, SmallVector<Value>> freesAfter;  // op index -> roots
  SmallVector<Value> events;
  OpBuilder::InsertPoint eventInsertPoint;
};

/// Calls fn(op, root) for every op that reads or writes the storage owned
/// by `root` (aliases resolved); an unshard writes its gathered buffer,
/// which is keyed by its wait's result.
void forEachStorageUse(Block &body, const StepLayout &layout,
                       function_ref<void(Operation *, Value)> fn);

/// The value owning `tensor`'s storage: through views, reshapes, in-place
/// updates and flat-gradient slots.
Value storageRoot(Value tensor, const StepLayout &layout);

/// Ops that own no storage and emit nothing: views, reshapes, the host-side
/// step counter.
bool isStorageFree(Operation *op);

/// The value the step returns with result attribute `name`, or null.
Value returnedValue(func::FuncOp step, StringRef name);

/// fsdprt dtype code of an element type, or -1.
int32_t dtypeCode(Type elementType);

} // namespace mlir::fsdp

#endif
