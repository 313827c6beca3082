// Activation checkpointing: the checkpointed unit's forward values that its
// backward reads are recomputed just before its backward (clones tagged
// backward) instead of being kept from the forward; the unit's input stays
// saved. Sharded (full-shard), the recompute reads the backward's gather.
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Block" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none activation-checkpointing=Block" | FileCheck %s --check-prefix=SHARD
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=PLAIN
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none activation-checkpointing=all" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=CKPT
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Layer" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-checkpoint-activations="kinds=Block" 2>&1 | FileCheck %s --check-prefix=ORDER

// The forward: h = relu(y), y = x W^T, then the root's sum. relu's backward
// reads y; checkpointed, it reads y recomputed (only what the backward
// reads is recomputed: not the relu).
// CHECK-LABEL: func.func @net_train_step(
// CHECK: %[[Y:.*]] = nn.linear %{{.*}}, %arg0 {{.*}}phase forward{{.*}}unit = "block"
// CHECK: nn.relu %[[Y]] {{.*}}phase forward
// CHECK: %[[Y2:.*]] = nn.linear %{{.*}}, %arg0 {{.*}}phase backward{{.*}}unit = "block"
// CHECK-NOT: nn.relu
// CHECK: nn.relu_grad %{{.*}}, %[[Y2]]
// CHECK-NOT: %[[Y]]{{[ ,:]}}
// CHECK: return

// SHARD: fsdp.unshard %arg0 unit "block" {{.*}}phase forward
// SHARD: fsdp.reshard {{.*}} unit "block" {{.*}}phase forward
// SHARD: fsdp.unshard %arg0 unit "block" {{.*}}phase backward
// SHARD: nn.linear {{.*}}phase backward
// SHARD: nn.relu_grad

// Activations kept for the backward: without checkpointing y
// (64 x 16 floats = 4096 bytes per rank); with every unit checkpointed,
// nothing but the saved input.
// PLAIN: activations for backward{{ +}}4096
// CKPT: activations for backward{{ +}}0

// KIND: error: 'fsdp.model' op has no FSDP unit of kind 'Layer' to checkpoint (checkpointing applies to units: wrap that kind first)
// ORDER: error: 'fsdp.model' op has no unsharded train step; run fsdp-checkpoint-activations between fsdp-build-train-step and fsdp-shard

fsdp.model @net {
  fsdp.module @root kind "Net" {
    fsdp.module @block kind "Block" unit {
      fsdp.param @w : tensor<16x8xf32> init <normal(0.0, 0.5)>
      fsdp.forward (%x: tensor<64x8xf32>) -> tensor<64x16xf32> {
        %w = fsdp.get_param @w : tensor<16x8xf32>
        %y = nn.linear %x, %w : (tensor<64x8xf32>, tensor<16x8xf32>) -> tensor<64x16xf32>
        %h = nn.relu %y : tensor<64x16xf32>
        fsdp.return %h : tensor<64x16xf32>
      }
    }
    fsdp.forward (%x: tensor<64x8xf32>) -> tensor<f32> {
      %h = fsdp.call @block(%x) : (tensor<64x8xf32>) -> tensor<64x16xf32>
      %l = nn.reduce_sum %h {dims = array<i64: 0, 1>} : (tensor<64x16xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
