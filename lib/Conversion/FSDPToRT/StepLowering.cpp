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

StepLowering::StepLowering(func::FuncOp step, const StepLayout &layout,
                           func::FuncOp out, bool fuseUpdates)
    : step(step), out(out), layout(layout), fuseUpdates(fuseUpdates),
      calls(out.getContext()), b(calls.builder()), loc(step.getLoc()) {}

Value StepLowering::rootOf(Value tensor) const {
  return storageRoot(tensor, layout);
}

void StepLowering::place(Value v) {
  auto it = layout.transients.find(v);
  if (it == layout.transients.end() || calls.isBound(v))
    return; // not transient, or already placed (by its unshard, a slot)
  Value buffer =
      rt::AllocAtOp::create(b, loc, rt::BufferType::get(b.getContext()), ctx,
                            b.getI64IntegerAttr(it->second.offset),
                            b.getI64IntegerAttr(it->second.bytes));
  calls.bind(v, {buffer, 0});
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
  streams[int(StreamKind::HostToDevice)] = arg(rt::StepArg::host_to_device);
  streams[int(StreamKind::DeviceToHost)] = arg(rt::StepArg::device_to_host);
  streams[int(StreamKind::Host)] = arg(rt::StepArg::host_compute);
  host = arg(rt::StepArg::host);
  eventInsertPoint = b.saveInsertionPoint();
  calls.setOp(stream(StreamKind::Compute), loc);
  StepValues values;
  values.ctx = ctx;
  values.shardComm = arg(rt::StepArg::shard);
  values.replicateComm = arg(rt::StepArg::replicate);
  values.postForwardComm = arg(rt::StepArg::post_forward);
  values.stepPlusOne =
      arith::AddIOp::create(b, loc, arg(rt::StepArg::step_count), calls.i64(1));
  values.seed = arg(rt::StepArg::seed);
  values.rank = arg(rt::StepArg::rank);
  llvm::DenseSet<int64_t> sites; // a dropout and its VJP share their id
  step.walk([&](nn::RandomSiteOpInterface site) {
    sites.insert(site.getRngSite());
  });
  values.randomSites = sites.size();
  calls.setStepValues(values);

  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  for (auto [value, offset] : layout.persistentOffset)
    calls.bind(value, {persistent, offset});
  for (auto [value, offset] : layout.hostOffset)
    calls.bind(value, {host, offset});

  // Who touches each transient buffer, on which stream, and last.
  auto countUse = [&](Operation *op, Value root) {
    if (!layout.transients.count(root))
      return;
    Uses &u = uses[root];
    int64_t i = index[op];
    u.lastOnStream[int(streamOf(op))] = i;
    u.last = std::max(u.last, i);
  };
  forEachStorageUse(body, StorageUses::Runtime, &layout.flatSlots, countUse);
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
  auto readStream = [&](Value v, auto &&self,
                        SmallVectorImpl<int> &out) -> void {
    for (Operation *user : v.getUsers()) {
      if (isHostStepCounter(user) || isa<func::ReturnOp>(user))
        continue;
      if (isStorageRename(user)) {
        self(user->getResult(0), self, out);
        if (emitsNothing(user)) // a checking rename reads too
          continue;
      }
      out.push_back(stepOf(user));
    }
  };
  for (Operation &op : body) {
    if (isStorageFree(&op))
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
    if (isStorageRename(&op)) {
      Value source = op.getOperand(0);
      TensorRef r = calls.ref(source);
      if (auto view = dyn_cast<ViewOp>(op))
        r.offset += view.getOffset() *
                    elementBytes(cast<RankedTensorType>(source.getType())
                                     .getElementType());
      calls.bind(op.getResult(0), r);
      if (producer.count(source)) {
        producer[op.getResult(0)] = producer[source];
        if (producedEvent.count(source))
          producedEvent[op.getResult(0)] = producedEvent[source];
      }
      // A rename that checks what it renames (nn.id_range) runs its
      // check here, on its stream; it writes nothing.
      if (!emitsNothing(&op)) {
        current = streamOf(&op);
        loc = op.getLoc();
        waitForOperands(&op, current);
        if (failed(emitOp(&op)))
          return failure();
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
        calls.bind(v, calls.ref(source));
        continue;
      }
      auto slot = layout.flatSlots.find(v);
      if (slot != layout.flatSlots.end()) {
        // A gradient lives in its flat gradient, placed at the first one.
        place(slot->second.first);
        TensorRef flat = calls.ref(slot->second.first);
        calls.bind(v, {flat.buffer, flat.offset + slot->second.second});
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
      rt::FreeOp::create(b, loc, ctx, stream(current), calls.ref(root).buffer);
    }
  }
  rt::SynchronizeOp::create(b, loc, ctx);
  for (Value e : events)
    rt::EventDestroyOp::create(b, loc, ctx, e);
  func::ReturnOp::create(b, loc);
  return success();
}

LogicalResult StepLowering::emitOp(Operation *op) {
  // A wait, a reshard, the return: their effect is the stream waits and
  // frees run() emits around them (StorageLiveness.h: emitsNothing).
  if (emitsNothing(op) || emittedWithRun.contains(op))
    return success();
  calls.setOp(stream(current), loc);
  if (fuseUpdates && isMultiTensorUpdate(op))
    return emitUpdateRun(op), success();
  if (isa<CollectiveOpInterface>(op))
    return emitCollective(calls, op);
  return emitKernel(calls, op);
}

void StepLowering::emitUpdateRun(Operation *first) {
  // The updates run after the backward, one after another (as
  // optimizer.step()); nothing between them reads what they write.
  SmallVector<Operation *> run;
  SmallVector<Location> locs;
  for (Operation *op = first;
       op && isMultiTensorUpdate(op) && streamOf(op) == current;
       op = op->getNextNode()) {
    waitForOperands(op, current);
    emittedWithRun.insert(op);
    run.push_back(op);
    locs.push_back(op->getLoc());
  }
  calls.setOp(stream(current), b.getFusedLoc(locs));
  emitMultiTensorUpdates(calls, run);
}
