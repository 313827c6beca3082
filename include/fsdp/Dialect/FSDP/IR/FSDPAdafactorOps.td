//===- FSDPAdafactorOps.td - Adafactor's update, whole and sharded -*- tablegen -*-===//
//
// torch.optim.Adafactor (Shazeer & Stern 2018, as torch implements it) is
// the one optimizer whose state and step are not elementwise: a parameter
// of two or more dimensions keeps its second moment factored into row and
// column means over its last two dimensions, and every update is scaled by
// the parameter's RMS and clipped by the update's RMS. fsdp-build-train-step
// emits one fsdp.adafactor_step per parameter; fsdp-shard rewrites a unit's
// into three ops on its flat shard with two small all-reduces between them:
//
//   stats  = adafactor_stats(param shard, grad shard)  // partial sums
//   stats  = all_reduce(stats) over the shard group
//   state', update_sq = adafactor_factor(grad, state, stats)
//   update_sq = all_reduce(update_sq) over the shard group
//   param' = adafactor_apply(param, grad, state', stats, update_sq)
//
// The factored state is small (rows + columns per matrix) and the same on
// every rank: it is kept whole, not sharded.
//
// A layout (`layout`) lists the flat parameter's parameters, four integers
// each: [flat offset, numel, rows, cols]; rows = cols = 0 for a parameter
// of fewer than two dimensions (not factored), else its last two sizes
// (numel / (rows·cols) is the product of the leading ones, its batch).
// The state holds per parameter, in order: the batch's row means
// (batch·rows) then column means (batch·cols), or for an unfactored one its
// elementwise mean of squares (numel). The stats hold Σ param² per
// parameter, then the state's layout of Σ grad² (over the row, the column,
// or the element).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPADAFACTOROPS_TD
#define FSDP_DIALECT_FSDP_IR_FSDPADAFACTOROPS_TD

def FSDP_AdafactorState : 1DTensorOf<[F32]>;

// torch.optim.Adafactor's hyper-parameters (eps1 default: f32 epsilon).
defvar FSDP_AdafactorHyperParams =
    (ins DefaultValuedAttr<F64Attr, "-0.8">:$beta2_decay,
         DefaultValuedAttr<F64Attr, "1.1920928955078125e-07">:$eps1,
         DefaultValuedAttr<F64Attr, "1e-3">:$eps2,
         DefaultValuedAttr<F64Attr, "1.0">:$d);

