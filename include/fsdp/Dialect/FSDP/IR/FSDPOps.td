//===- FSDPOps.td - fsdp dialect operations ------------------*- tablegen -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPOPS_TD
#define FSDP_DIALECT_FSDP_IR_FSDPOPS_TD

include "fsdp/Dialect/FSDP/IR/FSDPAttrs.td"
include "fsdp/Interfaces/StorageAliasOpInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def FSDP_DataTensor : StaticShapeTensorOf<[F32, BF16, F16]>;
def FSDP_StateTensor : StaticShapeTensorOf<[F32, BF16, F16, I32, I64]>;
def FSDP_FlatTensor : 1DTensorOf<[F32, BF16, F16]>;

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

def FSDP_ModelOp : FSDP_Op<"model", [Symbol, SymbolTable, IsolatedFromAbove,
    NoRegionArguments, NoTerminator, SingleBlock]> {
  let summary = "a model: the root of a module tree";
  let description = [{
    Holds exactly one `fsdp.module`, the root (the object a user hands to
    FullyShardedDataParallel). Fully-qualified names of parameters are paths
    from the root, without the root's own name (`module.1.0.weight`), as
    `named_parameters()` gives them. The root's forward returns the loss
    (a 0-d float tensor) first.

    ```mlir
    fsdp.model @mlp {
      fsdp.module @root kind "MLP" { ... }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The root module (null on unverified IR without one).
    NNModuleOp getRoot();
  }];
}

// The C++ class is NNModuleOp (a torch.nn.Module) so that it never shadows the
// builtin mlir::ModuleOp inside namespace mlir::fsdp.
def FSDP_NNModuleOp : FSDP_Op<"module", [Symbol, SymbolTable,
    IsolatedFromAbove, NoRegionArguments, NoTerminator, SingleBlock,
    ParentOneOf<["ModelOp", "NNModuleOp"]>]> {
  let summary = "a module: parameters, buffers, children and its forwards";
  let description = [{
    The symbol is the attribute name under which the parent holds the module
    (`@"0"` for the first entry of a Sequential), `kind` its class name. The
    body declares `fsdp.param`s and `fsdp.buffer`s, nested modules and its
    `fsdp.forward`s: none for a container such as ModuleList (never called),
    one per signature for a module called on inputs of different types (a
    shared encoder run on queries and on longer documents), each taking
    other input types; the root has exactly one. A `unit` marks the module
    as an FSDP unit.

    ```mlir
    fsdp.module @"0" kind "Linear" unit {
      fsdp.param @weight : tensor<16x4xf32> init <kaiming_uniform(2.2360679774997898)>
      fsdp.param @bias : tensor<16xf32> init <uniform(-0.5, 0.5)>
      fsdp.forward (%x: tensor<4x4xf32>) -> tensor<4x16xf32> {
        %w = fsdp.get_param @weight : tensor<16x4xf32>
        %b = fsdp.get_param @bias : tensor<16xf32>
        %y = nn.linear %x, %w, %b : (tensor<4x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<4x16xf32>
        fsdp.return %y : tensor<4x16xf32>
      }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind,
                       OptionalAttr<FSDP_UnitAttr>:$unit);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `kind` $kind `` custom<UnitMark>($unit) "
                       "attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The first forward function (the root's only one), or null for a
    /// container.
    ForwardOp getForward();
    /// The forward taking `inputs`, or null where none does.
    ForwardOp lookupForward(::mlir::TypeRange inputs);
    /// Whether this module is an FSDP unit.
    bool isUnit() { return getUnitAttr() != nullptr; }
    /// Whether this is the model's root module.
    bool isRoot() { return ::llvm::isa<ModelOp>((*this)->getParentOp()); }
    /// Dotted path from the root ("" for the root), as named_modules().
    std::string getQualifiedName();
  }];
}

def FSDP_ParamOp : FSDP_Op<"param", [Symbol, HasParent<"NNModuleOp">]> {
  let summary = "a parameter (nn.Parameter) of the enclosing module";
  let description = [{
    ```mlir
    fsdp.param @weight : tensor<16x8xf32> init <normal(0.0, 0.02)>
    fsdp.param @frozen : tensor<8xf32> init <zeros> {requires_grad = false}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FSDP_DataTensor>:$type,
                       FSDP_InitAttr:$init,
                       DefaultValuedAttr<BoolAttr, "true">:$requires_grad);
  let assemblyFormat = "$sym_name `:` $type `init` $init attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def FSDP_BufferOp : FSDP_Op<"buffer", [Symbol, HasParent<"NNModuleOp">]> {
  let summary = "a buffer (register_buffer): state that is not trained";
  let description = [{
    Buffers are replicated, not sharded (as in PyTorch FSDP). Non-persistent
    buffers are left out of checkpoints.

    ```mlir
    fsdp.buffer @running_mean : tensor<16xf32> init <zeros>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FSDP_StateTensor>:$type,
                       FSDP_InitAttr:$init,
                       DefaultValuedAttr<BoolAttr, "true">:$persistent);
  let assemblyFormat = "$sym_name `:` $type `init` $init attr-dict";
  let hasVerifier = 1;
}

def FSDP_ForwardOp : FSDP_Op<"forward", [HasParent<"NNModuleOp">,
    IsolatedFromAbove]> {
  let summary = "a forward function of the enclosing module";
  let description = [{
    Its block arguments are the forward's inputs; `fsdp.return` yields the
    outputs. Parameters and buffers are read with `fsdp.get_param` /
    `fsdp.get_buffer`, children are run with `fsdp.call`.

    ```mlir
    fsdp.forward (%x: tensor<4x8xf32>) -> tensor<4x8xf32> { ... }
    ```
  }];
  let arguments = (ins TypeAttrOf<FunctionType>:$function_type);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
}

def FSDP_ReturnOp : FSDP_Op<"return", [Pure, HasParent<"ForwardOp">,
    ReturnLike, Terminator]> {
  let summary = "returns the outputs of a forward";
  let description = [{
    In the root module's forward the first output is the loss; `names`
    (optional, one per output) names them, and an eval step (mode=eval)
    returns the named outputs after the loss, e.g. the logits a sampler
    reads:

    ```mlir
    fsdp.return {names = ["loss", "logits"]} %loss, %logits
        : tensor<f32>, tensor<8x64x128xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$operands,
                       OptionalAttr<StrArrayAttr>:$names);
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
  let hasVerifier = 1;
}

def FSDP_CallOp : FSDP_Op<"call", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs the forward of a descendant module";
  let description = [{
    `callee` names a module of the caller's subtree (`@"1"`, or a nested
    path such as `@transformer::@h::@"0"`); the operand types pick the
    module's forward taking them, and the result types must match its
    results. A module may be called several times (shared module), on
    several signatures where it has a forward for each.

    ```mlir
    %y = fsdp.call @"1"(%x) : (tensor<4x4xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins SymbolRefAttr:$callee, Variadic<AnyType>:$operands);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat =
      "$callee `(` $operands `)` attr-dict `:` functional-type($operands, results)";
}

class FSDP_StateAccessOp<string mnemonic, list<Trait> traits = []>
    : FSDP_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>])>;

def FSDP_GetParamOp : FSDP_StateAccessOp<"get_param", [Pure]> {
  let summary = "reads a parameter of the module's subtree";
  let description = [{
    `param` names a parameter of the enclosing module or of a descendant
    (`@wte::@weight`). Reading the same parameter from several modules ties
    it: it then belongs to the lowest FSDP unit enclosing all its readers.

    ```mlir
    %w = fsdp.get_param @weight : tensor<16x4xf32>
    ```
  }];
  let arguments = (ins SymbolRefAttr:$param);
  let results = (outs FSDP_DataTensor:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

def FSDP_GetBufferOp : FSDP_StateAccessOp<"get_buffer", [Pure]> {
  let summary = "reads a buffer of the module's subtree";
  let arguments = (ins SymbolRefAttr:$buffer);
  let results = (outs FSDP_StateTensor:$result);
  let assemblyFormat = "$buffer attr-dict `:` type($result)";
}

def FSDP_SetBufferOp : FSDP_StateAccessOp<"set_buffer"> {
  let summary = "stores a new value into a buffer (e.g. BatchNorm statistics)";
  let description = [{
    ```mlir
    fsdp.set_buffer @running_mean, %new_mean : tensor<16xf32>
    ```
  }];
  let arguments = (ins SymbolRefAttr:$buffer, FSDP_StateTensor:$value);
  let assemblyFormat = "$buffer `,` $value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def FSDP_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::fsdp";
  let description = [{
    An op that moves data between ranks: the collectives it issues, in
    order, and the stream they run on (Collectives.h). The one definition
    the report, the step-time model and the lowering read.
  }];
  let methods = [
    InterfaceMethod<"The collectives this op issues, in issue order; none "
                    "when no rank has data to exchange.",
      "::llvm::SmallVector<::mlir::fsdp::CollectiveStep, 2>",
      "getCollectiveSteps">,
    InterfaceMethod<"The stream the collectives run on.",
      "::mlir::fsdp::StreamKind", "getStream">,
  ];
}

class FSDP_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : FSDP_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<FSDP_CollectiveOpInterface>])> {
  let results = (outs FSDP_DataTensor:$result);
  let hasVerifier = 1;
  code commonDescription = [{
    `mesh` and `group` say which ranks take part: `world` (every rank of the
    mesh), `shard` (the ranks sharing one replica) or `replicate` (the ranks
    holding the same shard across replicas; 2-D meshes only). `dtype` is the
    element type on the wire; the operand and result must have it, so that a
    mixed-precision mismatch is a verifier error rather than a silent cast.
  }];
}

def FSDP_AllGatherOp : FSDP_CollectiveOp<"all_gather"> {
  let summary = "concatenates every rank's tensor along dim 0, in rank order";
  let description = commonDescription # [{
    The result's dim 0 is the input's dim 0 × the group size.

    ```mlir
    %full = fsdp.all_gather %shard mesh<shard = 4> group shard dtype bf16 : tensor<19xbf16> -> tensor<76xbf16>
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$input, FSDP_MeshAttr:$mesh,
                       FSDP_MeshGroupAttr:$group, TypeAttr:$dtype);
  let assemblyFormat = "$input `mesh` `` $mesh `group` `` $group `dtype` $dtype "
                       "attr-dict `:` type($input) `->` type($result)";
}

def FSDP_ReduceScatterOp : FSDP_CollectiveOp<"reduce_scatter"> {
  let summary = "reduces across ranks; rank r keeps the r-th dim-0 chunk";
  let description = commonDescription # [{
    result = reduce(input_r / pre_divide) / post_divide, where `avg` also
    divides by the group size. FSDP1 uses `sum` with pre × post = group size
    to keep half-precision sums in range. The input's dim 0 is the result's
    dim 0 × the group size.

    ```mlir
    %g = fsdp.reduce_scatter %grad mesh<shard = 4> group shard dtype f32 sum {pre_divide = 2.0 : f64, post_divide = 2.0 : f64} : tensor<76xf32> -> tensor<19xf32>
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$input, FSDP_MeshAttr:$mesh,
                       FSDP_MeshGroupAttr:$group, TypeAttr:$dtype,
                       FSDP_ReduceKindAttr:$reduce,
                       DefaultValuedAttr<F64Attr, "1.0">:$pre_divide,
                       DefaultValuedAttr<F64Attr, "1.0">:$post_divide);
  let assemblyFormat = "$input `mesh` `` $mesh `group` `` $group `dtype` $dtype "
                       "`` $reduce attr-dict `:` type($input) `->` type($result)";
}

def FSDP_AllReduceOp : FSDP_CollectiveOp<"all_reduce", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "reduces across ranks; every rank gets the result";
  let description = commonDescription # [{
    ```mlir
    %n = fsdp.all_reduce %sq mesh<shard = 4> group world dtype f32 sum : tensor<1xf32>
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$input, FSDP_MeshAttr:$mesh,
                       FSDP_MeshGroupAttr:$group, TypeAttr:$dtype,
                       FSDP_ReduceKindAttr:$reduce,
                       DefaultValuedAttr<F64Attr, "1.0">:$pre_divide,
                       DefaultValuedAttr<F64Attr, "1.0">:$post_divide);
  let assemblyFormat = "$input `mesh` `` $mesh `group` `` $group `dtype` $dtype "
                       "`` $reduce attr-dict `:` type($input)";
}

def FSDP_BroadcastOp : FSDP_CollectiveOp<"broadcast", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "every rank gets the group-local rank `root`'s tensor";
  let description = commonDescription # [{
    ```mlir
    %p = fsdp.broadcast %x mesh<shard = 4> group world dtype f32 root 0 : tensor<16xf32>
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$input, FSDP_MeshAttr:$mesh,
                       FSDP_MeshGroupAttr:$group, TypeAttr:$dtype,
                       I64Attr:$root);
  let assemblyFormat = "$input `mesh` `` $mesh `group` `` $group `dtype` $dtype "
                       "`root` $root attr-dict `:` type($input)";
}

