//===- CollectiveOps.cpp - collectives and schedule ops
//--------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include <iterator>
#include <string_view>

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.cpp.inc"

namespace {
/// The stream arguments of the compiled step (StepAbi.def's STREAM rows), in
/// order: StreamKind's values index them.
constexpr std::string_view kStreamArgs[] = {
#define FSDPRT_STEP_STREAM(name, label, placement) #name,
#include "fsdp/rt/StepAbi.def"
};
constexpr StringLiteral kStreamLabels[] = {
#define FSDPRT_STEP_STREAM(name, label, placement) label,
#include "fsdp/rt/StepAbi.def"
};
static_assert(std::size(kStreamArgs) == kNumStreams);
static_assert(
    kStreamArgs[int(StreamKind::Compute)] == "compute" &&
        kStreamArgs[int(StreamKind::AllGather)] == "all_gather" &&
        kStreamArgs[int(StreamKind::ReduceScatter)] == "reduce_scatter" &&
        kStreamArgs[int(StreamKind::HostToDevice)] == "host_to_device" &&
        kStreamArgs[int(StreamKind::DeviceToHost)] == "device_to_host" &&
        kStreamArgs[int(StreamKind::Host)] == "host_compute",
    "StreamKind is not in the order of StepAbi.def's streams");
} // namespace

StringRef fsdp::streamName(StreamKind stream) {
  return kStreamLabels[int(stream)];
}

StringRef fsdp::collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::Broadcast:
    return "broadcast";
  }
  llvm_unreachable("unknown collective");
}

//===----------------------------------------------------------------------===//
// CollectiveOpInterface
//===----------------------------------------------------------------------===//

/// One collective of `kind` over `group` of `mesh` moving `data`.
static CollectiveStep stepOver(CollectiveKind kind, MeshAttr mesh,
                               MeshGroup group, Type data) {
  FailureOr<int64_t> size = mesh.getGroupSize(group);
  return {kind, group, succeeded(size) ? *size : 1,
          cast<RankedTensorType>(data)};
}

SmallVector<CollectiveStep, 2> AllGatherOp::getCollectiveSteps() {
  return {stepOver(CollectiveKind::AllGather, getMesh(), getGroup(),
                   getResult().getType())};
}
StreamKind AllGatherOp::getStream() { return StreamKind::AllGather; }

SmallVector<CollectiveStep, 2> ReduceScatterOp::getCollectiveSteps() {
  return {stepOver(CollectiveKind::ReduceScatter, getMesh(), getGroup(),
                   getInput().getType())};
}
StreamKind ReduceScatterOp::getStream() { return StreamKind::ReduceScatter; }

SmallVector<CollectiveStep, 2> AllReduceOp::getCollectiveSteps() {
  return {stepOver(CollectiveKind::AllReduce, getMesh(), getGroup(),
                   getInput().getType())};
}
StreamKind AllReduceOp::getStream() { return StreamKind::ReduceScatter; }

SmallVector<CollectiveStep, 2> BroadcastOp::getCollectiveSteps() {
  return {stepOver(CollectiveKind::Broadcast, getMesh(), getGroup(),
                   getInput().getType())};
}
StreamKind BroadcastOp::getStream() { return StreamKind::ReduceScatter; }

SmallVector<CollectiveStep, 2> UnshardOp::getCollectiveSteps() {
  CollectiveStep step =
      stepOver(CollectiveKind::AllGather, getMesh(), MeshGroup::shard,
               getToken().getType().getValueType());
  if (std::optional<int64_t> group = getPostForwardGroup())
    step.groupSize = *group; // a sub-group of the shard group
  return {step};
}
StreamKind UnshardOp::getStream() { return StreamKind::AllGather; }

/// Reduce-scatter over the shard group (when it has several ranks), then
/// all-reduce over the replicate group of a 2-D mesh (when it has several):
/// hybrid sharding does both, no-shard (DDP) only the all-reduce, one rank
/// neither.
SmallVector<CollectiveStep, 2> ReduceGradsOp::getCollectiveSteps() {
  MeshAttr mesh = getMesh();
  SmallVector<CollectiveStep, 2> steps;
  if (mesh.getShard() > 1)
    steps.push_back(stepOver(CollectiveKind::ReduceScatter, mesh,
                             MeshGroup::shard, getGrad().getType()));
  if (mesh.getRank() == 2 && mesh.getReplicate() > 1)
    steps.push_back(stepOver(CollectiveKind::AllReduce, mesh,
                             MeshGroup::replicate, getResult().getType()));
  return steps;
}
StreamKind ReduceGradsOp::getStream() { return StreamKind::ReduceScatter; }

namespace {
/// How a collective's result dim 0 relates to its input dim 0.
enum class Dim0 { Same, TimesGroup, DividedByGroup };
} // namespace

