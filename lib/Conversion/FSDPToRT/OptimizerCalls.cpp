//===- OptimizerCalls.cpp - the optimizer updates as runtime calls --------===//
//
// One call per optimizer op, or with parameter groups one per segment of
// the flat parameter: each rank updates the part of the segment its shard
// holds, an element range computed at run time from its rank, so that one
// program serves every rank. With fused-optimizer, the SGD / AdamW / Lion
// calls of a run of updates that share their scalars become one
// multi-tensor call.
//
//===----------------------------------------------------------------------===//

#include "CallBuilder.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// One segment of an update: its lr scale and weight decay, and the
/// elements of this rank's shard it covers, [begin, begin + count) (null
/// begin and count: the whole shard).
struct Segment {
  double lrScale, weightDecay;
  Value begin, count;
};

int64_t shardNumel(Value param) {
  return cast<RankedTensorType>(param.getType()).getNumElements();
}

/// The elements a segment updates.
Value countOf(CallBuilder &calls, const Segment &s, Value param) {
  return s.count ? s.count : calls.i64(shardNumel(param));
}

/// How many shards the flat parameter `param` (a step argument) is cut
/// into: the shard group's size, or 1 for a rank-local unit's.
int64_t shardsOf(Value param) {
  auto arg = cast<BlockArgument>(param);
  auto step = cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return step.getArgAttr(arg.getArgNumber(), kRankLocalArg)
             ? 1
             : step->getAttrOfType<MeshAttr>(kMeshAttr).getShard();
}

/// The flat index of this rank's first element of `param`: rank s of a
/// shard group holds chunk s (a rank-local unit holds it all).
Value shardBase(CallBuilder &calls, Value param) {
  if (shardsOf(param) == 1)
    return calls.i64(0);
  OpBuilder &b = calls.builder();
  Location loc = calls.location();
  // Which shard this rank holds: its shard communicator's rank.
  Value shardIndex = rt::CommRankOp::create(b, loc, b.getI64Type(),
                                            calls.context(), calls.comm(false))
                         .getResult();
  return arith::MulIOp::create(b, loc, shardIndex,
                               calls.i64(shardNumel(param)));
}

/// The segments of `op` on this rank's shard, or one covering the shard.
template <typename OptimizerOp>
SmallVector<Segment> segmentsOf(CallBuilder &calls, OptimizerOp op) {
  auto starts = op.getSegmentStarts();
  if (!starts)
    return {{op.getLrScale().convertToDouble(),
             op.getWeightDecay().convertToDouble(), Value(), Value()}};
  int64_t shards = shardsOf(op.getParam());
  int64_t n = shardNumel(op.getParam());
  OpBuilder &b = calls.builder();
  Location loc = calls.location();
  Value base = shardBase(calls, op.getParam());
  auto clampToShard = [&](int64_t flatOffset) -> Value {
    Value local = arith::SubIOp::create(b, loc, calls.i64(flatOffset), base);
    return arith::MinSIOp::create(
        b, loc, arith::MaxSIOp::create(b, loc, local, calls.i64(0)),
        calls.i64(n));
  };
  // Each boundary clamped to the shard once; segment k is between k and
  // k + 1.
  SmallVector<Value> bounds;
  for (int64_t start : *starts)
    bounds.push_back(clampToShard(start));
  bounds.push_back(clampToShard(shards * n));
  SmallVector<Segment> out;
  for (size_t k = 0; k < starts->size(); ++k)
    out.push_back({(*op.getSegmentLrScales())[k],
                   (*op.getSegmentWeightDecays())[k], bounds[k],
                   arith::SubIOp::create(b, loc, bounds[k + 1], bounds[k])});
  return out;
}

/// (buffer, byte offset) of `tensor`'s element `begin` (null: its first);
/// a null buffer and offset 0 for an absent tensor.
void pushElement(CallBuilder &calls, SmallVectorImpl<Value> &args, Value tensor,
                 Value begin) {
  if (!tensor)
    return calls.pushNull(args);
  if (!begin)
    return calls.pushTensor(args, tensor);
  TensorRef ref = calls.ref(tensor);
  auto type = cast<RankedTensorType>(tensor.getType());
  OpBuilder &b = calls.builder();
  Location loc = calls.location();
  Value bytes = arith::MulIOp::create(
      b, loc, begin, calls.i64(elementBytes(type.getElementType())));
  args.push_back(ref.buffer);
  args.push_back(arith::AddIOp::create(b, loc, calls.i64(ref.offset), bytes));
}

enum class UpdateRule { Sgd, AdamW, Lion };

/// One update call before it is emitted: its tensors (param, grad, then
/// the states; null: absent), the part of them it updates, and the
/// operands after `step` (the hyperparameters and the skip flag). Calls
/// whose gradient dtype, hyperparameters (cached constants: equal values
/// are the same Value) and flag agree can share one multi-tensor call.
struct UpdateCall {
  UpdateRule rule;
  int32_t gradDtype;
  SmallVector<Value, 4> tensors;
  Segment segment;
  SmallVector<Value, 6> hyper;
  Value skip;

