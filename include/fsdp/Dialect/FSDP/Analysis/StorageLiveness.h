//===- StorageLiveness.h - storage roots, uses and spans --------*- C++ -*-===//
//
// One storage model for a train step's single block, shared by the step
// report (its peak), the step-time model (which ops take no time) and the
// lowering (its memory plan, its frees, the ops it emits): so the report's
// peak and the plan's live peak come from the same walk, and an op that
// starts aliasing or stops emitting anything changes one place.
//
// - What owns storage: storageRoot follows storageAliasOf (StorageAlias.h,
//   StorageAliasOpInterface) and, in the lowering, the gradients it writes
//   into their unit's flat gradient.
// - What runs: emitsNothing is the one list of ops that emit nothing.
// - When storage is live: forEachStorageUse / storageSpans, the first and
//   last op touching each storage root. The consumers keep their own
//   bookkeeping on top:
//     * the report (StepReport.cpp) takes StorageUses::AllOps spans without
//       slots, holds arguments for the whole step, sizes each root by its
//       tensor bytes and sorts it into a MemoryCategory;
//     * the memory plan (FSDPToRT.cpp) takes StorageUses::Runtime spans with
//       its flat-gradient slots, drops what is persistent or on the host,
//       aligns each root to the arena and places the intervals;
//     * the lowering (StepLowering.cpp) takes the same Runtime uses to free
//       each transient after its last use on each stream.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STORAGELIVENESS_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STORAGELIVENESS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <utility>

namespace mlir::fsdp {

/// Ops that only rename their operand's storage and run nothing: a view of
/// a flat parameter, a reshape (StorageAliasOpInterface::isStorageRename).
bool isStorageRename(Operation *op);

/// Ops that own no storage: renames, and the host-side step counter
/// (isHostStepCounter), which the host keeps.
bool isStorageFree(Operation *op);

/// Ops that emit nothing at run time, the one list: the storage-free ops
/// (but a rename that checks what it renames, checksRenamedStorage),
/// fsdp.wait (the stream wait on its gather's event is emitted as for any
/// operand produced on another stream; the buffer was placed at the
/// unshard), fsdp.reshard (the gathered buffer's last use: its free
/// follows) and terminators (func.return; nn.yield, which ends a
/// custom_vjp's backward). They take no time in the step-time model and
/// the lowering has no kernel or call for them.
bool emitsNothing(Operation *op);

/// Gradients the memory plan computes straight into their unit's flat
/// gradient: gradient -> (flat gradient, byte offset in it).
using FlatGradientSlots = llvm::DenseMap<Value, std::pair<Value, int64_t>>;

/// The value owning `tensor`'s storage: through views, reshapes and in-place
/// updates (storageAliasOf) and, given, the flat-gradient slots.
Value storageRoot(Value tensor, const FlatGradientSlots *slots = nullptr);

/// Which ops count as touching storage.
enum class StorageUses {
  /// Every op of the block, renames, the host step counter and the return
  /// included: the step's liveness as written (the report).
  AllOps,
  /// The ops that touch device or host buffers at run time: not the
  /// storage-free ops, nor the return (what it returns lives in persistent
  /// slots). The memory plan and the lowering's frees.
  Runtime,
};

/// Calls fn(op, root) for every op of `body` that reads or writes the
/// storage owned by `root` (tokens skipped), in program order, operands
/// before results; an unshard writes its gathered buffer, which is keyed by
/// its wait's result.
void forEachStorageUse(Block &body, StorageUses uses,
                       const FlatGradientSlots *slots,
                       function_ref<void(Operation *, Value)> fn);

/// The op indices (in `body`) of the first and last use of one storage root.
struct StorageSpan {
  int64_t first, last;
};
/// Every storage root forEachStorageUse meets, in order of first use.
using StorageSpans = llvm::MapVector<Value, StorageSpan>;

/// The shared liveness walk: each storage root's first and last use.
StorageSpans storageSpans(Block &body, StorageUses uses,
                          const FlatGradientSlots *slots = nullptr);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STORAGELIVENESS_H
