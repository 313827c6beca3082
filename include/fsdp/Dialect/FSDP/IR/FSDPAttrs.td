//===- FSDPAttrs.td - fsdp attributes and types --------------*- tablegen -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPATTRS_TD
#define FSDP_DIALECT_FSDP_IR_FSDPATTRS_TD

include "fsdp/Dialect/FSDP/IR/FSDPBase.td"
include "mlir/IR/BuiltinTypes.td"

class FSDP_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<FSDP_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def FSDP_InitAttr : FSDP_Attr<"Init", "init"> {
  let summary = "how a parameter or buffer is initialized (torch.nn.init)";
  let description = [{
    `zeros`, `ones`, `constant(value)`, `normal(mean, std)`, `uniform(a, b)`,
    `trunc_normal(mean, std, a, b)`, `xavier_uniform(gain)`,
    `xavier_normal(gain)`, `kaiming_uniform(a)` and `kaiming_normal(a)`, with
    the meaning of the torch.nn.init functions of the same names (kaiming:
    mode fan_in, nonlinearity leaky_relu with negative slope `a`; fans as
    PyTorch computes them: dim 1 × receptive field and dim 0 × receptive
    field). nn.Linear's default weight init is `kaiming_uniform(2.2360679...)`
    (a = √5) and its bias `uniform(-1/√in, 1/√in)`.

    ```mlir
    #fsdp.init<normal(0.0, 0.02)>
    #fsdp.init<zeros>
    ```
  }];
  // The arguments are a DenseF64ArrayAttr because LLVM cannot hash doubles.
  let parameters = (ins "::mlir::fsdp::InitKind":$kind,
                        "::mlir::DenseF64ArrayAttr":$args);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Number of arguments `kind` takes.
    static unsigned getArity(::mlir::fsdp::InitKind kind);
    /// Whether `kind` derives its scale from fans (needs rank >= 2).
    bool needsFans() const;
  }];
}

