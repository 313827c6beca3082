//===- StepFusions.cpp - rewrites of a built train step -------------------===//
//
// The fusions fsdp-build-train-step applies after building (StepFusions.h).
//
//===----------------------------------------------------------------------===//

#include "StepFusions.h"

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::fsdp;

void fsdp::splitLinearGradsWithoutInputGrad(Block &body) {
  for (auto op : llvm::make_early_inc_range(body.getOps<nn::LinearGradOp>())) {
    if (!op.getInputGrad().use_empty())
      continue;
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto dw = nn::MatmulOp::create(b, loc, op.getGrad(), op.getInput(),
                                   /*transpose_lhs=*/true,
                                   /*transpose_rhs=*/false);
    auto db = nn::ReduceSumOp::create(b, loc, op.getGrad(),
                                      b.getDenseI64ArrayAttr({0}),
                                      /*keepdim=*/false);
    for (Operation *made : {dw.getOperation(), db.getOperation()})
      made->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    op.getWeightGrad().replaceAllUsesWith(dw.getResult());
    op.getBiasGrad().replaceAllUsesWith(db.getResult());
    op.erase();
  }
}

/// `v` computed before `anchor`: itself where it is defined there, else a
/// copy of the ops after `anchor` that compute it when they are the
/// backward's own side-effect-free seed (a constant, times the loss scale),
/// made with `anchor`'s attributes. Null where they read a forward value
/// (a loss term scaled by the model, whose cotangent the forward computes)
/// or have effects.
static Value computedBefore(Value v, Operation *anchor) {
  Block *block = anchor->getBlock();
  auto after = [&](Operation *op) {
    return op->getBlock() == block && !op->isBeforeInBlock(anchor);
  };
  Operation *def = v.getDefiningOp();
  if (!def || !after(def))
    return v;
  SetVector<Operation *> slice;
  BackwardSliceOptions options;
  options.inclusive = true;
  options.filter = after;
  if (failed(getBackwardSlice(v, &slice, options)))
    return {};
  for (Operation *op : slice) {
    if (getPhase(op) != kBackward || !isMemoryEffectFree(op) ||
        op->getNumRegions())
      return {};
    for (Value operand : op->getOperands()) {
      Operation *source = operand.getDefiningOp();
      if (source && source->getBlock() != block)
        return {};
    }
  }
  OpBuilder b(anchor);
  IRMapping copies;
  for (Operation *op : slice) // defs before uses
    b.clone(*op, copies)
        ->setDiscardableAttrs(anchor->getDiscardableAttrDictionary());
  return copies.lookup(v);
}

void fsdp::fuseCrossEntropyWithGrad(Block &body) {
  for (auto grad :
       llvm::make_early_inc_range(body.getOps<nn::CrossEntropyGradOp>())) {
    nn::CrossEntropyOp loss;
    for (Operation *user : grad.getLogits().getUsers())
      if (auto ce = dyn_cast<nn::CrossEntropyOp>(user))
        if (ce.getTargets() == grad.getTargets() &&
            ce.getReduction() == grad.getReduction() &&
            ce.getIgnoreIndex() == grad.getIgnoreIndex() &&
            ce.getNumClasses() == grad.getNumClasses() &&
            ce->getBlock() == &body && ce->isBeforeInBlock(grad))
          loss = ce;
    if (!loss)
      continue;
    Value cotangent = computedBefore(grad.getGrad(), loss);
    if (!cotangent)
      continue;
    OpBuilder b(loss);
    auto fused = nn::CrossEntropyWithGradOp::create(
        b, loss.getLoc(), loss.getLogits(), loss.getTargets(), cotangent,
        loss.getReductionAttr(), loss.getIgnoreIndexAttr(),
        loss.getNumClassesAttr());
    fused->setDiscardableAttrs(loss->getDiscardableAttrDictionary());
    loss.getResult().replaceAllUsesWith(fused.getLoss());
    grad.getResult().replaceAllUsesWith(fused.getLogitsGrad());
    grad.erase();
    loss.erase();
  }
}

/// Whether `v` is available just before `at`, an op of the step's body.
static bool availableBefore(Value v, Operation *at) {
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != at->getBlock())
    return true;
  return def->isBeforeInBlock(at);
}

void fsdp::fuseAddLayerNorm(Block &body) {
  for (auto norm : llvm::make_early_inc_range(body.getOps<nn::LayerNormOp>())) {
    auto add = norm.getInput().getDefiningOp<nn::AddOp>();
    if (!add || add->getBlock() != &body ||
        add.getLhs().getType() != add.getRhs().getType() ||
        add.getLhs().getType() != add.getResult().getType() ||
        add->getDiscardableAttrDictionary() !=
            norm->getDiscardableAttrDictionary())
      continue;
    // At the add when the norm's weight and bias exist there, else at the
    // norm when nothing reads the sum before it.
    Operation *at = add;
    for (Value v : {norm.getWeight(), norm.getBias()})
      if (v && !availableBefore(v, add))
        at = norm;
    if (at == norm && llvm::any_of(add->getUsers(), [&](Operation *user) {
          return user != norm && user->getBlock() == &body &&
                 user->isBeforeInBlock(norm);
        }))
      continue;
    OpBuilder b(at);
    auto fused = nn::AddLayerNormOp::create(
        b, norm.getLoc(), add.getLhs(), add.getRhs(), norm.getWeight(),
        norm.getBias(), norm.getEpsilonAttr());
    fused->setDiscardableAttrs(norm->getDiscardableAttrDictionary());
    norm.getResult().replaceAllUsesWith(fused.getResult());
    norm.erase();
    add.getResult().replaceAllUsesWith(fused.getSum());
    add.erase();
  }
}

