//===- OptimizerCalls.cpp - the optimizer updates as runtime calls --------===//
//
// One call per optimizer op, or with parameter groups one per segment of
// the flat parameter: each rank updates the part of the segment its shard
// holds, an element range computed at run time from its rank, so that one
// program serves every rank.
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

void emitAdamW(CallBuilder &calls, AdamWStepOp op) {
  for (const Segment &s : segmentsOf(calls, op)) {
    SmallVector<Value> args = {calls.i32(dtypeOf(op.getGrad()))};
    for (Value tensor :
         {op.getParam(), op.getGrad(), op.getExpAvg(), op.getExpAvgSq()})
      pushElement(calls, args, tensor, s.begin);
    args.append({countOf(calls, s, op.getParam()), calls.stepCount(),
                 calls.f64(op.getLr().convertToDouble() * s.lrScale),
                 calls.f64(op.getBeta1().convertToDouble()),
                 calls.f64(op.getBeta2().convertToDouble()),
                 calls.f64(op.getEps().convertToDouble()),
                 calls.f64(s.weightDecay),
                 calls.i32(op.getL2WeightDecay())});
    pushElement(calls, args, op.getSkipIf(), Value());
    calls.call("adamw_step", args);
  }
}

void emitLion(CallBuilder &calls, LionStepOp op) {
  for (const Segment &s : segmentsOf(calls, op)) {
    SmallVector<Value> args = {calls.i32(dtypeOf(op.getGrad()))};
    for (Value tensor : {op.getParam(), op.getGrad(), op.getExpAvg()})
      pushElement(calls, args, tensor, s.begin);
    args.append({countOf(calls, s, op.getParam()), calls.stepCount(),
                 calls.f64(op.getLr().convertToDouble() * s.lrScale),
                 calls.f64(op.getBeta1().convertToDouble()),
                 calls.f64(op.getBeta2().convertToDouble()),
                 calls.f64(s.weightDecay)});
    pushElement(calls, args, op.getSkipIf(), Value());
    calls.call("lion_step", args);
  }
}

void emitSGD(CallBuilder &calls, SGDStepOp op) {
  for (const Segment &s : segmentsOf(calls, op)) {
    SmallVector<Value> args = {calls.i32(dtypeOf(op.getGrad()))};
    for (Value tensor : {op.getParam(), op.getGrad(), op.getMomentumBuffer()})
      pushElement(calls, args, tensor, s.begin);
    args.append({countOf(calls, s, op.getParam()), calls.stepCount(),
                 calls.f64(op.getLr().convertToDouble() * s.lrScale),
                 calls.f64(op.getMomentum().convertToDouble()),
                 calls.f64(op.getDampening().convertToDouble()),
                 calls.f64(s.weightDecay), calls.i32(op.getNesterov())});
    pushElement(calls, args, op.getSkipIf(), Value());
    calls.call("sgd_step", args);
  }
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
  if (auto adamw = dyn_cast<AdamWStepOp>(op))
    return emitAdamW(calls, adamw), true;
  if (auto sgd = dyn_cast<SGDStepOp>(op))
    return emitSGD(calls, sgd), true;
  if (auto lion = dyn_cast<LionStepOp>(op))
    return emitLion(calls, lion), true;
  if (auto stats = dyn_cast<AdafactorStatsOp>(op))
    return emitAdafactorStats(calls, stats), true;
  if (auto factor = dyn_cast<AdafactorFactorOp>(op))
    return emitAdafactorFactor(calls, factor), true;
  if (auto apply = dyn_cast<AdafactorApplyOp>(op))
    return emitAdafactorApply(calls, apply), true;
  return false;
}
