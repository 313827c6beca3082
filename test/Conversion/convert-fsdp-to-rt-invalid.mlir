// Steps the lowering cannot take are errors at the op or model that stops it.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 lower=true" -verify-diagnostics
// RUN: not fsdp-opt %examples/mlp.mlir --convert-fsdp-to-rt 2>&1 | FileCheck %s --check-prefix=UNSCHEDULED
// RUN: echo 'func.func @f() { return }' | not fsdp-opt --convert-fsdp-to-rt 2>&1 | FileCheck %s --check-prefix=NOMODEL

// UNSCHEDULED: mlp.mlir:4:1: error: 'fsdp.model' op has no sharded train step to lower; run fsdp-pipeline (or fsdp-shard and fsdp-insert-collectives) first
// NOMODEL: error: convert-fsdp-to-rt: expected one fsdp.model with its scheduled train step, found 0 models

// A buffer update the runtime cannot compute in place (an integer buffer
// doubled rather than incremented by a constant) is an error naming the
// buffer, not an update silently dropped.
// expected-error @+1 {{'func.return' op result #3 (buffer 'count'), computed by arith.addi, is not the loss, the step count or an in-place update of an argument; the runtime cannot return it}}
fsdp.model @counter {
  fsdp.module @root kind "Net" unit {
    fsdp.param @weight : tensor<4x8xf32> init <normal(0.0, 1.0)>
    fsdp.buffer @count : tensor<i64> init <zeros>
    fsdp.forward (%x: tensor<2x8xf32>) -> tensor<f32> {
      %w = fsdp.get_param @weight : tensor<4x8xf32>
      %y = nn.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
      %n = fsdp.get_buffer @count : tensor<i64>
      %n1 = arith.addi %n, %n : tensor<i64>
      fsdp.set_buffer @count, %n1 : tensor<i64>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
