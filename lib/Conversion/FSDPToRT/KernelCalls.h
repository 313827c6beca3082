//===- KernelCalls.h - the runtime call of each compute op ------*- C++ -*-===//
//
// What the kernel emitters of each family share: one table from op kind to
// emitter, which emitKernel dispatches through and hasKernelEmitter answers
// from (so the completeness test and the lowering read the same list), the
// helpers that build a call's arguments, and one function per family that
// adds its emitters. The families and their files follow the runtime's C
// API (runtime/src/CApi*.cpp):
//
//   KernelCallsLinear.cpp     linear, matmul
//   KernelCallsPointwise.cpp  binary, unary, scale, activations, dropout, cast
//   KernelCallsNorm.cpp       layer norm, RMS norm, batch norm, softmax
//   KernelCallsConv.cpp       convolution and its gradients
//   KernelCallsAttention.cpp  attention (packed too), embedding, RoPE
//   KernelCallsLayout.cpp     slice, pad, transpose, split, concat, reductions
//   KernelCallsLoss.cpp       cross-entropy, MSE
//   KernelCallsRouting.cpp    top-k, sort, histc, inverse permutation,
//                             grouped GEMM (mixture of experts)
//   KernelCallsCore.cpp       constants, copies, the step counter
//   KernelCallsOptimizer.cpp  loss scaling, clipping, the updates
//                             (OptimizerCalls.cpp)
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_CONVERSION_FSDPTORT_KERNELCALLS_H
#define FSDP_LIB_CONVERSION_FSDPTORT_KERNELCALLS_H

#include "CallBuilder.h"

#include "llvm/ADT/DenseMap.h"

#include <functional>

namespace mlir::fsdp {

/// Emits the runtime call(s) of one op of the kind it was added for.
using KernelEmitter = std::function<LogicalResult(CallBuilder &, Operation *)>;

/// The kernel emitters by op kind.
class KernelEmitters {
public:
  /// Adds `emit(calls, op)` as the emitter of each kind in Ops; `emit` takes
  /// the op as that kind.
  template <typename... Ops, typename Fn> void add(Fn emit) {
    (addOne<Ops>(emit), ...);
  }

  /// The emitter of ops named `name`, or null.
  const KernelEmitter *lookup(OperationName name) const {
    auto it = table.find(name.getTypeID());
    return it == table.end() ? nullptr : &it->second;
  }

private:
  template <typename OpTy, typename Fn> void addOne(Fn emit) {
    [[maybe_unused]] bool added =
        table
            .try_emplace(TypeID::get<OpTy>(),
                         [emit](CallBuilder &calls, Operation *op) {
                           return emit(calls, cast<OpTy>(op));
                         })
            .second;
    assert(added && "an op kind with two kernel emitters");
  }

  llvm::DenseMap<TypeID, KernelEmitter> table;
};

/// Each family's emitters (KernelCalls<Family>.cpp).
void addLinearKernels(KernelEmitters &k);
void addPointwiseKernels(KernelEmitters &k);
void addNormKernels(KernelEmitters &k);
void addConvKernels(KernelEmitters &k);
void addAttentionKernels(KernelEmitters &k);
void addLayoutKernels(KernelEmitters &k);
void addLossKernels(KernelEmitters &k);
void addRoutingKernels(KernelEmitters &k);
void addCoreKernels(KernelEmitters &k);
void addOptimizerKernels(KernelEmitters &k);

namespace kernel_calls {

inline RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
inline ArrayRef<int64_t> shapeOf(Value v) { return tensorType(v).getShape(); }
inline int64_t numel(Value v) { return tensorType(v).getNumElements(); }
/// Product of all dims but the last.
inline int64_t rows(Value v) {
  ArrayRef<int64_t> s = shapeOf(v);
  return s.empty() ? 1 : numel(v) / s.back();
}
inline int64_t lastDim(Value v) {
  ArrayRef<int64_t> s = shapeOf(v);
  return s.empty() ? 1 : s.back();
}

/// Builds the operand list of one call: tensors as (buffer, offset).
struct Args {
  explicit Args(CallBuilder &l) : l(l) {}
  CallBuilder &l;
  SmallVector<Value> values;
  Args &t(Value tensor) {
    l.pushTensor(values, tensor);
    return *this;
  }
  /// The tensor `bytes` into its storage (a slice of it).
  Args &t(Value tensor, int64_t bytes) {
    TensorRef r = l.ref(tensor);
    values.push_back(r.buffer);
    values.push_back(l.i64(r.offset + bytes));
    return *this;
  }
  Args &opt(Value tensor) {
    if (tensor)
      l.pushTensor(values, tensor);
    else
      l.pushNull(values);
    return *this;
  }
  Args &i32(int64_t v) {
    values.push_back(l.i32(v));
    return *this;
  }
  Args &i64(int64_t v) {
    values.push_back(l.i64(v));
    return *this;
  }
  Args &f64(double v) {
    values.push_back(l.f64(v));
    return *this;
  }
  Args &shape(Value tensor) {
    values.push_back(l.i32(shapeOf(tensor).size()));
    values.push_back(l.array(shapeOf(tensor)));
    return *this;
  }
  Args &string(StringRef text) {
    values.push_back(l.string(text));
    return *this;
  }
  Args &array(ArrayRef<int64_t> v) {
    values.push_back(l.array(v));
    return *this;
  }
  Args &value(Value v) {
    values.push_back(v);
    return *this;
  }
  /// What keys a random site (a dropout mask, a draw): the run's seed, the
  /// step count and the site's rng_id with the rank folded in.
  Args &randomKey(int64_t rngId) {
    values.push_back(l.seed());
    values.push_back(l.stepCount());
    values.push_back(l.rngKey(rngId));
    return *this;
  }
  void call(StringRef name) { l.call(name, values); }
};

} // namespace kernel_calls
} // namespace mlir::fsdp

#endif // FSDP_LIB_CONVERSION_FSDPTORT_KERNELCALLS_H
