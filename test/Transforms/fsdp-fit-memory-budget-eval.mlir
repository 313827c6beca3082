// memory-budget= on an eval step (mode=eval; generation's decode step):
// there is no backward to recompute, so the budget chooses which units'
// weights stay whole on every rank across steps (no gather at any step)
// and which are gathered at every step. Six units of 16384, 12288 and 4 x
// 8192 bytes (f32) at 2 ranks: all gathered, the planned peak is 47624
// bytes (the shards, 30720, and one gathered unit); all whole, 61960.
// Between, the largest units are kept first, each costing its other half.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval report=true memory-budget=1MiB" -o /dev/null | FileCheck %s --check-prefix=ALL
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval memory-budget=1MiB" | FileCheck %s --check-prefix=ALL-IR
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval report=true memory-budget=55000" -o /dev/null | FileCheck %s --check-prefix=SOME
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval memory-budget=55000" | FileCheck %s --check-prefix=SOME-IR
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval report=true memory-budget=50000" -o /dev/null | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval report=true lower=true memory-budget=1MiB" -o /dev/null | FileCheck %s --check-prefix=ARENA
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval memory-budget=45000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INFEASIBLE
// fsdp.keep_weights_whole set by hand: only on an eval step, only units.
// RUN: fsdp-opt %s --fsdp-build-train-step | sed 's/attributes {/attributes {fsdp.keep_weights_whole = ["b0"], /' | not fsdp-opt --fsdp-shard="world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRAINING
// RUN: fsdp-opt %s --fsdp-build-train-step="mode=eval" | sed 's/attributes {/attributes {fsdp.keep_weights_whole = ["b9"], /' | not fsdp-opt --fsdp-shard="world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOT-A-UNIT
// RUN: fsdp-opt %s --fsdp-build-train-step="mode=eval" | sed 's/attributes {/attributes {fsdp.keep_weights_whole = 1, /' | not fsdp-opt -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOT-A-LIST

// ALL: memory budget: 1048576 bytes (1.00 MiB) per rank for model decoder (eval): 6 of 6 units' weights kept whole across steps (61440 bytes, gathered once per request), the rest gathered at every step; planned peak 61960 bytes (0.06 MiB)
// ALL-NEXT: weights of b0: kept whole (16384 bytes)
// ALL: weights of b5: kept whole (8192 bytes)
// ALL: peak memory per rank: 61960 bytes
// ALL: collectives per step: 0, 0 bytes
// ALL-IR: fsdp.keep_weights_whole = ["b0", "b1", "b2", "b3", "b4", "b5"]
// ALL-IR-NOT: fsdp.all_gather

// SOME: 2 of 6 units' weights kept whole across steps (28672 bytes, gathered once per request), the rest gathered at every step; planned peak 53640 bytes (0.05 MiB), 61960 bytes (0.06 MiB) with every unit whole
// SOME-NEXT: weights of b0: kept whole (16384 bytes)
// SOME-NEXT: weights of b1: kept whole (12288 bytes)
// SOME-NEXT: weights of b2: gathered at every step (8192 bytes)
// SOME: collectives per step: 4, 32768 bytes; all_gather forward 4
// The kept units' flat parameters are whole (a shard group of one), the
// others' halves.
// SOME-IR: %arg0: tensor<4096xf32> {{.*}}"b0"{{.*}} %arg1: tensor<3072xf32> {{.*}}"b1"{{.*}} %arg2: tensor<1024xf32> {{.*}}"b2"{{.*}} fsdp.keep_weights_whole = ["b0", "b1"]

// NONE: 0 of 6 units' weights kept whole {{.*}}; planned peak 47624 bytes (0.05 MiB), 61960 bytes (0.06 MiB) with every unit whole
// NONE: collectives per step: 6, 61440 bytes; all_gather forward 6

// A lowered program: the arena plan must fit (aligned buffers).
// ARENA: 6 of 6 units' weights kept whole {{.*}}; arena plan {{[0-9]+}} bytes

