//===- CallBuilder.h - the runtime calls of a lowered step ------*- C++ -*-===//
//
// What the per-op emitters (KernelCalls.cpp, CollectiveCalls.cpp) build a
// call with: cached constants, tensors as (buffer, byte offset) once the
// step lowering has bound them, and rt.call on the stream of the op being
// lowered. The step lowering (StepLowering.cpp) owns the schedule: it binds
// the step's arguments and every tensor, sets the stream and location of
// each op, and calls the emitters; they never call back into it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_CONVERSION_FSDPTORT_CALLBUILDER_H
#define FSDP_LIB_CONVERSION_FSDPTORT_CALLBUILDER_H

#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <map>

namespace mlir::fsdp {

/// Where a tensor lives: a buffer and a byte offset into it.
struct TensorRef {
  Value buffer;
  int64_t offset = 0;
};

/// The lowered step's runtime values every call may need.
struct StepValues {
  Value ctx;
  Value shardComm, replicateComm;
  /// The groups of reshard_after_forward = N (0 when the step has none).
  Value postForwardComm;
  /// The step count after this step (the optimizers' `step`).
  Value stepPlusOne;
  Value seed, rank;
  /// Random sites of the step (dropouts and draws; every call, every
  /// micro-batch).
  int64_t randomSites = 0;
};

class CallBuilder {
public:
  explicit CallBuilder(MLIRContext *context) : b(context) {}

  OpBuilder &builder() { return b; }
  Location location() const { return loc; }
  Value context() const { return step.ctx; }
  /// The stream of the op being lowered.
  Value stream() const { return current; }

  void setStepValues(const StepValues &values) { step = values; }
  /// The op about to be emitted runs on `stream` and reports at `at`.
  void setOp(Value stream, Location at) {
    current = stream;
    loc = at;
  }

  Value i32(int64_t v);
  Value i64(int64_t v);
  Value f64(double v);
  Value nullBuffer();
  Value array(ArrayRef<int64_t> values);
  Value array(ArrayRef<Value> values);
  /// A constant C string (rt.string): what a runtime check's error names.
  Value string(StringRef text);

  void bind(Value tensor, TensorRef ref) { refs[tensor] = ref; }
  bool isBound(Value tensor) const { return refs.count(tensor); }
  TensorRef ref(Value tensor) const;
  /// Appends (buffer, offset) of `tensor` to `args`.
  void pushTensor(SmallVectorImpl<Value> &args, Value tensor);
  /// Appends a null buffer and offset 0 (an absent optional operand).
  void pushNull(SmallVectorImpl<Value> &args);

  /// rt.call @name(ctx, stream, args...).
  void call(StringRef name, ArrayRef<Value> args);

  Value comm(bool replicate) const {
    return replicate ? step.replicateComm : step.shardComm;
  }
  Value postForwardComm() const { return step.postForwardComm; }
  Value stepCount() const { return step.stepPlusOne; }
  Value seed() const { return step.seed; }
  Value rank() const { return step.rank; }
  /// The rng_id that keys a random site (a dropout mask, a draw). The step
  /// numbers its S random sites in their low 32 bits; rank r continues the
  /// numbering at r x S, so that N ranks draw what one rank with N times
  /// the micro-batches draws.
  Value rngKey(int64_t rngId);

private:
  OpBuilder b;
  Location loc = b.getUnknownLoc();
  StepValues step;
  Value current;
  std::map<std::pair<int, int64_t>, Value> intConstants;
  std::map<double, Value> floatConstants;
  Value null;
  llvm::DenseMap<Value, TensorRef> refs;
};

/// fsdprt dtype code of an element type, or -1.
int32_t dtypeCode(Type elementType);
/// fsdprt dtype code of a ranked tensor value's element type, or -1.
int32_t dtypeOf(Value tensor);

/// Emits the runtime call(s) of a compute op; fails if it has none
/// (KernelCalls.cpp).
LogicalResult emitKernel(CallBuilder &calls, Operation *op);

/// Whether emitKernel has an emitter for ops named `name`: read from the
/// table it dispatches through, so the two cannot disagree.
bool hasKernelEmitter(OperationName name);

/// Emits the runtime call(s) of an optimizer op and returns true, or false
/// for any other op (OptimizerCalls.cpp).
bool emitOptimizer(CallBuilder &calls, Operation *op);

/// Whether `op` is an update emitMultiTensorUpdates takes (SGD, AdamW,
/// Lion).
bool isMultiTensorUpdate(Operation *op);

/// Emits the updates `ops` (isMultiTensorUpdate; their tensors disjoint)
/// as one call for each set of them, or of their parameter-group
/// segments, with the same gradient dtype, hyperparameters and skip flag:
/// torch.optim's fused=True (OptimizerCalls.cpp).
void emitMultiTensorUpdates(CallBuilder &calls, ArrayRef<Operation *> ops);

/// Emits the runtime calls of a collective op (CollectiveCalls.cpp).
LogicalResult emitCollective(CallBuilder &calls, Operation *op);

} // namespace mlir::fsdp

#endif