def FSDP_AdafactorStepOp : FSDP_Op<"adafactor_step", [Pure,
    DeclareOpInterfaceMethods<StorageAliasOpInterface>]> {
  let summary = "one Adafactor update of a whole parameter";
  let description = [{
    torch.optim.Adafactor's step for one parameter, with `state` as in
    FSDPAdafactorOps.td's layout: t = step + 1, β2ₜ = 1 − t^beta2_decay,
    ρ = min(lr, 1/√t), α = max(eps2, RMS(param))·ρ; param ·= 1 − lr·wd;
    the second moment (factored: row and column means of grad², else
    grad²) moves toward this step's by 1 − β2ₜ; the update grad /
    √max(v̂, eps1²) (factored: v̂ = row·col / max(mean(row), eps1)) is
    divided by max(1, RMS(update)/d) and subtracted times α.

    fsdp-shard rewrites it into fsdp.adafactor_stats, _factor and _apply
    on the flat shard; it is not lowered as such.

    ```mlir
    %p2, %s2 = fsdp.adafactor_step %p, %g, %s step %t {lr = 1.0e-02 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<12xf32>, tensor<i64>) -> (tensor<4x8xf32>, tensor<12xf32>)
    ```
  }];
  let arguments = !con((ins FSDP_DataTensor:$param, FSDP_DataTensor:$grad,
                            FSDP_AdafactorState:$state,
                            FSDP_StepCount:$step,
                            Optional<FSDP_Scalar>:$skip_if, F64Attr:$lr),
                       FSDP_AdafactorHyperParams,
                       (ins DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                            DefaultValuedAttr<F64Attr, "1.0">:$lr_scale));
  let results = (outs FSDP_DataTensor:$new_param,
                      FSDP_AdafactorState:$new_state);
  let assemblyFormat = "$param `,` $grad `,` $state `step` $step "
      "(`skip_if` $skip_if^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def FSDP_AdafactorStatsOp : FSDP_Op<"adafactor_stats", [Pure]> {
  let summary = "this rank's partial sums of Adafactor's statistics";
  let description = [{
    Over the elements of the flat parameter this rank's shard holds (shard
    s of a shard group holds elements [s·n, (s+1)·n); a rank-local shard
    all of them): Σ param² per parameter, then Σ grad² per row, column or
    element in the state's layout. Summed over the shard group they are the
    whole parameters'.

    ```mlir
    %stats = fsdp.adafactor_stats %p, %g {layout = array<i64: 0, 32, 4, 8>} : (tensor<16xf32>, tensor<16xf32>) -> tensor<13xf32>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$param, FSDP_FlatTensor:$grad,
                       DenseI64ArrayAttr:$layout);
  let results = (outs FSDP_AdafactorState:$stats);
  let assemblyFormat =
      "$param `,` $grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def FSDP_AdafactorFactorOp : FSDP_Op<"adafactor_factor", [Pure,
    DeclareOpInterfaceMethods<StorageAliasOpInterface>]> {
  let summary = "Adafactor's second moments, and this rank's Σ update²";
  let description = [{
    From the statistics summed over the shard group: the state moved toward
    this step's means of grad² (unchanged when `skip_if` is non-zero), and
    per parameter the sum of the squared update over this rank's elements,
    which summed over the shard group gives the update's RMS. It reads the
    gradient; `param` (unchanged) names the flat shard it belongs to.

    ```mlir
    %s2, %usq = fsdp.adafactor_factor %p, %g, %s, %stats step %t {layout = array<i64: 0, 32, 4, 8>} : (tensor<16xf32>, tensor<16xf32>, tensor<12xf32>, tensor<13xf32>, tensor<i64>) -> (tensor<12xf32>, tensor<1xf32>)
    ```
  }];
  let arguments = !con((ins FSDP_FlatTensor:$param, FSDP_FlatTensor:$grad,
                            FSDP_AdafactorState:$state,
                            FSDP_AdafactorState:$stats,
                            FSDP_StepCount:$step,
                            Optional<FSDP_Scalar>:$skip_if,
                            DenseI64ArrayAttr:$layout),
                       FSDP_AdafactorHyperParams);
  let results = (outs FSDP_AdafactorState:$new_state,
                      FSDP_AdafactorState:$update_sq);
  let assemblyFormat = "$param `,` $grad `,` $state `,` $stats `step` $step "
      "(`skip_if` $skip_if^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def FSDP_AdafactorApplyOp : FSDP_Op<"adafactor_apply", [Pure,
    DeclareOpInterfaceMethods<StorageAliasOpInterface>]> {
  let summary = "Adafactor's update of this rank's shard";
  let description = [{
    param ·= 1 − lr·wd, then param −= α / max(1, RMS(update)/d) · update,
    with the parameter's RMS from `stats` and the update's from
    `update_sq` (both summed over the shard group), the update recomputed
    from `state` (fsdp.adafactor_factor's). Parameter groups as for
    fsdp.adamw_step (`lr_scale`, `segment_*`); nothing changes when
    `skip_if` is non-zero.

    ```mlir
    %p2 = fsdp.adafactor_apply %p, %g, %s2, %stats, %usq step %t {layout = array<i64: 0, 32, 4, 8>, lr = 1.0e-02 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<12xf32>, tensor<13xf32>, tensor<1xf32>, tensor<i64>) -> tensor<16xf32>
    ```
  }];
  let arguments = !con((ins FSDP_FlatTensor:$param, FSDP_FlatTensor:$grad,
                            FSDP_AdafactorState:$state,
                            FSDP_AdafactorState:$stats,
                            FSDP_AdafactorState:$update_sq,
                            FSDP_StepCount:$step,
                            Optional<FSDP_Scalar>:$skip_if,
                            DenseI64ArrayAttr:$layout, F64Attr:$lr),
                       FSDP_AdafactorHyperParams,
                       (ins DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                            DefaultValuedAttr<F64Attr, "1.0">:$lr_scale,
                            OptionalAttr<DenseI64ArrayAttr>:$segment_starts,
                            OptionalAttr<DenseF64ArrayAttr>:$segment_lr_scales,
                            OptionalAttr<DenseF64ArrayAttr>:$segment_weight_decays));
  let results = (outs FSDP_FlatTensor:$new_param);
  let assemblyFormat = "$param `,` $grad `,` $state `,` $stats `,` $update_sq "
      "`step` $step (`skip_if` $skip_if^)? attr-dict `:` "
      "functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // FSDP_DIALECT_FSDP_IR_FSDPADAFACTOROPS_TD