def FSDP_UnitAttr : FSDP_Attr<"Unit", "unit"> {
  let summary = "marks a module as an FSDP unit";
  let description = [{
    A module carrying this attribute owns one flat parameter holding every
    parameter of its subtree that no nested unit owns (FullyShardedDataParallel
    / fully_shard on that module). `reshard_after_forward` overrides the
    strategy's choice for this unit, as FSDP2's per-module argument: true,
    false, or an integer N >= 1 (reshard to N ranks after the forward: keep
    a 1/N shard and gather the backward over groups of N consecutive ranks;
    1 is false and the shard group's size is true).
    `rank_local` gives the unit a process group of its own rank only, as
    PyTorch's MixtureOfExperts wraps its expert (`FSDP(expert,
    new_group([rank]))`): the flat parameter is whole on every rank, differs
    between ranks (each initialises it from its own random stream), and its
    gradient is not reduced.

    `ignored` is FSDP's `ignored_modules` / `ignored_states` (FSDP2's
    `ignored_params`): the parameters the unit owns are not flattened with
    another unit's nor sharded; they are whole on every rank, never
    gathered, and start identical on every rank (the model's weights, as
    when every rank loads the same torch module). `ignored = local` is
    torch's behaviour: their gradients are not reduced, so each rank's
    optimizer steps on its local gradient and the copies drift apart where
    the ranks' data differ. `ignored = all_reduce` averages their gradients
    over all ranks first, as DDP would (torch: FSDP plus a manual
    all_reduce / world size). Such a unit takes no other setting, and no
    unit nests inside it (FSDP's wrap policies skip ignored modules).

    The unit's own mixed precision (FSDP2's per-module
    MixedPrecisionPolicy), each field overriding the model-wide
    `fsdp-mixed-precision` policy for this unit (f32, bf16 or f16):
    `param_dtype` (gather and compute), `reduce_dtype` (gradient reduction;
    unset: the unit's param_dtype when it sets one, else the model's),
    `output_dtype` (the forward's floating-point results are cast to it) and
    `cast_forward_inputs` (the forward's floating-point arguments are cast to
    the param dtype; unset: true for the root and for a unit that sets its
    own param_dtype, false otherwise, as FSDP1 casts only the root's).
    UnitPrecision.h resolves them.

    `activation_checkpointing = true` recomputes the unit's forward in its
    backward (`checkpoint_wrapper` around that module, as
    `apply_activation_checkpointing`'s `check_fn` picks it);
    `activation_checkpointing = selective` recomputes only its cheap ops
    (norms, activations, element-wise ops, reshapes, dropout) and keeps the
    results of its matmuls and attentions (PyTorch's selective activation
    checkpointing). fsdp-checkpoint-activations checkpoints these units, by
    their own policy, as well as those its `kinds` name.

    `forward_prefetch` and `backward_prefetch` list units (by qualified
    name) whose all-gathers this unit issues once its own gather is done,
    in list order, in the forward or the backward: FSDP2's
    `set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`,
    for prefetching further ahead than the next unit. fsdp-prefetch
    applies them (subject to its all-gather limit).

    ```mlir
    #fsdp.unit
    #fsdp.unit<reshard_after_forward = false>
    #fsdp.unit<reshard_after_forward = 2>
    #fsdp.unit<rank_local = true>
    #fsdp.unit<ignored = local>
    #fsdp.unit<param_dtype = bf16, reduce_dtype = f32, output_dtype = f32,
               cast_forward_inputs = false>
    #fsdp.unit<activation_checkpointing = true>
    #fsdp.unit<activation_checkpointing = selective>
    #fsdp.unit<forward_prefetch = ["h.1", "h.2"], backward_prefetch = ["h.0"]>
    ```
  }];
  let parameters = (ins OptionalParameter<"::mlir::Attribute">:$reshard_after_forward,
                        DefaultValuedParameter<"bool", "false">:$rank_local,
                        OptionalParameter<"::mlir::TypeAttr">:$param_dtype,
                        OptionalParameter<"::mlir::TypeAttr">:$reduce_dtype,
                        OptionalParameter<"::mlir::TypeAttr">:$output_dtype,
                        OptionalParameter<"::mlir::BoolAttr">:$cast_forward_inputs,
                        DefaultValuedParameter<"::mlir::fsdp::IgnoredGradSync",
                            "::mlir::fsdp::IgnoredGradSync::none">:$ignored,
                        DefaultValuedParameter<"::mlir::fsdp::CheckpointPolicy",
                            "::mlir::fsdp::CheckpointPolicy::none">:$activation_checkpointing,
                        OptionalParameter<"::mlir::ArrayAttr">:$forward_prefetch,
                        OptionalParameter<"::mlir::ArrayAttr">:$backward_prefetch);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def FSDP_MeshAttr : FSDP_Attr<"Mesh", "mesh"> {
  let summary = "the device mesh: 1-D [shard] or 2-D [replicate, shard]";
  let description = [{
    Full sharding uses a 1-D mesh of `shard` ranks; hybrid sharding a 2-D
    mesh of `replicate` groups of `shard` ranks (rank = r·shard + s, so a
    shard group is contiguous ranks, as PyTorch's intra-node groups).
    No-shard (DDP) is `replicate = N, shard = 1`.

    ```mlir
    #fsdp.mesh<shard = 4>
    #fsdp.mesh<replicate = 2, shard = 4>
    ```
  }];
  let parameters = (ins "int64_t":$replicate, "int64_t":$shard);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// 1 for a [shard] mesh, 2 for [replicate, shard].
    unsigned getRank() const { return getReplicate() == 0 ? 1 : 2; }
    int64_t getWorldSize() const {
      return getShard() * (getReplicate() == 0 ? 1 : getReplicate());
    }
    /// The number of ranks in `group`, or failure when the mesh lacks it.
    ::mlir::FailureOr<int64_t> getGroupSize(::mlir::fsdp::MeshGroup group) const;
  }];
}

class FSDP_Type<string name, string typeMnemonic>
    : TypeDef<FSDP_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def FSDP_TokenType : FSDP_Type<"Token", "token"> {
  let summary = "an in-flight unshard: the full tensor it will produce";
  let description = [{
    Returned by `fsdp.unshard` (an asynchronous all-gather) and consumed by
    `fsdp.wait`, which yields the gathered tensor.

    ```mlir
    !fsdp.token<tensor<76xf32>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$value_type);
  let assemblyFormat = "`<` $value_type `>`";
}

#endif // FSDP_DIALECT_FSDP_IR_FSDPATTRS_TD
