// Bad sharding options and IR are errors with a location.
// RUN: split-file %s %t
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step --fsdp-shard="world-size=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=zero3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard-zero2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GROUP2
// RUN: not fsdp-opt %t/model.mlir --fsdp-shard="world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-shard="world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step --fsdp-insert-collectives -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNSHARDED
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-insert-collectives -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCHEDULED
// RUN: fsdp-opt %t/mixed.mlir --fsdp-build-train-step --fsdp-shard="world-size=2" -verify-diagnostics -o /dev/null

// WORLD: error: fsdp-shard: world-size must be >= 1, got 0
// STRATEGY: error: fsdp-shard: unknown strategy 'zero3'; expected full-shard, shard-grad-op, no-shard, hybrid-shard or hybrid-shard-zero2
// GROUP: error: fsdp-shard: hybrid-shard needs a shard-group-size that divides world-size 4, got 3
// GROUP2: error: fsdp-shard: hybrid-shard-zero2 needs a shard-group-size that divides world-size 4, got 0
// NOSTEP: error: 'fsdp.model' op has no train step to shard; run fsdp-build-train-step first
// TWICE: error: 'func.func' op is already sharded
// SCHEDULED: error: 'func.func' op is already scheduled
// UNSHARDED: error: 'fsdp.model' op has no sharded train step; run fsdp-shard first

//--- model.mlir
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <ones>
    fsdp.forward () -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4xf32>
      %l = nn.reduce_sum %w {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

//--- mixed.mlir
// A unit whose parameters have different dtypes cannot be one flat parameter.
fsdp.model @m {
  // expected-error @+1 {{'fsdp.module' op is an FSDP unit whose trainable parameters mix 'f32' and 'bf16'; a flat parameter has one dtype (wrap them separately)}}
  fsdp.module @root kind "Net" {
    fsdp.param @a : tensor<4xf32> init <ones>
    fsdp.param @b : tensor<4xbf16> init <ones>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<4xf32>
      %b = fsdp.get_param @b : tensor<4xbf16>
      %c = nn.cast %b : tensor<4xbf16> to tensor<4xf32>
      %s = nn.add %a, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %l = nn.reduce_sum %s {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
