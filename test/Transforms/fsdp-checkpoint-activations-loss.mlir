// Activation checkpointing keeps a loss computed with its gradient
// (nn.cross_entropy_with_grad, made by fsdp-build-train-step): the backward
// reads its gradient, not an activation, so nothing of a checkpointed root
// is recomputed for it (recomputing it would run the loss and the head
// twice).
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=all" | FileCheck %s

// CHECK-LABEL: func.func @head_train_step(
// CHECK: nn.linear
// CHECK: nn.cross_entropy_with_grad {{.*}}fsdp.phase = #fsdp<phase forward>
// CHECK-NOT: nn.linear
// CHECK-NOT: nn.cross_entropy
// CHECK: return
fsdp.model @head {
  fsdp.module @root kind "Head" unit {
    fsdp.param @weight : tensor<16x8xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<8x8xf32>, %t: tensor<8xi64>) -> tensor<f32> {
      %w = fsdp.get_param @weight : tensor<16x8xf32>
      %logits = nn.linear %x, %w : (tensor<8x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
      %loss = nn.cross_entropy %logits, %t : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