//===----------------------------------------------------------------------===//
// Schedule
//===----------------------------------------------------------------------===//

def FSDP_UnshardOp : FSDP_Op<"unshard", [
    DeclareOpInterfaceMethods<FSDP_CollectiveOpInterface>]> {
  let summary = "starts gathering a unit's flat parameter (asynchronous)";
  let description = [{
    Issues the all-gather of `unit`'s local shard over the shard group and
    returns a token; `fsdp.wait` yields the full flat parameter. `unit` is
    the unit's fully-qualified module name ("" for the root). Placing the
    unshard early is prefetching. With `post_forward_group = N` it gathers
    a `fsdp.post_forward_shard` instead, over this rank's group of N
    consecutive ranks of the shard group (FSDP2's reshard_after_forward=N).

    ```mlir
    %t = fsdp.unshard %shard unit "module.1" mesh<shard = 2> : tensor<136xf32> -> !fsdp.token<tensor<272xf32>>
    %t2 = fsdp.unshard %part unit "module.1" mesh<shard = 4> {post_forward_group = 2 : i64} : tensor<136xf32> -> !fsdp.token<tensor<272xf32>>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$shard, StrAttr:$unit,
                       FSDP_MeshAttr:$mesh,
                       OptionalAttr<I64Attr>:$post_forward_group);
  let results = (outs FSDP_TokenType:$token);
  let assemblyFormat = "$shard `unit` $unit `mesh` `` $mesh attr-dict `:` "
                       "type($shard) `->` qualified(type($token))";
  let hasVerifier = 1;
}

def FSDP_WaitOp : FSDP_Op<"wait", [
    TypesMatchWith<"result is the token's tensor", "token", "result",
                   "::llvm::cast<::mlir::fsdp::TokenType>($_self).getValueType()">]> {
  let summary = "waits for an unshard and yields the full flat parameter";
  let description = [{
    ```mlir
    %full = fsdp.wait %t : !fsdp.token<tensor<272xf32>>
    ```
  }];
  let arguments = (ins FSDP_TokenType:$token);
  let results = (outs FSDP_FlatTensor:$result);
  let assemblyFormat = "$token attr-dict `:` qualified(type($token))";
}

def FSDP_ReshardOp : FSDP_Op<"reshard"> {
  let summary = "frees a unit's full flat parameter";
  let description = [{
    After it, `full` must not be used (the memory plan reuses its bytes).

    ```mlir
    fsdp.reshard %full unit "module.1" : tensor<272xf32>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$full, StrAttr:$unit);
  let assemblyFormat = "$full `unit` $unit attr-dict `:` type($full)";
}

def FSDP_PostForwardShardOp : FSDP_Op<"post_forward_shard"> {
  let summary = "keeps this rank's 1/N of a gathered unit after the forward";
  let description = [{
    FSDP2's `reshard_after_forward = N` (ZeRO++ hpZ): of the full flat
    parameter, the rank keeps chunk `i` of N equal chunks, `i` its position
    in its group of N consecutive ranks (FSDP2 views the mesh as
    `(-1, N)`); a local copy, no communication. The backward gathers it back
    with `fsdp.unshard ... {post_forward_group = N}` over that group.

    ```mlir
    %part = fsdp.post_forward_shard %full unit "module.1" group 2 : tensor<272xf32> -> tensor<136xf32>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$full, StrAttr:$unit,
                       I64Attr:$group);
  let results = (outs FSDP_FlatTensor:$result);
  let assemblyFormat = "$full `unit` $unit `group` $group attr-dict `:` "
                       "type($full) `->` type($result)";
  let hasVerifier = 1;
}

def FSDP_ReduceGradsOp : FSDP_Op<"reduce_grads", [
    DeclareOpInterfaceMethods<FSDP_CollectiveOpInterface>]> {
  let summary = "reduces a unit's full flat gradient to the local shard";
  let description = [{
    Reduce-scatter over the shard group, then all-reduce over the replicate
    group of a 2-D mesh (hybrid sharding); with `shard = 1` it is the
    all-reduce of no-shard (DDP). `reduce`, `pre_divide` and `post_divide`
    mean what they mean on `fsdp.reduce_scatter`.

    ```mlir
    %g = fsdp.reduce_grads %grad unit "module.1" mesh<shard = 2> avg : tensor<272xf32> -> tensor<136xf32>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$grad, StrAttr:$unit,
                       FSDP_MeshAttr:$mesh, FSDP_ReduceKindAttr:$reduce,
                       DefaultValuedAttr<F64Attr, "1.0">:$pre_divide,
                       DefaultValuedAttr<F64Attr, "1.0">:$post_divide);
  let results = (outs FSDP_FlatTensor:$result);
  let assemblyFormat = "$grad `unit` $unit `mesh` `` $mesh `` $reduce attr-dict "
                       "`:` type($grad) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def FSDP_StepCount : 0DTensorOf<[I64]>;
def FSDP_Scalar : 0DTensorOf<[F32]>;

def FSDP_SGDStepOp : FSDP_Op<"sgd_step", [Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<StorageAliasOpInterface>]> {
  let summary = "one torch.optim.SGD update of a parameter (or a shard of it)";
  let description = [{
    PyTorch's SGD exactly: g = grad + weight_decay·param; with momentum, the
    buffer is g on the first step (`step` = 0 previous steps) and
    momentum·buffer + (1 − dampening)·g after; nesterov uses
    g + momentum·buffer; param − lr·g. `momentum_buffer` is present exactly
    when `momentum` is non-zero. Elementwise, so it applies to a flat shard
    as well as to a whole parameter. The gradient may be in a lower precision
    than the parameter (keep_low_precision_grads); the update is computed in
    the parameter's dtype.

    Parameter groups: the update applies `lr`·`lr_scale` (the parameter's
    group's lr multiplier). On a flat shard whose parameters belong to
    different groups, `segment_starts` (increasing offsets into the flat
    parameter, the first 0), `segment_lr_scales` and
    `segment_weight_decays` give each run of elements its group's lr scale
    and weight decay; the shard of rank r of a shard group of S ranks is
    elements [r·n, (r+1)·n) of the flat parameter (a rank-local unit's
    shard is all of it), so each rank updates its part of every run.
    `lr_scale` and `weight_decay` are then the first segment's.

    With `skip_if` (a loss scaler's found-inf flag, 0 or 1) the update does
    nothing when the flag is non-zero: parameter and state are returned as
    they were, as GradScaler skips optimizer.step().

    ```mlir
    %p2, %m2 = fsdp.sgd_step %p, %g momentum_buffer %m step %s {lr = 1.0e-02 : f64, momentum = 9.0e-01 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$param, FSDP_DataTensor:$grad,
                       Optional<FSDP_DataTensor>:$momentum_buffer,
                       FSDP_StepCount:$step, Optional<FSDP_Scalar>:$skip_if,
                       F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$nesterov,
                       DefaultValuedAttr<F64Attr, "1.0">:$lr_scale,
                       OptionalAttr<DenseI64ArrayAttr>:$segment_starts,
                       OptionalAttr<DenseF64ArrayAttr>:$segment_lr_scales,
                       OptionalAttr<DenseF64ArrayAttr>:$segment_weight_decays);
  let results = (outs FSDP_DataTensor:$new_param,
                      Optional<FSDP_DataTensor>:$new_momentum_buffer);
  let assemblyFormat = "$param `,` $grad (`momentum_buffer` $momentum_buffer^)? "
      "`step` $step (`skip_if` $skip_if^)? attr-dict `:` "
      "functional-type(operands, results)";
  let hasVerifier = 1;
}

def FSDP_AdamWStepOp : FSDP_Op<"adamw_step", [Pure,
    DeclareOpInterfaceMethods<StorageAliasOpInterface>]> {
  let summary = "one torch.optim.AdamW (or Adam) update of a parameter (or a shard of it)";
  let description = [{
    PyTorch's AdamW (amsgrad off): with t = step + 1, param ·= 1 − lr·wd;
    m = β1·m + (1 − β1)·g; v = β2·v + (1 − β2)·g²;
    param −= lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + eps).

    With `l2_weight_decay` it is torch.optim.Adam instead: the weight decay
    is an L2 penalty, g = grad + wd·param before the moments, and the
    parameter is not decayed (the same moments, so the same state names).

    Parameter groups: the update applies `lr`·`lr_scale` (the parameter's
    group's lr multiplier). On a flat shard whose parameters belong to
    different groups, `segment_starts` (increasing offsets into the flat
    parameter, the first 0), `segment_lr_scales` and
    `segment_weight_decays` give each run of elements its group's lr scale
    and weight decay; the shard of rank r of a shard group of S ranks is
    elements [r·n, (r+1)·n) of the flat parameter (a rank-local unit's
    shard is all of it), so each rank updates its part of every run.
    `lr_scale` and `weight_decay` are then the first segment's.

    With `skip_if` (a loss scaler's found-inf flag) the update does nothing
    when the flag is non-zero, as for fsdp.sgd_step.

    ```mlir
    %p2, %m2, %v2 = fsdp.adamw_step %p, %g, %m, %v step %s {lr = 1.0e-03 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$param, FSDP_DataTensor:$grad,
                       FSDP_DataTensor:$exp_avg, FSDP_DataTensor:$exp_avg_sq,
                       FSDP_StepCount:$step, Optional<FSDP_Scalar>:$skip_if,
                       F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, "1e-8">:$eps,
                       DefaultValuedAttr<F64Attr, "1e-2">:$weight_decay,
                       UnitAttr:$l2_weight_decay,
                       DefaultValuedAttr<F64Attr, "1.0">:$lr_scale,
                       OptionalAttr<DenseI64ArrayAttr>:$segment_starts,
                       OptionalAttr<DenseF64ArrayAttr>:$segment_lr_scales,
                       OptionalAttr<DenseF64ArrayAttr>:$segment_weight_decays);
  let results = (outs FSDP_DataTensor:$new_param, FSDP_DataTensor:$new_exp_avg,
                      FSDP_DataTensor:$new_exp_avg_sq);
  let assemblyFormat = "$param `,` $grad `,` $exp_avg `,` $exp_avg_sq `step` "
      "$step (`skip_if` $skip_if^)? attr-dict `:` "
      "functional-type(operands, results)";
  let hasVerifier = 1;
}

def FSDP_LionStepOp : FSDP_Op<"lion_step", [Pure,
    DeclareOpInterfaceMethods<StorageAliasOpInterface>]> {
  let summary = "one Lion update of a parameter (or a shard of it)";
  let description = [{
    Lion (Chen et al. 2023, "Symbolic Discovery of Optimization
    Algorithms"): c = β1·m + (1 − β1)·g; param ·= 1 − lr·wd;
    param −= lr·sign(c); m = β2·m + (1 − β2)·g. One state tensor,
    `exp_avg` (m). No bias correction, so `step` only orders the update.

    Parameter groups (`lr_scale`, `segment_*`) and `skip_if` as for
    fsdp.adamw_step.

    ```mlir
    %p2, %m2 = fsdp.lion_step %p, %g, %m step %s {lr = 1.0e-04 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$param, FSDP_DataTensor:$grad,
                       FSDP_DataTensor:$exp_avg,
                       FSDP_StepCount:$step, Optional<FSDP_Scalar>:$skip_if,
                       F64Attr:$lr,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.99">:$beta2,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<F64Attr, "1.0">:$lr_scale,
                       OptionalAttr<DenseI64ArrayAttr>:$segment_starts,
                       OptionalAttr<DenseF64ArrayAttr>:$segment_lr_scales,
                       OptionalAttr<DenseF64ArrayAttr>:$segment_weight_decays);
  let results = (outs FSDP_DataTensor:$new_param,
                      FSDP_DataTensor:$new_exp_avg);
  let assemblyFormat = "$param `,` $grad `,` $exp_avg `step` $step "
      "(`skip_if` $skip_if^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

include "fsdp/Dialect/FSDP/IR/FSDPAdafactorOps.td"

def FSDP_LossScaleOp : FSDP_Op<"loss_scale", [Pure]> {
  let summary = "the dynamic loss scale of this step, or its inverse";
  let description = [{
    torch.amp's GradScaler: the runner sets the scale before each step (it
    grows and backs off between steps, outside the program). The step seeds
    the loss cotangent with it and multiplies the gradients by the inverse
    (`inverse`) before the optimizer. Scales are powers of two, so both are
    exact.

    ```mlir
    %s = fsdp.loss_scale : tensor<f32>
    %inv = fsdp.loss_scale {inverse} : tensor<f32>
    ```
  }];
  let arguments = (ins UnitAttr:$inverse);
  let results = (outs FSDP_Scalar:$scale);
  let assemblyFormat = "attr-dict `:` type($scale)";
}

def FSDP_FoundNonfiniteOp : FSDP_Op<"found_nonfinite", [Pure]> {
  let summary = "1 if any element of the gradients is inf or NaN, else 0";
  let description = [{
    GradScaler's found_inf over this rank's gradients (the shards once
    fsdp-shard has run, which then sums the flags over the shard group so
    that every rank skips the same steps).

    ```mlir
    %found = fsdp.found_nonfinite %g0, %g1 : tensor<16xf32>, tensor<4xf32> -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<FSDP_DataTensor>:$grads);
  let results = (outs FSDP_Scalar:$found);
  let assemblyFormat = "$grads attr-dict `:` type($grads) `->` type($found)";
}

def FSDP_ClipGradNormOp : FSDP_Op<"clip_grad_norm", [Pure,
    AllTypesMatch<["total", "norm", "coefficient"]>]> {
  let summary = "total gradient norm and clipping coefficient";
  let description = [{
    torch.nn.utils.clip_grad_norm_(max_norm, norm_type): `total` is
    Σ|g|^p over every gradient element for a finite `norm_type` p (> 0;
    default 2, the sum of squares), or max |g| for p = inf; over all ranks
    once the shard pass adds the all-reduce (a sum, or a max for inf).
    Returns the total norm, total^(1/p) (total itself for inf), and
    min(1, max_norm / (norm + 1e-6)).

    ```mlir
    %norm, %coef = fsdp.clip_grad_norm %sum_sq {max_norm = 1.0 : f64} : tensor<f32>
    %norm, %coef = fsdp.clip_grad_norm %max_abs {max_norm = 1.0 : f64, norm_type = 0x7FF0000000000000 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins FSDP_Scalar:$total, F64Attr:$max_norm,
                       DefaultValuedAttr<F64Attr, "2.0">:$norm_type);
  let results = (outs FSDP_Scalar:$norm, FSDP_Scalar:$coefficient);
  let assemblyFormat = "$total attr-dict `:` type($total)";
  let hasVerifier = 1;
}

def FSDP_MaxAbsOp : FSDP_Op<"max_abs", [Pure]> {
  let summary = "the largest |element| of the gradients";
  let description = [{
    The partial of clip_grad_norm_'s inf norm: max |g| over every element
    of the operands (0 for none), NaN if any element is NaN, in f32
    whatever the gradients' dtype.

    ```mlir
    %m = fsdp.max_abs %g0, %g1 : tensor<16xf32>, tensor<4xbf16> -> tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<FSDP_DataTensor>:$grads);
  let results = (outs FSDP_Scalar:$max);
  let assemblyFormat = "$grads attr-dict `:` type($grads) `->` type($max)";
}

//===----------------------------------------------------------------------===//
// Flat parameters
//===----------------------------------------------------------------------===//

def FSDP_ViewOp : FSDP_Op<"view", [Pure,
    DeclareOpInterfaceMethods<StorageAliasOpInterface, ["isStorageRename"]>]> {
  let summary = "an original parameter inside a unit's full flat parameter";
  let description = [{
    The elements [offset, offset + numel) of `flat`, with the parameter's
    shape: FlatParameter's views. No copy at run time.

    ```mlir
    %w = fsdp.view %full[0] : tensor<76xf32> -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$flat,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$offset);
  let results = (outs FSDP_DataTensor:$result);
  let assemblyFormat = "$flat `[` $offset `]` attr-dict `:` type($flat) `->` "
                       "type($result)";
  let hasVerifier = 1;
}

def FSDP_FlattenOp : FSDP_Op<"flatten", [Pure]> {
  let summary = "a unit's flat gradient from its parameters' gradients";
  let description = [{
    Concatenates the operands in order, flattened, and pads with zeros to
    the result's size (a multiple of the shard group size).

    ```mlir
    %flat = fsdp.flatten %gw, %gb : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<40xf32>
    ```
  }];
  let arguments = (ins Variadic<FSDP_DataTensor>:$inputs);
  let results = (outs FSDP_FlatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// CPU offload
//===----------------------------------------------------------------------===//

def FSDP_ToDeviceOp : FSDP_Op<"to_device", [Pure, SameOperandsAndResultType]> {
  let summary = "a host-resident tensor copied to the device";
  let description = [{
    CPU offload (fsdp-cpu-offload): a sharded parameter held in host memory
    is copied host-to-device right before the device reads it (its
    all-gather), on the host-to-device stream, as FSDP's pre-unshard copy.
    The result lives on the device until its last use.

    ```mlir
    %d = fsdp.to_device %shard : tensor<38xf32>
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$input);
  let results = (outs FSDP_DataTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def FSDP_ToHostOp : FSDP_Op<"to_host", [Pure, SameOperandsAndResultType]> {
  let summary = "a device tensor copied to host memory";
  let description = [{
    CPU offload (fsdp-cpu-offload): what the optimizer, which runs on the
    host, reads from the device (a reduced gradient shard, the loss
    scaler's found-inf flag) is copied device-to-host right after it is
    computed, on the device-to-host stream, into a host buffer held for the
    whole run (FSDP's pinned `_cpu_grad`).

    ```mlir
    %h = fsdp.to_host %grad_shard : tensor<38xf32>
    ```
  }];
  let arguments = (ins FSDP_DataTensor:$input);
  let results = (outs FSDP_DataTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

#endif // FSDP_DIALECT_FSDP_IR_FSDPOPS_TD
