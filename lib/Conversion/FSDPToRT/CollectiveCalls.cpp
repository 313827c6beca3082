//===- CollectiveCalls.cpp - the runtime calls of each collective op ------===//
//
// A collective op's calls follow its CollectiveOpInterface steps: an
// unshard is one all-gather over the shard group (or its post-forward
// group); reduce_grads a
// reduce-scatter over the shard group and/or an all-reduce over the
// replicate group (the divide factors applied around the sum, as PyTorch
// does), or a copy on one rank; an all-reduce one all-reduce.
//
//===----------------------------------------------------------------------===//

#include "CallBuilder.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/rt/fsdprt.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// dst = reduce(src / pre) / post over `comm`: the division before the sum
/// keeps 16-bit sums in range (FSDP1's pre/post divide factors).
static void emitAllReduce(CallBuilder &calls, Value comm, int32_t kind,
                          Value src, Value dst, double pre, double post) {
  int32_t dtype = dtypeOf(dst);
  int64_t numel = tensorType(dst).getNumElements();
  auto scale = [&](Value from, double factor) {
    SmallVector<Value> args{calls.i32(dtype)};
    calls.pushTensor(args, from);
    calls.pushTensor(args, dst);
    args.append({calls.i64(numel), calls.f64(factor)});
    calls.call("scale_forward", args);
  };
  if (pre != 1.0) {
    scale(src, 1.0 / pre);
    src = dst;
  }
  SmallVector<Value> args{comm, calls.i32(dtype), calls.i32(kind)};
  calls.pushTensor(args, src);
  calls.pushTensor(args, dst);
  args.push_back(calls.i64(numel));
  calls.call("all_reduce", args);
  if (post != 1.0)
    scale(dst, 1.0 / post);
}

static int32_t commKind(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::avg:
    return FSDPRT_COMM_AVG;
  case ReduceKind::max:
    return FSDPRT_COMM_MAX;
  case ReduceKind::sum:
    return FSDPRT_COMM_SUM;
  }
  llvm_unreachable("unknown reduction");
}

static LogicalResult emitUnshard(CallBuilder &calls, UnshardOp unshard) {
  Value full = cast<WaitOp>(*unshard->getUsers().begin()).getResult();
  // A post-forward shard is gathered over its group of N ranks.
  Value comm = unshard.getPostForwardGroup() ? calls.postForwardComm()
                                             : calls.comm(false);
  SmallVector<Value> args{comm, calls.i32(dtypeOf(full))};
  calls.pushTensor(args, unshard.getShard());
  calls.pushTensor(args, full);
  args.push_back(calls.i64(tensorType(full).getNumElements()));
  calls.call("all_gather", args);
  return success();
}

static LogicalResult emitReduceGrads(CallBuilder &calls, ReduceGradsOp reduce) {
  auto type = tensorType(reduce.getGrad());
  int32_t kind = commKind(reduce.getReduce());
  double pre = reduce.getPreDivide().convertToDouble();
  double post = reduce.getPostDivide().convertToDouble();
  Value src = reduce.getGrad(), dst = reduce.getResult();
  SmallVector<CollectiveStep, 2> steps = reduce.getCollectiveSteps();
  if (steps.empty()) { // one rank: the gradient is already the result
    SmallVector<Value> args;
    calls.pushTensor(args, dst);
    calls.pushTensor(args, src);
    args.push_back(calls.i64(tensorBytes(src)));
    calls.call("copy", args);
    return success();
  }
  for (const CollectiveStep &step : steps) {
    if (step.kind == CollectiveKind::AllReduce) {
      // No-shard reduces the whole gradient here; hybrid adds the
      // replicas' reduced shards.
      emitAllReduce(calls, calls.comm(true), kind, src, dst, pre, post);
      continue;
    }
    SmallVector<Value> args{calls.comm(false), calls.i32(dtypeOf(src)),
                            calls.i32(kind)};
    calls.pushTensor(args, src);
    calls.pushTensor(args, dst);
    args.append(
        {calls.i64(type.getNumElements()), calls.f64(pre), calls.f64(post)});
    calls.call("reduce_scatter", args);
    src = dst;
    pre = post = 1.0;
    kind = FSDPRT_COMM_SUM; // replicas add their averaged shards
  }
  return success();
}

static LogicalResult emitAllReduceOp(CallBuilder &calls, AllReduceOp op) {
  MeshAttr mesh = op.getMesh();
  if (op.getGroup() == MeshGroup::world && mesh.getRank() == 2 &&
      mesh.getShard() > 1 && mesh.getReplicate() > 1)
    return op.emitOpError("over the whole 2-D mesh has no runtime "
                          "lowering yet (the step gets the shard and "
                          "replicate communicators)");
  bool replicate = op.getGroup() == MeshGroup::replicate ||
                   (op.getGroup() == MeshGroup::world && mesh.getShard() == 1);
  emitAllReduce(calls, calls.comm(replicate), commKind(op.getReduce()),
                op.getInput(), op.getResult(),
                op.getPreDivide().convertToDouble(),
                op.getPostDivide().convertToDouble());
  return success();
}

LogicalResult fsdp::emitCollective(CallBuilder &calls, Operation *op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](UnshardOp o) { return emitUnshard(calls, o); })
      .Case([&](ReduceGradsOp o) { return emitReduceGrads(calls, o); })
      .Case([&](AllReduceOp o) { return emitAllReduceOp(calls, o); })
      .Default([](Operation *o) {
        return o->emitOpError(
            "has no runtime lowering in convert-fsdp-to-rt yet");
      });
}