/// Shared rules of every collective: the group exists in the mesh, operand
/// and result carry the declared wire dtype, and shapes follow `dim0`.
static LogicalResult verifyCollective(Operation *op, RankedTensorType input,
                                      RankedTensorType result, MeshAttr mesh,
                                      MeshGroup group, Type dtype, Dim0 dim0) {
  FailureOr<int64_t> size = mesh.getGroupSize(group);
  if (failed(size))
    return op->emitOpError("group '")
           << stringifyMeshGroup(group) << "' does not exist on the 1-D mesh "
           << mesh << "; use a 2-D mesh <replicate = R, shard = S>";
  if (input.getElementType() != dtype)
    return op->emitOpError("operand element type ")
           << input.getElementType() << " differs from the declared dtype "
           << dtype;
  if (result.getElementType() != dtype)
    return op->emitOpError("result element type ")
           << result.getElementType() << " differs from the declared dtype "
           << dtype;
  if (input.getRank() == 0 || input.getRank() != result.getRank())
    return op->emitOpError("operand and result must have the same rank >= 1");
  if (input.getShape().drop_front() != result.getShape().drop_front())
    return op->emitOpError("operand and result may differ only in dim 0");
  int64_t in = input.getDimSize(0), out = result.getDimSize(0);
  switch (dim0) {
  case Dim0::Same:
    break;
  case Dim0::TimesGroup:
    if (out != in * *size)
      return op->emitOpError("result dim 0 must be ")
             << in << " x " << *size << " ranks = " << in * *size << ", got "
             << out;
    break;
  case Dim0::DividedByGroup:
    if (in != out * *size)
      return op->emitOpError("operand dim 0 (")
             << in << ") must be result dim 0 (" << out << ") x " << *size
             << " ranks";
    break;
  }
  return success();
}

/// Divide factors scale values and must be positive.
static LogicalResult verifyDivideFactors(Operation *op, double pre,
                                         double post) {
  if (!(pre > 0.0) || !(post > 0.0))
    return op->emitOpError("divide factors must be positive, got pre ")
           << pre << ", post " << post;
  return success();
}

LogicalResult AllGatherOp::verify() {
  return verifyCollective(*this, getInput().getType(), getType(), getMesh(),
                          getGroup(), getDtype(), Dim0::TimesGroup);
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyDivideFactors(*this, getPreDivide().convertToDouble(),
                                 getPostDivide().convertToDouble())))
    return failure();
  return verifyCollective(*this, getInput().getType(), getType(), getMesh(),
                          getGroup(), getDtype(), Dim0::DividedByGroup);
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyDivideFactors(*this, getPreDivide().convertToDouble(),
                                 getPostDivide().convertToDouble())))
    return failure();
  return verifyCollective(*this, getInput().getType(), getType(), getMesh(),
                          getGroup(), getDtype(), Dim0::Same);
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifyCollective(*this, getInput().getType(), getType(), getMesh(),
                              getGroup(), getDtype(), Dim0::Same)))
    return failure();
  int64_t size = *getMesh().getGroupSize(getGroup());
  auto root = static_cast<int64_t>(getRoot());
  if (root < 0 || root >= size)
    return emitOpError("root ")
           << root << " is not a rank of the " << size << "-rank group";
  return success();
}

/// A post-forward group: more than one rank, a divisor of the shard group.
static LogicalResult verifyPostForwardGroup(Operation *op, int64_t group,
                                            MeshAttr mesh) {
  if (group < 2 || mesh.getShard() % group != 0)
    return op->emitOpError("post-forward group of ")
           << group << " ranks must be > 1 and divide the shard group's "
           << mesh.getShard();
  return success();
}

LogicalResult UnshardOp::verify() {
  RankedTensorType shard = getShard().getType();
  RankedTensorType full = getToken().getType().getValueType();
  std::optional<int64_t> group = getPostForwardGroup();
  if (!group)
    return verifyCollective(*this, shard, full, getMesh(), MeshGroup::shard,
                            shard.getElementType(), Dim0::TimesGroup);
  if (failed(verifyPostForwardGroup(*this, *group, getMesh())))
    return failure();
  if (shard.getElementType() != full.getElementType() ||
      full.getNumElements() != shard.getNumElements() * *group)
    return emitOpError("gathers ")
           << full << " from " << shard << " over " << *group << " ranks";
  return success();
}

LogicalResult PostForwardShardOp::verify() {
  RankedTensorType full = getFull().getType(), part = getType();
  int64_t group = getGroup();
  if (group < 2 || full.getElementType() != part.getElementType() ||
      full.getNumElements() != part.getNumElements() * group)
    return emitOpError("keeps 1/")
           << group << " (> 1) of " << full << ", not " << part;
  return success();
}

LogicalResult ReduceGradsOp::verify() {
  if (failed(verifyDivideFactors(*this, getPreDivide().convertToDouble(),
                                 getPostDivide().convertToDouble())))
    return failure();
  RankedTensorType grad = getGrad().getType();
  return verifyCollective(*this, grad, getType(), getMesh(), MeshGroup::shard,
                          grad.getElementType(), Dim0::DividedByGroup);
}

LogicalResult ViewOp::verify() {
  RankedTensorType flat = getFlat().getType(), view = getType();
  if (flat.getElementType() != view.getElementType())
    return emitOpError("view element type ")
           << view.getElementType() << " differs from the flat parameter's "
           << flat.getElementType();
  auto offset = static_cast<int64_t>(getOffset());
  if (offset + view.getNumElements() > flat.getNumElements())
    return emitOpError("view [")
           << offset << ", " << offset + view.getNumElements()
           << ") is past the end of the " << flat.getNumElements()
           << "-element flat parameter";
  return success();
}

LogicalResult FlattenOp::verify() {
  RankedTensorType flat = getType();
  int64_t total = 0;
  for (Value input : getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getElementType() != flat.getElementType())
      return emitOpError("input element type ")
             << type.getElementType() << " differs from the result's "
             << flat.getElementType();
    total += type.getNumElements();
  }
  if (total > flat.getNumElements())
    return emitOpError("inputs hold ")
           << total << " elements, more than the " << flat.getNumElements()
           << "-element result";
  return success();
}
