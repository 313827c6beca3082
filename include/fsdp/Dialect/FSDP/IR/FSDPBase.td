//===- FSDPBase.td - the fsdp dialect and its enums ----------*- tablegen -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPBASE_TD
#define FSDP_DIALECT_FSDP_IR_FSDPBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def FSDP_Dialect : Dialect {
  let name = "fsdp";
  let cppNamespace = "::mlir::fsdp";
  let summary = "Model structure, sharding, collectives and their schedule";
  let description = [{
    The model as PyTorch users know it (a tree of modules with parameters,
    buffers and forward functions), the FSDP units chosen over that tree, the
    collectives that move shards between ranks, and the schedule ops
    (unshard, wait, reshard, reduce_grads) that the passes place.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;

  // The train-step contract: the attributes fsdp-build-train-step and the
  // passes after it put on the step's ops, arguments and results, and on
  // the step function itself (TrainStep.h documents each). The dialect's
  // attribute verifiers (TrainStep.cpp) check their types wherever they
  // appear and, on a function carrying `fsdp.model`, the whole contract.
  let discardableAttrs = (ins
    // On every op of a step: its unit, phase and micro-batch.
    "::mlir::StringAttr":$unit,
    "::mlir::fsdp::PhaseAttr":$phase,
    "::mlir::IntegerAttr":$micro_batch,
    "::mlir::UnitAttr":$grad_accumulation,
    // Roles of the step's arguments and results.
    "::mlir::StringAttr":$param,
    "::mlir::StringAttr":$state,
    "::mlir::UnitAttr":$step_count,
    "::mlir::StringAttr":$buffer,
    "::mlir::IntegerAttr":$input,
    "::mlir::UnitAttr":$loss,
    "::mlir::UnitAttr":$grad_norm,
    "::mlir::UnitAttr":$found_inf,
    "::mlir::StringAttr":$output,
    "::mlir::StringAttr":$flat_param,
    "::mlir::StringAttr":$flat_state,
    // What a flat parameter argument holds.
    "::mlir::ArrayAttr":$params,
    "::mlir::DenseI64ArrayAttr":$offsets,
    "::mlir::IntegerAttr":$flat_numel,
    "::mlir::UnitAttr":$rank_local,
    "::mlir::UnitAttr":$frozen,
    "::mlir::UnitAttr":$ignored,
    // On the step function.
    "::mlir::FlatSymbolRefAttr":$model,
    "::mlir::IntegerAttr":$micro_batches,
    "::mlir::UnitAttr":$eval,
    "::mlir::ArrayAttr":$unreached,
    "::mlir::ArrayAttr":$keep_weights_whole,
    "::mlir::UnitAttr":$cpu_offload,
    "::mlir::fsdp::GradSyncAttr":$grad_sync,
    "::mlir::DictionaryAttr":$mixed_precision,
    "::mlir::fsdp::MeshAttr":$mesh,
    "::mlir::fsdp::ShardingStrategyAttr":$strategy,
    // On the lowered module: the program description (JSON) for the runner.
    "::mlir::StringAttr":$program
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;

  let extraClassDeclaration = [{
  private:
    /// Defined beside the attribute storage classes (FSDPAttrs.cpp).
    void registerAttributes();
  public:
  }];
}

class FSDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDP_Dialect, mnemonic, traits>;

def FSDP_InitKind : I32EnumAttr<"InitKind", "parameter initializer", [
    I32EnumAttrCase<"zeros", 0>,
    I32EnumAttrCase<"ones", 1>,
    I32EnumAttrCase<"constant", 2>,
    I32EnumAttrCase<"normal", 3>,
    I32EnumAttrCase<"uniform", 4>,
    I32EnumAttrCase<"trunc_normal", 5>,
    I32EnumAttrCase<"xavier_uniform", 6>,
    I32EnumAttrCase<"xavier_normal", 7>,
    I32EnumAttrCase<"kaiming_uniform", 8>,
    I32EnumAttrCase<"kaiming_normal", 9>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

def FSDP_ReduceKind : I32EnumAttr<"ReduceKind", "reduction of a collective", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"avg", 1>,
    I32EnumAttrCase<"max", 2>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_ReduceKindAttr : EnumAttr<FSDP_Dialect, FSDP_ReduceKind, "reduce">;

def FSDP_MeshGroup : I32EnumAttr<"MeshGroup",
    "the ranks a collective runs over: the whole mesh or one of its axes", [
    I32EnumAttrCase<"world", 0>, I32EnumAttrCase<"shard", 1>,
    I32EnumAttrCase<"replicate", 2>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_MeshGroupAttr : EnumAttr<FSDP_Dialect, FSDP_MeshGroup, "group">;

def FSDP_Phase : I32EnumAttr<"Phase",
    "the part of a train step an op belongs to", [
    I32EnumAttrCase<"forward", 0>, I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"optimizer", 2>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_PhaseAttr : EnumAttr<FSDP_Dialect, FSDP_Phase, "phase">;

// The option spelling (sharding-strategy=full-shard) has hyphens where these
// have underscores (strategyOptionName in TrainStep.h).
def FSDP_ShardingStrategy : I32EnumAttr<"ShardingStrategy",
    "how a step's flat parameters are sharded (PyTorch's ShardingStrategy)", [
    I32EnumAttrCase<"full_shard", 0>, I32EnumAttrCase<"shard_grad_op", 1>,
    I32EnumAttrCase<"no_shard", 2>, I32EnumAttrCase<"hybrid_shard", 3>,
    I32EnumAttrCase<"hybrid_shard_zero2", 4>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_ShardingStrategyAttr
    : EnumAttr<FSDP_Dialect, FSDP_ShardingStrategy, "strategy">;

def FSDP_GradSync : I32EnumAttr<"GradSync",
    "when gradients of several micro-batches are reduced", [
    I32EnumAttrCase<"every_micro_batch", 0>,
    I32EnumAttrCase<"last_micro_batch", 1>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_GradSyncAttr : EnumAttr<FSDP_Dialect, FSDP_GradSync, "grad_sync">;

// #fsdp.unit<ignored = ...>: FSDP's ignored_modules / ignored_params.
def FSDP_IgnoredGradSync : I32EnumAttr<"IgnoredGradSync",
    "whether a unit's parameters are ignored by FSDP, and how their "
    "gradients are then synchronised", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"local", 1>,
    I32EnumAttrCase<"all_reduce", 2>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

// What an activation-checkpointed unit's backward recomputes: `unit` its
// whole forward (checkpoint_wrapper), `selective` only the cheap ops,
// reading the matmuls' and attentions' results saved by the forward.
def FSDP_CheckpointPolicy : I32EnumAttr<"CheckpointPolicy",
    "what the backward of an activation-checkpointed unit recomputes", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"unit", 1>,
    I32EnumAttrCase<"selective", 2>]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}

#endif // FSDP_DIALECT_FSDP_IR_FSDPBASE_TD
