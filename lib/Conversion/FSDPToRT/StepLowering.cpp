//===- StepLowering.cpp - streams, events, buffers of a lowered step ------===//
//
// Emits the ops of a scheduled train step in program order as rt ops. Each
// op runs on one stream (streamOf); a stream waits for the event recorded
// right after the producer of anything it reads on another stream; a
// transient buffer is placed (rt.alloc_at) where it is defined and freed on
// the stream of its last use once the other streams' last uses are done.
//
//===----------------------------------------------------------------------===//

#include "StepLowering.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/rt/fsdprt.h"

using namespace mlir;
using namespace mlir::fsdp;

int32_t fsdp::dtypeCode(Type type) {
  if (type.isF32())
    return FSDPRT_F32;
  if (type.isBF16())
    return FSDPRT_BF16;
  if (type.isF16())
    return FSDPRT_F16;
  if (type.isInteger(32))
    return FSDPRT_I32;
  if (type.isInteger(64))
    return FSDPRT_I64;
  return -1;
}

/// Ops that only rename storage: they emit nothing.
static bool isAliasOp(Operation *op) {
  return isa<ViewOp, nn::ReshapeOp>(op);
}

Value fsdp::storageRoot(Value tensor, const StepLayout &layout) {
  for (;;) {
    if (Value source = storageAliasOf(tensor)) {
      tensor = source;
      continue;
    }
    auto slot = layout.flatSlots.find(tensor);
    if (slot == layout.flatSlots.end())
      return tensor;
    tensor = slot->second.first;
  }
}

void fsdp::forEachStorageUse(Block &body, const StepLayout &layout,
                             function_ref<void(Operation *, Value)> fn) {
  auto rootOf = [&](Value v) { return storageRoot(v, layout); };
  for (Operation &op : body) {
    if (isAliasOp(&op) || isHostStepCounter(&op) || isa<func::ReturnOp>(op))
      continue;
    for (Value operand : op.getOperands())
      if (!isa<fsdp::TokenType>(operand.getType()))
        fn(&op, rootOf(operand));
    for (Value result : op.getResults())
      if (!isa<fsdp::TokenType>(result.getType()))
        fn(&op, rootOf(result));
    if (auto unshard = dyn_cast<UnshardOp>(op))
      fn(&op, cast<WaitOp>(*unshard->getUsers().begin()).getResult());
  }
}

bool fsdp::isStorageFree(Operation *op) {
  return isAliasOp(op) || isHostStepCounter(op);
}

StepLowering::StepLowering(func::FuncOp step, const StepLayout &layout,
                           func::FuncOp out)
    : step(step), out(out), layout(layout), b(out.getContext()),
      loc(step.getLoc()) {}

Value StepLowering::i32(int64_t v) {
  Value &c = intConstants[{32, v}];
  if (!c)
    c = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  return c;
}
Value StepLowering::i64(int64_t v) {
  Value &c = intConstants[{64, v}];
  if (!c)
    c = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  return c;
}
Value StepLowering::f64(double v) {
  Value &c = floatConstants[v];
  if (!c)
    c = arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  return c;
}
Value StepLowering::nullBuffer() {
  if (!null)
    null = rt::NullOp::create(b, loc, rt::BufferType::get(b.getContext()));
  return null;
}

Value StepLowering::dropoutKey(int64_t rngId) {
  Value first = arith::MulIOp::create(b, loc, rank, i64(dropoutSites));
  return arith::AddIOp::create(b, loc, first, i64(rngId));
}

Value StepLowering::stream(StreamKind kind) { return streams[int(kind)]; }
Value StepLowering::comm(bool replicate) {
  return replicate ? replicateComm : shardComm;
}

Value StepLowering::rootOf(Value tensor) const {
  return storageRoot(tensor, layout);
}

TensorRef StepLowering::ref(Value tensor) {
  auto it = refs.find(tensor);
  assert(it != refs.end() && "tensor used before it was placed");
  return it->second;
}

