// Steps the lowering cannot take are errors at the op or model that stops it.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 lower=true" -verify-diagnostics -split-input-file
// RUN: not fsdp-opt %examples/mlp.mlir --convert-fsdp-to-rt 2>&1 | FileCheck %s --check-prefix=UNSCHEDULED
// RUN: echo 'func.func @f() { return }' | not fsdp-opt --convert-fsdp-to-rt 2>&1 | FileCheck %s --check-prefix=NOMODEL
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 lr-schedule=cos lower=true" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 lr-schedule=cosine min-lr-ratio=2 lower=true" 2>&1 | FileCheck %s --check-prefix=FLOOR
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 warmup-steps=-1 lower=true" 2>&1 | FileCheck %s --check-prefix=WARMUP
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 decay-steps=-3 lower=true" 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: fsdp-opt %S/../Transforms/fsdp-frozen.mlir --fsdp-pipeline="world-size=2 optimizer=adamw auto-wrap-policy=none" | sed 's/{fsdp.flat_numel = 4 : i64, fsdp.flat_param = "", fsdp.frozen, fsdp.offsets = array<i64: 0>, fsdp.params = \["scale"\]}/{fsdp.param = "scale"}/' | not fsdp-opt --convert-fsdp-to-rt 2>&1 | FileCheck %s --check-prefix=LOOSE

// A parameter argument outside any flat parameter (hand-edited IR) is named
// at its declaration; the step itself is not printed.
// LOOSE: <stdin>:4:7: error: parameter 'scale' is an argument of the train step outside any flat parameter; run fsdp-shard before the lowering
// LOOSE-NEXT: fsdp.param @scale
// LOOSE-NOT: func.func

// UNSCHEDULED: mlp.mlir:4:1: error: model 'mlp' has no sharded train step to lower; run fsdp-pipeline (or fsdp-shard and fsdp-insert-collectives) first
// SCHEDULE: error: convert-fsdp-to-rt: lr-schedule must be constant, cosine or linear, not 'cos'
// FLOOR: error: convert-fsdp-to-rt: min-lr-ratio must be in [0, 1], got 2
// WARMUP: error: convert-fsdp-to-rt: warmup-steps must be >= 0, got -1
// DECAY: error: convert-fsdp-to-rt: decay-steps must be >= 0, got -3
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

// -----

// An integer addition that is not a counter's in-place increment: its input
// (through a reshape) is also read by another op, so adding in place would
// corrupt that read.
fsdp.model @m {
  fsdp.module @root kind "M" unit {
    fsdp.param @w : tensor<16x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%ids: tensor<6xi64>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<16x4xf32>
      %e0 = nn.embedding %ids, %w : (tensor<6xi64>, tensor<16x4xf32>) -> tensor<6x4xf32>
      %r = nn.reshape %ids : tensor<6xi64> to tensor<2x3xi64>
      %c = arith.constant dense<1> : tensor<2x3xi64>
      // expected-error @+1 {{'arith.addi' op has no runtime lowering: integer additions lower only as the in-place increment of a counter (x + splat constant, x used nowhere else)}}
      %p = arith.addi %r, %c : tensor<2x3xi64>
      %e1 = nn.embedding %p, %w : (tensor<2x3xi64>, tensor<16x4xf32>) -> tensor<2x3x4xf32>
      %e1f = nn.reshape %e1 : tensor<2x3x4xf32> to tensor<6x4xf32>
      %s = nn.mul %e0, %e1f : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
      %loss = nn.reduce_sum %s {dims = array<i64: 0, 1>} : (tensor<6x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
