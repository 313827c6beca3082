//===- PadVocab.cpp - pad a language model head's vocabulary --------------===//
//
// GPT-2's 50257-word vocabulary leaves the lm head's GEMMs misaligned:
// cuBLAS runs them several times slower, and a backend that pads them at
// run time copies the ~800 MB logits at every call. Padding the head's
// weight at compile time (nanoGPT's 50304) makes the logits an aligned
// width that the compiler's memory plan counts, and the losses told
// `num_classes` ignore the padding columns.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPADVOCABPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A head's logits: the values that carry its class dimension last (the
/// head's result, then reshapes, casts, slices of other dimensions and the
/// results of calls to a module returning them), the cross-entropies
/// reading them, every other use (which gets the unpadded logits back),
/// and the module results that carry them.
struct Logits {
  SetVector<Value> values;
  SmallVector<Operation *> losses;
  SmallVector<OpOperand *> otherUses;
  SmallVector<std::pair<ForwardOp, unsigned>> returned;
};

/// The fsdp.call ops of each called forward of a model.
using Callers = llvm::DenseMap<Operation *, SmallVector<CallOp>>;

Callers callersIn(ModelOp model) {
  SymbolTableCollection tables;
  Callers callers;
  model.walk([&](CallOp call) {
    if (auto callee = dyn_cast_or_null<NNModuleOp>(tables.lookupSymbolIn(
            call->getParentOfType<NNModuleOp>(), call.getCallee())))
      if (ForwardOp forward = callee.lookupForward(call.getOperandTypes()))
        callers[forward].push_back(call);
  });
  return callers;
}

/// The last dimension of `v` (-1 for a 0-d tensor).
int64_t lastDim(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return type.getRank() ? type.getShape().back() : -1;
}

/// Whether `op` keeps `classes` as the last dimension of its result.
bool carriesClasses(Operation *op, int64_t classes) {
  if (auto slice = dyn_cast<nn::SliceOp>(op))
    return static_cast<int64_t>(slice.getDim()) !=
           slice.getInput().getType().getRank() - 1;
  return isa<nn::ReshapeOp, nn::CastOp>(op) &&
         lastDim(op->getOperand(0)) == classes &&
         lastDim(op->getResult(0)) == classes;
}

Logits logitsOf(Value head, int64_t classes, const Callers &callers) {
  Logits logits;
  logits.values.insert(head);
  for (size_t i = 0; i < logits.values.size(); ++i)
    for (OpOperand &use : logits.values[i].getUses()) {
      Operation *user = use.getOwner();
      auto ce = dyn_cast<nn::CrossEntropyOp>(user);
      auto forward = user->getParentOfType<ForwardOp>();
      if (ce && use.getOperandNumber() == 0 && !ce.getNumClasses()) {
        logits.losses.push_back(user);
      } else if (carriesClasses(user, classes)) {
        logits.values.insert(user->getResult(0));
      } else if (isa<ReturnOp>(user) && callers.count(forward)) {
        // A called module's result (Hugging Face's lm_head): the logits go
        // on at each call of this forward.
        unsigned index = use.getOperandNumber();
        logits.returned.push_back({forward, index});
        for (CallOp call : callers.lookup(forward))
          logits.values.insert(call.getResult(index));
      } else {
        logits.otherUses.push_back(&use);
      }
    }
  return logits;
}

/// `type` with its last dimension `size`.
RankedTensorType withLastDim(Type type, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape.back() = size;
  return t.clone(shape);
}

/// `v` zero-padded to `size` along `dim`, built before `before`.
Value padded(OpBuilder &b, Operation *before, Value v, int64_t dim,
             int64_t size) {
  b.setInsertionPoint(before);
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  int64_t high = size - shape[dim];
  shape[dim] = size;
  return nn::PadOp::create(b, before->getLoc(), type.clone(shape), v,
                           b.getI64IntegerAttr(dim), b.getI64IntegerAttr(0),
                           b.getI64IntegerAttr(high), b.getF64FloatAttr(0.0));
}

/// Pads `headOp`'s classes to `width`: its weight operand (whose dimension
/// `dim` holds the classes) and bias read zero-padded, its logits that
/// wide, the losses told the classes, other uses sliced back.
void pad(Operation *headOp, OpOperand &weight, int64_t dim, OpOperand *bias,
         const Logits &logits, int64_t classes, int64_t width) {
  OpBuilder b(headOp->getContext());
  weight.set(padded(b, headOp, weight.get(), dim, width));
  if (bias)
    bias->set(padded(b, headOp, bias->get(), 0, width));
  for (Value v : logits.values)
    v.setType(withLastDim(v.getType(), width));
  for (auto [forward, index] : logits.returned) {
    FunctionType type = forward.getFunctionType();
    SmallVector<Type> results(type.getResults());
    results[index] = withLastDim(results[index], width);
    forward.setFunctionType(
        FunctionType::get(type.getContext(), type.getInputs(), results));
  }
  for (Operation *loss : logits.losses)
    cast<nn::CrossEntropyOp>(loss).setNumClasses(classes);
  for (OpOperand *use : logits.otherUses) {
    Value v = use->get();
    b.setInsertionPoint(use->getOwner());
    int64_t last = cast<RankedTensorType>(v.getType()).getRank() - 1;
    use->set(nn::SliceOp::create(
        b, use->getOwner()->getLoc(), withLastDim(v.getType(), classes), v,
        b.getI64IntegerAttr(last), b.getI64IntegerAttr(0),
        b.getI64IntegerAttr(classes)));
  }
}

struct FSDPPadVocabPass
    : public fsdp::impl::FSDPPadVocabPassBase<FSDPPadVocabPass> {
  using Base::Base;

  void runOnOperation() override {
    if (multiple < 1 || minClasses < 1) {
      emitError(getOperation().getLoc(), "fsdp-pad-vocab: multiple and "
                                         "min-classes must be positive, got ")
          << static_cast<int64_t>(multiple) << " and "
          << static_cast<int64_t>(minClasses);
      return signalPassFailure();
    }
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      Callers callers = callersIn(model);
      model.walk([&](ForwardOp forward) {
        forward.walk([&](Operation *op) { padHead(op, callers); });
      });
    }
  }

  /// Pads `op` where it is a head whose logits reach a cross-entropy:
  /// nn.linear (weight [classes, in]) or nn.matmul by a matrix ([in,
  /// classes], or [classes, in] transposed).
  void padHead(Operation *op, const Callers &callers) {
    OpOperand *weight = nullptr, *bias = nullptr;
    int64_t dim = 0; // the weight's dimension that holds the classes
    if (auto linear = dyn_cast<nn::LinearOp>(op)) {
      weight = &linear.getWeightMutable();
      if (linear.getBias())
        bias = &linear.getBiasMutable()[0];
    } else if (auto matmul = dyn_cast<nn::MatmulOp>(op);
               matmul && matmul.getRhs().getType().getRank() == 2 &&
               !matmul.getTransposeLhs()) {
      weight = &matmul.getRhsMutable();
      dim = matmul.getTransposeRhs() ? 0 : 1;
    } else {
      return;
    }
    int64_t classes = lastDim(op->getResult(0));
    int64_t width = (classes + multiple - 1) / multiple * multiple;
    if (width == classes || classes < minClasses)
      return;
    Logits logits = logitsOf(op->getResult(0), classes, callers);
    if (!logits.losses.empty())
      pad(op, *weight, dim, bias, logits, classes, width);
  }
};

} // namespace