void StepLowering::pushTensor(SmallVectorImpl<Value> &args, Value tensor) {
  TensorRef r = ref(tensor);
  args.push_back(r.buffer);
  args.push_back(i64(r.offset));
}
void StepLowering::pushNull(SmallVectorImpl<Value> &args) {
  args.push_back(nullBuffer());
  args.push_back(i64(0));
}

Value StepLowering::array(ArrayRef<int64_t> values) {
  SmallVector<Value> elements;
  for (int64_t v : values)
    elements.push_back(i64(v));
  return array(ArrayRef<Value>(elements));
}
Value StepLowering::array(ArrayRef<Value> values) {
  if (values.empty()) // a rank-0 shape: the callee reads nothing
    return array(ArrayRef<Value>{i64(0)});
  return rt::ArrayOp::create(b, loc, rt::ArrayType::get(b.getContext()),
                             values);
}

void StepLowering::call(StringRef name, ArrayRef<Value> args) {
  SmallVector<Value> operands{ctx, stream(current)};
  operands.append(args.begin(), args.end());
  rt::CallOp::create(b, loc, TypeRange(),
                     FlatSymbolRefAttr::get(b.getContext(), name), operands);
}

void StepLowering::place(Value v) {
  auto it = layout.transients.find(v);
  if (it == layout.transients.end() || refs.count(v))
    return; // not transient, or already placed (by its unshard, a slot)
  Value buffer = rt::AllocAtOp::create(
      b, loc, rt::BufferType::get(b.getContext()), ctx,
      b.getI64IntegerAttr(it->second.offset),
      b.getI64IntegerAttr(it->second.bytes));
  refs[v] = {buffer, 0};
}

Value StepLowering::event() {
  OpBuilder::InsertionGuard guard(b);
  b.restoreInsertionPoint(eventInsertPoint);
  Value e = rt::EventCreateOp::create(b, loc,
                                      rt::EventType::get(b.getContext()), ctx);
  eventInsertPoint = b.saveInsertionPoint();
  events.push_back(e);
  return e;
}

void StepLowering::waitForOperands(Operation *op, StreamKind kind) {
  for (Value operand : op->getOperands()) {
    auto it = producedEvent.find(operand);
    if (it == producedEvent.end() || producer.lookup(operand) == kind)
      continue;
    if (waited.insert({int(kind), it->second}).second)
      rt::StreamWaitOp::create(b, loc, ctx, stream(kind), it->second);
  }
}

