// Activation checkpointing chosen per unit in the IR
// (#fsdp.unit<activation_checkpointing = true>, what an import wrap
// policy's `activation_checkpointing` setting writes): only the marked
// unit recomputes its forward, though both units are of kind Block; the
// pipeline runs the pass without `activation-checkpointing`.
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=MARKED
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none activation-checkpointing=Block" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=ALL
// An evaluation program of the same model has nothing to recompute.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none mode=eval" -o /dev/null

// The marked unit's linear is recomputed in the backward; the other's is not.
// CHECK-LABEL: func.func @net_train_step(
// CHECK-DAG: nn.linear {{.*}}phase backward{{.*}}unit = "first"
// CHECK-NOT: nn.linear {{.*}}phase backward{{.*}}unit = "second"

// Activations kept for the backward (64 x 16 floats = 4096 bytes per unit
// and rank): the unmarked unit's y only; with kinds=Block, neither.
// MARKED: activations for backward{{ +}}4096
// ALL: activations for backward{{ +}}0

fsdp.model @net {
  fsdp.module @root kind "Net" {
    fsdp.module @first kind "Block" unit<activation_checkpointing = true> {
      fsdp.param @w : tensor<16x8xf32> init <normal(0.0, 0.5)>
      fsdp.forward (%x: tensor<64x8xf32>) -> tensor<64x16xf32> {
        %w = fsdp.get_param @w : tensor<16x8xf32>
        %y = nn.linear %x, %w : (tensor<64x8xf32>, tensor<16x8xf32>) -> tensor<64x16xf32>
        %h = nn.relu %y : tensor<64x16xf32>
        fsdp.return %h : tensor<64x16xf32>
      }
    }
    fsdp.module @second kind "Block" unit {
      fsdp.param @w : tensor<16x8xf32> init <normal(0.0, 0.5)>
      fsdp.forward (%x: tensor<64x8xf32>) -> tensor<64x16xf32> {
        %w = fsdp.get_param @w : tensor<16x8xf32>
        %y = nn.linear %x, %w : (tensor<64x8xf32>, tensor<16x8xf32>) -> tensor<64x16xf32>
        %h = nn.relu %y : tensor<64x16xf32>
        fsdp.return %h : tensor<64x16xf32>
      }
    }
    fsdp.forward (%x: tensor<64x8xf32>) -> tensor<f32> {
      %a = fsdp.call @first(%x) : (tensor<64x8xf32>) -> tensor<64x16xf32>
      %b = fsdp.call @second(%x) : (tensor<64x8xf32>) -> tensor<64x16xf32>
      %s = nn.add %a, %b : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
      %l = nn.reduce_sum %s {dims = array<i64: 0, 1>} : (tensor<64x16xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
