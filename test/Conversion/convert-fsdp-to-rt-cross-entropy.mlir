// A loss term's cross-entropy and its gradient are one call over the
// logits (nn.cross_entropy_with_grad, the seed known at the loss), and the
// gradient overwrites the logits when nothing reads them after it
// (StorageAlias.h): a language model's head, whose backward reads its input
// and weight. The call then reads and writes one buffer at one offset, and
// the report's peak holds one logits-sized buffer. Where the logits are
// read later (here by a second loss term's backward), the gradient gets a
// buffer of its own.
// A head fsdp-pad-vocab padded passes the call its classes and its rows'
// width (20 of 24).
// RUN: fsdp-opt %s -split-input-file --fsdp-pad-vocab="multiple=8 min-classes=8" --fsdp-pipeline="world-size=1 optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s

// CHECK-LABEL: func.func @head_train_step(
// CHECK-NOT: rt.call @cross_entropy_forward(
// CHECK: rt.call @cross_entropy_forward_backward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %c4_i32, %[[L:[a-z0-9_]+]], %[[LO:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[L]], %[[LO]], %c8_i64, %c16_i64, %c16_i64,
// CHECK-NOT: rt.call @cross_entropy_backward(
fsdp.model @head {
  fsdp.module @root kind "Head" unit {
    fsdp.param @weight : tensor<16x8xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<2x4x8xf32>, %t: tensor<2x4xi64>) -> tensor<f32> {
      %w = fsdp.get_param @weight : tensor<16x8xf32>
      %logits = nn.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
      %flat = nn.reshape %logits : tensor<2x4x16xf32> to tensor<8x16xf32>
      %ft = nn.reshape %t : tensor<2x4xi64> to tensor<8xi64>
      %loss = nn.cross_entropy %flat, %ft : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// A fresh buffer placed for the gradient (after the loss's), right before
// the call.
// CHECK-LABEL: func.func @reread_train_step(
// CHECK: rt.call @linear_forward({{.*}}, %[[L:[0-9]+]], %c0_i64, %c8_i64, %c8_i64, %c16_i64)
// CHECK: rt.alloc_at %arg0 offset {{[0-9]+}} bytes 64
// CHECK-NEXT: %[[D:[0-9]+]] = rt.alloc_at %arg0 offset {{[0-9]+}} bytes 512
// CHECK: rt.call @cross_entropy_forward_backward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %c4_i32, %[[L]], %c0_i64, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[D]], %c0_i64, %c8_i64, %c16_i64
fsdp.model @reread {
  fsdp.module @root kind "Head" unit {
    fsdp.param @weight : tensor<16x8xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<8x8xf32>, %t: tensor<8xi64>) -> tensor<f32> {
      %w = fsdp.get_param @weight : tensor<16x8xf32>
      %logits = nn.linear %x, %w : (tensor<8x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
      %ce = nn.cross_entropy %logits, %t : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
      %sq = nn.mul %logits, %logits : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %penalty = nn.reduce_sum %sq {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      %loss = nn.add %ce, %penalty : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// CHECK-LABEL: func.func @padded_train_step(
// CHECK: rt.call @cross_entropy_forward_backward({{.*}}, %c8_i64, %c20_i64, %c24_i64, %c0_i32, %c-100_i64)
fsdp.model @padded {
  fsdp.module @root kind "Head" unit {
    fsdp.param @weight : tensor<20x8xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<8x8xf32>, %t: tensor<8xi64>) -> tensor<f32> {
      %w = fsdp.get_param @weight : tensor<20x8xf32>
      %logits = nn.linear %x, %w : (tensor<8x8xf32>, tensor<20x8xf32>) -> tensor<8x20xf32>
      %loss = nn.cross_entropy %logits, %t : (tensor<8x20xf32>, tensor<8xi64>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
