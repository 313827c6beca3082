//===- KernelCallsLayout.cpp - data-movement calls ------------------------===//
//
// The layout family (CApiLayout.cpp): slices (strided too, and their
// scatter), padding, transposes, splits and
// concatenations, cumsum, and the reductions over dimensions with their
// backward (nn.broadcast).
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/rt/fsdprt.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

/// nn.broadcast is the backward of a sum over the broadcast dimensions.
static void emitBroadcast(CallBuilder &l, nn::BroadcastOp op) {
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
  SmallVector<int64_t> dims;
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d)
    if (d < lead || (in[d - lead] == 1 && out[d] != 1))
      dims.push_back(d);
  Args{l}
      .i32(dtypeOf(op.getResult()))
      .i32(FSDPRT_REDUCE_SUM)
      .t(op.getInput())
      .shape(op.getResult())
      .i32(dims.size())
      .array(dims)
      .t(op.getResult())
      .call("reduce_backward");
}

/// The arguments of strided_slice (`from` the whole tensor) and of its
/// backward (`to` it): `whole` gives the shape, the other side the count.
static Args stridedSliceArgs(CallBuilder &l, Value from, Value to, Value whole,
                             int64_t dim, int64_t start, int64_t step) {
  Value part = whole == from ? to : from;
  Args args{l};
  args.i32(dtypeOf(from))
      .t(from)
      .shape(whole)
      .i32(dim)
      .i64(start)
      .i64(step)
      .i64(shapeOf(part)[dim])
      .t(to);
  return args;
}

template <typename ReduceOp>
static void emitReduce(CallBuilder &l, ReduceOp op, int32_t kind) {
  ArrayRef<int64_t> dims = op.getDims();
  Args{l}
      .i32(dtypeOf(op.getResult()))
      .i32(kind)
      .t(op.getInput())
      .shape(op.getInput())
      .i32(dims.size())
      .array(dims)
      .t(op.getResult())
      .call("reduce_forward");
}

void fsdp::addLayoutKernels(KernelEmitters &k) {
  k.add<nn::SliceOp>([](CallBuilder &calls, nn::SliceOp o) {
    if (o.getStep() != 1) {
      stridedSliceArgs(calls, o.getInput(), o.getResult(), o.getInput(),
                       o.getDim(), o.getStart(), o.getStep())
          .call("strided_slice");
      return success();
    }
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .shape(o.getInput())
        .i32(o.getDim())
        .i64(o.getStart())
        .i64(o.getEnd() - o.getStart())
        .t(o.getResult())
        .call("slice");
    return success();
  });
  k.add<nn::SliceGradOp>([](CallBuilder &calls, nn::SliceGradOp o) {
    stridedSliceArgs(calls, o.getGrad(), o.getResult(), o.getResult(),
                     o.getDim(), o.getStart(), o.getStep())
        .call("strided_slice_backward");
    return success();
  });
  k.add<nn::PadOp>([](CallBuilder &calls, nn::PadOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .shape(o.getInput())
        .i32(o.getDim())
        .i64(o.getLow())
        .i64(o.getHigh())
        .f64(o.getValue().convertToDouble())
        .t(o.getResult())
        .call("pad");
    return success();
  });
  k.add<nn::TransposeOp>([](CallBuilder &calls, nn::TransposeOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getResult())
        .shape(o.getInput())
        .array(o.getPermutation())
        .call("transpose_forward");
    return success();
  });
  k.add<nn::SplitOp>([](CallBuilder &calls, nn::SplitOp o) {
    SmallVector<Value> outs, offs;
    for (Value r : o.getResults()) {
      TensorRef t = calls.ref(r);
      outs.push_back(t.buffer);
      offs.push_back(calls.i64(t.offset));
    }
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .shape(o.getInput())
        .i32(o.getDim())
        .i32(o.getResults().size())
        .array(o.getSizes())
        .value(calls.array(ArrayRef<Value>(outs)))
        .value(calls.array(ArrayRef<Value>(offs)))
        .call("split");
    return success();
  });
  k.add<nn::ConcatOp>([](CallBuilder &calls, nn::ConcatOp o) {
    SmallVector<Value> ins, offs;
    SmallVector<int64_t> sizes;
    for (Value in : o.getInputs()) {
      TensorRef t = calls.ref(in);
      ins.push_back(t.buffer);
      offs.push_back(calls.i64(t.offset));
      sizes.push_back(shapeOf(in)[o.getDim()]);
    }
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .i32(ins.size())
        .value(calls.array(ArrayRef<Value>(ins)))
        .value(calls.array(ArrayRef<Value>(offs)))
        .array(sizes)
        .shape(o.getResult())
        .i32(o.getDim())
        .t(o.getResult())
        .call("concat");
    return success();
  });
  k.add<nn::CumsumOp>([](CallBuilder &calls, nn::CumsumOp o) {
    Args{calls}
        .i32(dtypeOf(o.getInput()))
        .t(o.getInput())
        .shape(o.getInput())
        .i32(o.getDim())
        .i32(o.getReverse())
        .t(o.getResult())
        .call("cumsum");
    return success();
  });
  k.add<nn::ReduceSumOp>([](CallBuilder &calls, nn::ReduceSumOp o) {
    emitReduce(calls, o, FSDPRT_REDUCE_SUM);
    return success();
  });
  k.add<nn::ReduceMeanOp>([](CallBuilder &calls, nn::ReduceMeanOp o) {
    emitReduce(calls, o, FSDPRT_REDUCE_MEAN);
    return success();
  });
  k.add<nn::BroadcastOp>([](CallBuilder &calls, nn::BroadcastOp o) {
    emitBroadcast(calls, o);
    return success();
  });
}
