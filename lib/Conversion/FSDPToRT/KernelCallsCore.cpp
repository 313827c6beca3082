//===- KernelCallsCore.cpp - constants, copies, counter -------------------===//
//
// The step's own data movement (CApiCore.cpp): dense constants, the flat
// gradient assembled from its parts, a post-forward shard's slice of its
// gathered unit, host <-> device copies under CPU offload, and the in-place
// increment of a counter.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

void fsdp::addCoreKernels(KernelEmitters &k) {
  k.add<arith::AddIOp>(
      [](CallBuilder &calls, arith::AddIOp o) -> LogicalResult {
        if (!isCounterIncrement(o))
          return o.emitOpError(
              "has no runtime lowering: integer additions lower only as the "
              "in-place increment of a counter (x + splat constant, x used "
              "nowhere else)");
        auto c = cast<DenseIntElementsAttr>(
            o.getRhs().getDefiningOp<arith::ConstantOp>().getValue());
        Args{calls}
            .i32(dtypeOf(o.getResult()))
            .t(o.getResult())
            .i64(numel(o.getResult()))
            .i64(c.getSplatValue<APInt>().getSExtValue())
            .call("add_integer");
        return success();
      });
  k.add<arith::ConstantOp>([](CallBuilder &calls,
                              arith::ConstantOp o) -> LogicalResult {
    auto value = dyn_cast<DenseElementsAttr>(o.getValue());
    if (!value)
      return o.emitOpError("has no runtime lowering (not dense elements)");
    TensorRef t = calls.ref(o.getResult());
    OpBuilder &b = calls.builder();
    rt::CopyConstantOp::create(b, o.getLoc(), calls.context(), calls.stream(),
                               t.buffer, b.getI64IntegerAttr(t.offset), value);
    return success();
  });
  k.add<FlattenOp>([](CallBuilder &calls, FlattenOp o) {
    // Inputs back to back, then zeros up to the padded size.
    TensorRef flat = calls.ref(o.getResult());
    int64_t offset = 0;
    for (Value in : o.getInputs()) {
      TensorRef src = calls.ref(in);
      bool inPlace =
          src.buffer == flat.buffer && src.offset == flat.offset + offset;
      if (!inPlace) // gradients written in their slot need no copy
        calls.call("copy",
                   {flat.buffer, calls.i64(flat.offset + offset), src.buffer,
                    calls.i64(src.offset), calls.i64(tensorBytes(in))});
      offset += tensorBytes(in);
    }
    int64_t elementBytes = tensorBytes(o.getResult()) / numel(o.getResult());
    int64_t padding = numel(o.getResult()) - offset / elementBytes;
    if (padding > 0)
      calls.call("fill", {calls.i32(dtypeOf(o.getResult())), flat.buffer,
                          calls.i64(flat.offset + offset), calls.i64(padding),
                          calls.f64(0.0)});
    return success();
  });
  k.add<PostForwardShardOp>([](CallBuilder &calls, PostForwardShardOp o) {
    // This rank's chunk: its rank in its post-forward group.
    OpBuilder &b = calls.builder();
    Location loc = calls.location();
    Value index = rt::CommRankOp::create(b, loc, b.getI64Type(),
                                         calls.context(),
                                         calls.postForwardComm());
    TensorRef full = calls.ref(o.getFull()), part = calls.ref(o.getResult());
    int64_t bytes = tensorBytes(o.getResult());
    Value offset = arith::AddIOp::create(
        b, loc, calls.i64(full.offset),
        arith::MulIOp::create(b, loc, index, calls.i64(bytes)));
    calls.call("copy", {part.buffer, calls.i64(part.offset), full.buffer,
                        offset, calls.i64(bytes)});
    return success();
  });
  k.add<ToDeviceOp, ToHostOp>([](CallBuilder &calls, Operation *o) {
    // CPU offload: the copy between host and device memory, on its
    // stream.
    Args{calls}
        .t(o->getResult(0))
        .t(o->getOperand(0))
        .i64(tensorBytes(o->getOperand(0)))
        .call("copy");
    return success();
  });
}