LogicalResult StepLowering::run() {
  Block &body = step.getBody().front();
  Block *entry = &out.getBody().front();
  b.setInsertionPointToStart(entry);
  auto arg = [&](rt::StepArg a) { return entry->getArgument(unsigned(a)); };
  ctx = arg(rt::StepArg::ctx);
  persistent = arg(rt::StepArg::persistent);
  streams[int(StreamKind::Compute)] = arg(rt::StepArg::compute);
  streams[int(StreamKind::AllGather)] = arg(rt::StepArg::all_gather);
  streams[int(StreamKind::ReduceScatter)] = arg(rt::StepArg::reduce_scatter);
  shardComm = arg(rt::StepArg::shard);
  replicateComm = arg(rt::StepArg::replicate);
  eventInsertPoint = b.saveInsertionPoint();
  stepPlusOne =
      arith::AddIOp::create(b, loc, arg(rt::StepArg::step_count), i64(1));
  runSeed = arg(rt::StepArg::seed);
  rank = arg(rt::StepArg::rank);
  llvm::DenseSet<int64_t> sites; // a forward and its VJP share their id
  step.walk([&](nn::DropoutOp d) { sites.insert(int64_t(d.getRngId())); });
  dropoutSites = sites.size();

  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  for (auto [value, offset] : layout.persistentOffset)
    refs[value] = {persistent, offset};

  // Who touches each transient buffer, on which stream, and last.
  forEachStorageUse(body, layout, [&](Operation *op, Value root) {
    if (!layout.transients.count(root))
      return;
    Uses &u = uses[root];
    int64_t i = index[op];
    u.lastOnStream[int(streamOf(op))] = i;
    u.last = std::max(u.last, i);
  });
  auto stepOf = [&](Operation *op) { return int(streamOf(op)); };
  // Where each buffer is freed, and which other streams' last uses the
  // free must wait for (recorded right after those uses).
  llvm::DenseSet<int64_t> recordAfterOp;
  // In plan order (deterministic output: `uses` is keyed by address).
  for (auto &entry : layout.transients) {
    auto it = uses.find(entry.first);
    if (it == uses.end())
      continue;
    Value root = it->first;
    Uses &u = it->second;
    int freeStream = stepOf(ops[u.last]);
    freesAfter[u.last].push_back(root);
    for (auto [s, i] : u.lastOnStream)
      if (s != freeStream)
        recordAfterOp.insert(i);
  }
  // Events after producers read on another stream.
  auto readStream = [&](Value v, auto &&self, SmallVectorImpl<int> &out) -> void {
    for (Operation *user : v.getUsers()) {
      if (isHostStepCounter(user) || isa<func::ReturnOp>(user))
        continue;
      if (isAliasOp(user)) {
        self(user->getResult(0), self, out);
        continue;
      }
      out.push_back(stepOf(user));
    }
  };
  for (Operation &op : body) {
    if (isAliasOp(&op) || isHostStepCounter(&op))
      continue;
    for (Value result : op.getResults()) {
      SmallVector<int> readers;
      readStream(result, readStream, readers);
      if (llvm::any_of(readers, [&](int s) { return s != stepOf(&op); }))
        recordAfterOp.insert(index[&op]);
    }
  }

  llvm::DenseMap<int64_t, Value> eventAfter;
  for (Operation &op : body) {
    int64_t i = index[&op];
    if (isHostStepCounter(&op))
      continue;
    if (isAliasOp(&op)) {
      Value source = op.getOperand(0);
      TensorRef r = ref(source);
      if (auto view = dyn_cast<ViewOp>(op))
        r.offset += view.getOffset() *
                    llvm::divideCeil(cast<RankedTensorType>(source.getType())
                                         .getElementTypeBitWidth(),
                                     8);
      refs[op.getResult(0)] = r;
      if (producer.count(source)) {
        producer[op.getResult(0)] = producer[source];
        if (producedEvent.count(source))
          producedEvent[op.getResult(0)] = producedEvent[source];
      }
      continue;
    }
    current = streamOf(&op);
    loc = op.getLoc();
    // Place what this op defines (an unshard places its gathered buffer).
    SmallVector<Value> defined(op.getResults());
    if (auto unshard = dyn_cast<UnshardOp>(op))
      defined.push_back(cast<WaitOp>(*unshard->getUsers().begin()).getResult());
    for (Value v : defined) {
      if (Value source = storageAliasOf(v)) { // updated in place
        refs[v] = ref(source);
        continue;
      }
      auto slot = layout.flatSlots.find(v);
      if (slot != layout.flatSlots.end()) {
        // A gradient lives in its flat gradient, placed at the first one.
        place(slot->second.first);
        TensorRef flat = ref(slot->second.first);
        refs[v] = {flat.buffer, flat.offset + slot->second.second};
        continue;
      }
      place(v);
    }
    waitForOperands(&op, current);
    if (failed(emitOp(&op)))
      return failure();
    for (Value result : op.getResults())
      producer[result] = current;
    if (recordAfterOp.contains(i)) {
      Value e = event();
      rt::EventRecordOp::create(b, loc, ctx, e, stream(current));
      eventAfter[i] = e;
      for (Value result : op.getResults())
        producedEvent[result] = e;
    }
    if (auto wait = dyn_cast<WaitOp>(op)) {
      // Compute has waited for the gather: the result is ready on it.
      producer[wait.getResult()] = StreamKind::Compute;
      producedEvent.erase(wait.getResult());
    }
    for (Value root : freesAfter.lookup(i)) {
      for (auto [s, last] : uses[root].lastOnStream)
        if (s != int(current) &&
            waited.insert({int(current), eventAfter[last]}).second)
          rt::StreamWaitOp::create(b, loc, ctx, stream(current),
                                   eventAfter[last]);
      rt::FreeOp::create(b, loc, ctx, stream(current), ref(root).buffer);
    }
  }
  rt::SynchronizeOp::create(b, loc, ctx);
  for (Value e : events)
    rt::EventDestroyOp::create(b, loc, ctx, e);
  func::ReturnOp::create(b, loc);
  return success();
}

