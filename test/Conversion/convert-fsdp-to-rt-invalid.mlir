// Steps the lowering cannot take are errors at the op or model that stops it.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 lower=true" -verify-diagnostics
// RUN: not fsdp-opt %examples/mlp.mlir --convert-fsdp-to-rt 2>&1 | FileCheck %s --check-prefix=UNSCHEDULED
// RUN: echo 'func.func @f() { return }' | not fsdp-opt --convert-fsdp-to-rt 2>&1 | FileCheck %s --check-prefix=NOMODEL

// UNSCHEDULED: mlp.mlir:4:1: error: 'fsdp.model' op has no sharded train step to lower; run fsdp-pipeline (or fsdp-shard and fsdp-insert-collectives) first
// NOMODEL: error: convert-fsdp-to-rt: expected one fsdp.model with its scheduled train step, found 0 models

// Dropout has no runtime lowering yet: the error points at the op.
fsdp.model @drop {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4x4xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<2x4xf32>, %t: tensor<2x4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4x4xf32>
      %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      // expected-error @+1 {{'nn.dropout' op has no runtime lowering in convert-fsdp-to-rt yet}}
      %d = nn.dropout %y {p = 0.1 : f64, rng_id = 0 : i64} : tensor<2x4xf32>
      %l = nn.mse_loss %d, %t : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