void fsdp::fuseAddLayerNormGrad(Block &body) {
  for (auto grad :
       llvm::make_early_inc_range(body.getOps<nn::LayerNormGradOp>())) {
    Value inputGrad = grad.getInputGrad();
    if (!inputGrad.hasOneUse())
      continue;
    auto add = dyn_cast<nn::AddOp>(*inputGrad.getUsers().begin());
    if (!add || add->getBlock() != &body ||
        add.getLhs().getType() != add.getRhs().getType() ||
        add.getLhs().getType() != add.getResult().getType() ||
        add->getDiscardableAttrDictionary() !=
            grad->getDiscardableAttrDictionary())
      continue;
    Value addend = add.getLhs() == inputGrad ? add.getRhs() : add.getLhs();
    if (addend.getDefiningOp() == grad)
      continue;
    // At the norm's gradient when the addend exists there, else at the add
    // when nothing (nested ops included) reads the weight or bias gradient
    // before it.
    Operation *at = grad;
    if (!availableBefore(addend, grad))
      at = add;
    if (at == add && llvm::any_of(grad->getUsers(), [&](Operation *user) {
          Operation *top = body.findAncestorOpInBlock(*user);
          return user != add && top && top->isBeforeInBlock(add);
        }))
      continue;
    OpBuilder b(at);
    auto fused = nn::AddLayerNormGradOp::create(
        b, grad.getLoc(), grad.getGrad(), grad.getInput(), addend,
        grad.getWeight(), grad.getEpsilonAttr());
    fused->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
    add.getResult().replaceAllUsesWith(fused.getInputGrad());
    add.erase();
    grad.getWeightGrad().replaceAllUsesWith(fused.getWeightGrad());
    grad.getBiasGrad().replaceAllUsesWith(fused.getBiasGrad());
    grad.erase();
  }
}

/// linear then gelu(tanh) of its result: one nn.linear_gelu at the linear.
static void fuseLinearGelu(Block &body) {
  for (auto gelu : llvm::make_early_inc_range(body.getOps<nn::GeluOp>())) {
    auto linear = gelu.getInput().getDefiningOp<nn::LinearOp>();
    if (gelu.getApproximate() != nn::GeluApproximation::tanh || !linear ||
        linear->getBlock() != &body ||
        linear->getDiscardableAttrDictionary() !=
            gelu->getDiscardableAttrDictionary())
      continue;
    // The linear's operands exist there and every reader of either result
    // comes after it.
    OpBuilder b(linear);
    auto fused = nn::LinearGeluOp::create(
        b, b.getFusedLoc({linear.getLoc(), gelu.getLoc()}), linear.getInput(),
        linear.getWeight(), linear.getBias());
    fused->setDiscardableAttrs(gelu->getDiscardableAttrDictionary());
    gelu.getResult().replaceAllUsesWith(fused.getResult());
    gelu.erase();
    linear.getResult().replaceAllUsesWith(fused.getPre());
    linear.erase();
  }
}

/// gelu_grad(tanh) of a linear_grad's input gradient (possibly reshaped to
/// the GELU's shape), read by nothing else: one nn.linear_gelu_grad at the
/// linear_grad, reading the GELU's input reshaped to [rows, in].
static void fuseLinearGeluGrad(Block &body) {
  for (auto geluGrad :
       llvm::make_early_inc_range(body.getOps<nn::GeluGradOp>())) {
    if (geluGrad.getApproximate() != nn::GeluApproximation::tanh)
      continue;
    DictionaryAttr attrs = geluGrad->getDiscardableAttrDictionary();
    Value grad = geluGrad.getGrad();
    auto reshape = grad.getDefiningOp<nn::ReshapeOp>();
    Value inputGrad = reshape ? reshape.getInput() : grad;
    auto linearGrad = inputGrad.getDefiningOp<nn::LinearGradOp>();
    if (!linearGrad || linearGrad->getBlock() != &body ||
        linearGrad.getInputGrad() != inputGrad || !inputGrad.hasOneUse() ||
        (reshape && !grad.hasOneUse()) ||
        linearGrad->getDiscardableAttrDictionary() != attrs ||
        (reshape && reshape->getDiscardableAttrDictionary() != attrs) ||
        !availableBefore(geluGrad.getInput(), linearGrad))
      continue;
    OpBuilder b(linearGrad);
    Location loc = b.getFusedLoc({linearGrad.getLoc(), geluGrad.getLoc()});
    auto reshaped = [&](Value v, Type type) -> Value {
      if (v.getType() == type)
        return v;
      auto op = nn::ReshapeOp::create(b, loc, type, v);
      op->setDiscardableAttrs(attrs);
      return op;
    };
    Value pre = reshaped(geluGrad.getInput(), inputGrad.getType());
    auto fused = nn::LinearGeluGradOp::create(b, loc, linearGrad.getGrad(),
                                              linearGrad.getInput(),
                                              linearGrad.getWeight(), pre);
    fused->setDiscardableAttrs(attrs);
    geluGrad.getResult().replaceAllUsesWith(
        reshaped(fused.getInputGrad(), geluGrad.getType()));
    geluGrad.erase();
    if (reshape)
      reshape.erase();
    linearGrad.getWeightGrad().replaceAllUsesWith(fused.getWeightGrad());
    linearGrad.getBiasGrad().replaceAllUsesWith(fused.getBiasGrad());
    linearGrad.erase();
  }
}

void fsdp::fuseBiasGelu(Block &body) {
  fuseLinearGelu(body);
  fuseLinearGeluGrad(body);
}