// TRAINING: error: 'func.func' op keeps weights whole across steps, which only an eval step may (a training step shards its gradients and optimizer state with them)
// NOT-A-UNIT: error: 'func.func' op keeps the weights of 'b9' whole, which is not an FSDP unit of the model
// NOT-A-LIST: error: {{.*}}fsdp.keep_weights_whole{{.*}} a list of unit names
// INFEASIBLE: [[@LINE+1]]:1: error: model decoder does not fit memory-budget 45000 bytes (0.04 MiB) per rank: the smallest planned peak with its weights whole or gathered is 47624 bytes (0.05 MiB)
fsdp.model @decoder {
  fsdp.module @root kind "Net" {
    fsdp.module @b0 kind "Block" unit {
      fsdp.param @w : tensor<64x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @v : tensor<32x64xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<1x1x32xf32>) -> tensor<1x1x32xf32> {
        %w = fsdp.get_param @w : tensor<64x32xf32>
        %v = fsdp.get_param @v : tensor<32x64xf32>
        %h = nn.linear %x, %w : (tensor<1x1x32xf32>, tensor<64x32xf32>) -> tensor<1x1x64xf32>
        %y = nn.linear %h, %v : (tensor<1x1x64xf32>, tensor<32x64xf32>) -> tensor<1x1x32xf32>
        fsdp.return %y : tensor<1x1x32xf32>
      }
    }
    fsdp.module @b1 kind "Block" unit {
      fsdp.param @w : tensor<48x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @v : tensor<32x48xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<1x1x32xf32>) -> tensor<1x1x32xf32> {
        %w = fsdp.get_param @w : tensor<48x32xf32>
        %v = fsdp.get_param @v : tensor<32x48xf32>
        %h = nn.linear %x, %w : (tensor<1x1x32xf32>, tensor<48x32xf32>) -> tensor<1x1x48xf32>
        %y = nn.linear %h, %v : (tensor<1x1x48xf32>, tensor<32x48xf32>) -> tensor<1x1x32xf32>
        fsdp.return %y : tensor<1x1x32xf32>
      }
    }
    fsdp.module @b2 kind "Block" unit {
      fsdp.param @w : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @v : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<1x1x32xf32>) -> tensor<1x1x32xf32> {
        %w = fsdp.get_param @w : tensor<32x32xf32>
        %v = fsdp.get_param @v : tensor<32x32xf32>
        %h = nn.linear %x, %w : (tensor<1x1x32xf32>, tensor<32x32xf32>) -> tensor<1x1x32xf32>
        %y = nn.linear %h, %v : (tensor<1x1x32xf32>, tensor<32x32xf32>) -> tensor<1x1x32xf32>
        fsdp.return %y : tensor<1x1x32xf32>
      }
    }
    fsdp.module @b3 kind "Block" unit {
      fsdp.param @w : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @v : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<1x1x32xf32>) -> tensor<1x1x32xf32> {
        %w = fsdp.get_param @w : tensor<32x32xf32>
        %v = fsdp.get_param @v : tensor<32x32xf32>
        %h = nn.linear %x, %w : (tensor<1x1x32xf32>, tensor<32x32xf32>) -> tensor<1x1x32xf32>
        %y = nn.linear %h, %v : (tensor<1x1x32xf32>, tensor<32x32xf32>) -> tensor<1x1x32xf32>
        fsdp.return %y : tensor<1x1x32xf32>
      }
    }
    fsdp.module @b4 kind "Block" unit {
      fsdp.param @w : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @v : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<1x1x32xf32>) -> tensor<1x1x32xf32> {
        %w = fsdp.get_param @w : tensor<32x32xf32>
        %v = fsdp.get_param @v : tensor<32x32xf32>
        %h = nn.linear %x, %w : (tensor<1x1x32xf32>, tensor<32x32xf32>) -> tensor<1x1x32xf32>
        %y = nn.linear %h, %v : (tensor<1x1x32xf32>, tensor<32x32xf32>) -> tensor<1x1x32xf32>
        fsdp.return %y : tensor<1x1x32xf32>
      }
    }
    fsdp.module @b5 kind "Block" unit {
      fsdp.param @w : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @v : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<1x1x32xf32>) -> tensor<1x1x32xf32> {
        %w = fsdp.get_param @w : tensor<32x32xf32>
        %v = fsdp.get_param @v : tensor<32x32xf32>
        %h = nn.linear %x, %w : (tensor<1x1x32xf32>, tensor<32x32xf32>) -> tensor<1x1x32xf32>
        %y = nn.linear %h, %v : (tensor<1x1x32xf32>, tensor<32x32xf32>) -> tensor<1x1x32xf32>
        fsdp.return %y : tensor<1x1x32xf32>
      }
    }
    fsdp.forward (%h0: tensor<1x1x32xf32>) -> tensor<f32> {
      %h1 = fsdp.call @b0(%h0) : (tensor<1x1x32xf32>) -> tensor<1x1x32xf32>
      %h2 = fsdp.call @b1(%h1) : (tensor<1x1x32xf32>) -> tensor<1x1x32xf32>
      %h3 = fsdp.call @b2(%h2) : (tensor<1x1x32xf32>) -> tensor<1x1x32xf32>
      %h4 = fsdp.call @b3(%h3) : (tensor<1x1x32xf32>) -> tensor<1x1x32xf32>
      %h5 = fsdp.call @b4(%h4) : (tensor<1x1x32xf32>) -> tensor<1x1x32xf32>
      %h6 = fsdp.call @b5(%h5) : (tensor<1x1x32xf32>) -> tensor<1x1x32xf32>
      %l = nn.reduce_sum %h6 {dims = array<i64: 0, 1, 2>} : (tensor<1x1x32xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
