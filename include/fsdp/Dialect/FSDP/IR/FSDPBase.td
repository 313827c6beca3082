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

#endif // FSDP_DIALECT_FSDP_IR_FSDPBASE_TD