  auto key() const {
    return std::make_tuple(rule, gradDtype, ArrayRef<Value>(hyper), skip);
  }
};

/// The update calls of one optimizer op, a call per segment.
template <typename OptimizerOp>
SmallVector<UpdateCall>
updateCalls(CallBuilder &calls, OptimizerOp op, UpdateRule rule,
            ArrayRef<Value> tensors,
            function_ref<SmallVector<Value, 6>(const Segment &)> hyper) {
  SmallVector<UpdateCall> out;
  for (const Segment &s : segmentsOf(calls, op))
    out.push_back({rule, dtypeOf(op.getGrad()),
                   SmallVector<Value, 4>(tensors), s, hyper(s),
                   op.getSkipIf()});
  return out;
}

/// The update calls of `op`, or none if it is not an SGD, AdamW or Lion
/// update.
SmallVector<UpdateCall> updateCallsOf(CallBuilder &calls, Operation *op) {
  auto lrOf = [&](auto update, const Segment &s) {
    return calls.f64(update.getLr().convertToDouble() * s.lrScale);
  };
  auto f64 = [&](APFloat v) { return calls.f64(v.convertToDouble()); };
  if (auto o = dyn_cast<AdamWStepOp>(op))
    return updateCalls(
        calls, o, UpdateRule::AdamW,
        {o.getParam(), o.getGrad(), o.getExpAvg(), o.getExpAvgSq()},
        [&](const Segment &s) -> SmallVector<Value, 6> {
          return {lrOf(o, s), f64(o.getBeta1()), f64(o.getBeta2()),
                  f64(o.getEps()), calls.f64(s.weightDecay),
                  calls.i32(o.getL2WeightDecay())};
        });
  if (auto o = dyn_cast<LionStepOp>(op))
    return updateCalls(calls, o, UpdateRule::Lion,
                       {o.getParam(), o.getGrad(), o.getExpAvg()},
                       [&](const Segment &s) -> SmallVector<Value, 6> {
                         return {lrOf(o, s), f64(o.getBeta1()),
                                 f64(o.getBeta2()), calls.f64(s.weightDecay)};
                       });
  if (auto o = dyn_cast<SGDStepOp>(op))
    return updateCalls(calls, o, UpdateRule::Sgd,
                       {o.getParam(), o.getGrad(), o.getMomentumBuffer()},
                       [&](const Segment &s) -> SmallVector<Value, 6> {
                         return {lrOf(o, s), f64(o.getMomentum()),
                                 f64(o.getDampening()),
                                 calls.f64(s.weightDecay),
                                 calls.i32(o.getNesterov())};
                       });
  return {};
}

/// rt.call of the rule's update over one tensor, or (multi) a list.
void callUpdate(CallBuilder &calls, UpdateRule rule, bool multi,
                ArrayRef<Value> args) {
  switch (rule) {
  case UpdateRule::Sgd:
    return calls.call(multi ? "sgd_multi_step" : "sgd_step", args);
  case UpdateRule::AdamW:
    return calls.call(multi ? "adamw_multi_step" : "adamw_step", args);
  case UpdateRule::Lion:
    return calls.call(multi ? "lion_multi_step" : "lion_step", args);
  }
  llvm_unreachable("an update rule without its entry points");
}

/// rt.call @<rule>_step(grad dtype, the tensors, numel, step, hyper, skip).
void emitUpdateCall(CallBuilder &calls, const UpdateCall &c) {
  SmallVector<Value> args = {calls.i32(c.gradDtype)};
  for (Value tensor : c.tensors)
    pushElement(calls, args, tensor, c.segment.begin);
  args.append({countOf(calls, c.segment, c.tensors[0]), calls.stepCount()});
  args.append(c.hyper.begin(), c.hyper.end());
  pushElement(calls, args, c.skip, Value());
  callUpdate(calls, c.rule, /*multi=*/false, args);
}

/// rt.call @<rule>_multi_step(grad dtype, count, buffers, offsets, numels,
/// step, hyper, skip) of calls that share their key.
void emitMultiUpdateCall(CallBuilder &calls, ArrayRef<UpdateCall> group) {
  const UpdateCall &first = group.front();
  SmallVector<Value> buffers, offsets, numels;
  for (const UpdateCall &c : group) {
    for (Value tensor : c.tensors) {
      SmallVector<Value, 2> ref;
      pushElement(calls, ref, tensor, c.segment.begin);
      buffers.push_back(ref[0]);
      offsets.push_back(ref[1]);
    }
    numels.push_back(countOf(calls, c.segment, c.tensors[0]));
  }
  SmallVector<Value> args = {
      calls.i32(first.gradDtype), calls.i64(group.size()),
      calls.array(buffers),       calls.array(offsets),
      calls.array(numels),        calls.stepCount()};
  args.append(first.hyper.begin(), first.hyper.end());
  pushElement(calls, args, first.skip, Value());
  callUpdate(calls, first.rule, /*multi=*/true, args);
}

