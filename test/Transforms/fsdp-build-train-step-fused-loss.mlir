// fsdp-build-train-step computes a loss term's cross-entropy with its logits
// gradient (nn.cross_entropy_with_grad) where the gradient's cotangent can
// be computed at the loss: the seed, times the loss scale (cloned up to the
// loss, forward-tagged, from the backward's own ops; the originals erased). A cotangent that reads
// a forward value computed after the cross-entropy (here the loss is scaled
// by a parameter's sum) leaves the two ops apart.
// RUN: fsdp-opt %s -split-input-file --fsdp-mixed-precision="param-dtype=f16" --fsdp-build-train-step="loss-scale=dynamic" | FileCheck %s --check-prefix=SEED
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step | FileCheck %s --check-prefix=KEPT

// SEED-LABEL: func.func @head_train_step(
// SEED: %[[ONE:[^ ]+]] = arith.constant {fsdp.phase = #fsdp<phase forward>{{.*}}dense<1.000000e+00> : tensor<f16>
// SEED-NEXT: %[[S:[^ ]+]] = fsdp.loss_scale {fsdp.phase = #fsdp<phase forward>
// SEED-NEXT: %[[S16:[^ ]+]] = nn.cast %[[S]] {fsdp.phase = #fsdp<phase forward>
// SEED-NEXT: %[[G:[^ ]+]] = nn.mul %[[ONE]], %[[S16]] {fsdp.phase = #fsdp<phase forward>
// SEED-NEXT: nn.cross_entropy_with_grad %{{.*}}, %{{.*}}, %[[G]]
// SEED-NOT: nn.cross_entropy_grad
// SEED-NOT: {fsdp.phase = #fsdp<phase backward>{{.*}}dense<1.000000e+00>
// SEED-NOT: fsdp.loss_scale {fsdp.phase = #fsdp<phase backward>
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

// -----

// SEED-LABEL: func.func @scaled_train_step(
// KEPT-LABEL: func.func @scaled_train_step(
// KEPT: nn.cross_entropy %
// KEPT: nn.cross_entropy_grad
// KEPT-NOT: nn.cross_entropy_with_grad
fsdp.model @scaled {
  fsdp.module @root kind "Head" unit {
    fsdp.param @weight : tensor<16x8xf32> init <normal(0.0, 0.02)>
    fsdp.param @temp : tensor<4xf32> init <ones>
    fsdp.forward (%x: tensor<8x8xf32>, %t: tensor<8xi64>) -> tensor<f32> {
      %w = fsdp.get_param @weight : tensor<16x8xf32>
      %logits = nn.linear %x, %w : (tensor<8x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
      %ce = nn.cross_entropy %logits, %t : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
      %p = fsdp.get_param @temp : tensor<4xf32>
      %s = nn.reduce_sum %p {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      %loss = nn.mul %ce, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