LogicalResult StepLowering::emitOp(Operation *op) {
  if (auto unshard = dyn_cast<UnshardOp>(op)) {
    Value full = cast<WaitOp>(*unshard->getUsers().begin()).getResult();
    auto type = cast<RankedTensorType>(full.getType());
    SmallVector<Value> args{comm(false), i32(dtypeCode(type.getElementType()))};
    pushTensor(args, unshard.getShard());
    pushTensor(args, full);
    args.push_back(i64(type.getNumElements()));
    call("all_gather", args);
    return success();
  }
  // A wait is where compute waits for the gather's event (as for any
  // operand produced on another stream); the buffer was placed at the
  // unshard. A reshard is the gathered buffer's last use: its free follows.
  if (isa<WaitOp, ReshardOp, func::ReturnOp>(op))
    return success();
  if (auto reduce = dyn_cast<ReduceGradsOp>(op)) {
    auto type = cast<RankedTensorType>(reduce.getGrad().getType());
    int32_t dtype = dtypeCode(type.getElementType());
    int32_t kind = reduce.getReduce() == ReduceKind::avg ? FSDPRT_COMM_AVG
                                                         : FSDPRT_COMM_SUM;
    double pre = reduce.getPreDivide().convertToDouble();
    double post = reduce.getPostDivide().convertToDouble();
    Value src = reduce.getGrad(), dst = reduce.getResult();
    SmallVector<CollectiveStep, 2> steps = reduce.getCollectiveSteps();
    if (steps.empty()) { // one rank: the gradient is already the result
      SmallVector<Value> args;
      pushTensor(args, dst);
      pushTensor(args, src);
      int64_t bytes = type.getNumElements() *
                      llvm::divideCeil(type.getElementTypeBitWidth(), 8);
      args.push_back(i64(bytes));
      call("copy", args);
      return success();
    }
    for (const CollectiveStep &step : steps) {
      if (step.kind == CollectiveKind::ReduceScatter) {
        SmallVector<Value> args{comm(false), i32(dtype), i32(kind)};
        pushTensor(args, src);
        pushTensor(args, dst);
        args.append({i64(type.getNumElements()), f64(pre), f64(post)});
        call("reduce_scatter", args);
        src = dst;
        pre = post = 1.0;
        kind = FSDPRT_COMM_SUM; // replicas add their averaged shards
        continue;
      }
      // The all-reduce over replicas: no-shard reduces the whole gradient
      // here, hybrid adds the replicas' reduced shards. Divide factors apply
      // around the sum, as in PyTorch.
      int64_t numel = cast<RankedTensorType>(dst.getType()).getNumElements();
      auto scale = [&](Value from, double factor) {
        SmallVector<Value> args{i32(dtype)};
        pushTensor(args, from);
        pushTensor(args, dst);
        args.append({i64(numel), f64(factor)});
        call("scale_forward", args);
      };
      if (pre != 1.0) {
        scale(src, 1.0 / pre);
        src = dst;
      }
      SmallVector<Value> args{comm(true), i32(dtype), i32(kind)};
      pushTensor(args, src);
      pushTensor(args, dst);
      args.push_back(i64(numel));
      call("all_reduce", args);
      if (post != 1.0)
        scale(dst, 1.0 / post);
    }
    return success();
  }
  return emitKernel(op);
}