/// Adafactor's ops read the layout, and where this rank's elements start
/// in the flat parameter (plus `begin`, a segment's start in the shard).
void pushLayout(CallBuilder &calls, SmallVectorImpl<Value> &args,
                ArrayRef<int64_t> layout, Value param, Value begin) {
  Value flatBegin = shardBase(calls, param);
  if (begin)
    flatBegin = arith::AddIOp::create(calls.builder(), calls.location(),
                                      flatBegin, begin);
  args.append({flatBegin, calls.i64(layout.size()), calls.array(layout)});
}

void emitAdafactorStats(CallBuilder &calls, AdafactorStatsOp op) {
  SmallVector<Value> args = {calls.i32(dtypeOf(op.getGrad()))};
  calls.pushTensor(args, op.getParam());
  calls.pushTensor(args, op.getGrad());
  args.push_back(calls.i64(shardNumel(op.getParam())));
  pushLayout(calls, args, op.getLayout(), op.getParam(), Value());
  calls.pushTensor(args, op.getStats());
  calls.call("adafactor_stats", args);
}

void emitAdafactorFactor(CallBuilder &calls, AdafactorFactorOp op) {
  SmallVector<Value> args = {calls.i32(dtypeOf(op.getGrad()))};
  calls.pushTensor(args, op.getGrad());
  args.push_back(calls.i64(shardNumel(op.getGrad())));
  pushLayout(calls, args, op.getLayout(), op.getParam(), Value());
  for (Value tensor : {op.getState(), op.getStats(), op.getUpdateSq()})
    calls.pushTensor(args, tensor);
  args.append({calls.stepCount(),
               calls.f64(op.getBeta2Decay().convertToDouble()),
               calls.f64(op.getEps1().convertToDouble())});
  pushElement(calls, args, op.getSkipIf(), Value());
  calls.call("adafactor_factor", args);
}

void emitAdafactorApply(CallBuilder &calls, AdafactorApplyOp op) {
  for (const Segment &s : segmentsOf(calls, op)) {
    SmallVector<Value> args = {calls.i32(dtypeOf(op.getGrad()))};
    pushElement(calls, args, op.getParam(), s.begin);
    pushElement(calls, args, op.getGrad(), s.begin);
    args.push_back(countOf(calls, s, op.getParam()));
    pushLayout(calls, args, op.getLayout(), op.getParam(), s.begin);
    for (Value tensor : {op.getState(), op.getStats(), op.getUpdateSq()})
      calls.pushTensor(args, tensor);
    args.append(
        {calls.stepCount(), calls.f64(op.getLr().convertToDouble() * s.lrScale),
         calls.f64(op.getEps1().convertToDouble()),
         calls.f64(op.getEps2().convertToDouble()),
         calls.f64(op.getD().convertToDouble()), calls.f64(s.weightDecay)});
    pushElement(calls, args, op.getSkipIf(), Value());
    calls.call("adafactor_apply", args);
  }
}

} // namespace

bool fsdp::emitOptimizer(CallBuilder &calls, Operation *op) {
  if (isMultiTensorUpdate(op)) {
    for (const UpdateCall &c : updateCallsOf(calls, op))
      emitUpdateCall(calls, c);
    return true;
  }
  if (auto stats = dyn_cast<AdafactorStatsOp>(op))
    return emitAdafactorStats(calls, stats), true;
  if (auto factor = dyn_cast<AdafactorFactorOp>(op))
    return emitAdafactorFactor(calls, factor), true;
  if (auto apply = dyn_cast<AdafactorApplyOp>(op))
    return emitAdafactorApply(calls, apply), true;
  return false;
}

bool fsdp::isMultiTensorUpdate(Operation *op) {
  return isa<AdamWStepOp, SGDStepOp, LionStepOp>(op);
}

void fsdp::emitMultiTensorUpdates(CallBuilder &calls, ArrayRef<Operation *> ops) {
  // The calls in order, grouped by key in order of first appearance.
  SmallVector<SmallVector<UpdateCall>> groups;
  for (Operation *op : ops)
    for (UpdateCall &c : updateCallsOf(calls, op)) {
      auto same = llvm::find_if(groups, [&](const auto &g) {
        return g.front().key() == c.key();
      });
      if (same == groups.end())
        groups.push_back({std::move(c)});
      else
        same->push_back(std::move(c));
    }
  for (ArrayRef<UpdateCall> group : groups) {
    if (group.size() == 1)
      emitUpdateCall(calls, group.front());
    else
      emitMultiUpdateCall(calls, group);
  }
}
