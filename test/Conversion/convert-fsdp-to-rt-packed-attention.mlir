// nn.packed_attention lowers to the attention calls on one buffer: q, k and
// v at byte offsets 0, 128 and 256 of each 96-float token (q_row = kv_row =
// 96), and the backward writes dq, dk, dv into one gradient the same way.
// The forward writes its softmax statistics (f32 [2, 4, 16]: 512 bytes),
// which the backward reads with the forward's out; keep-attention-stats=false
// passes null buffers instead.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 optimizer=sgd keep-attention-stats=false" --convert-fsdp-to-rt | FileCheck %s --check-prefix=RECOMPUTE

// CHECK-LABEL: func.func @packed_train_step(
// CHECK: rt.call @linear_forward({{.*}}, %[[P:[0-9]+]], %c0_i64, %c32_i64, %c96_i64, %c96_i64)
// CHECK: %[[S:[0-9]+]] = rt.alloc_at %arg0 offset {{[0-9]+}} bytes 512
// CHECK: rt.call @attention_forward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %[[P]], %c0_i64, %[[P]], %c128_i64, %[[P]], %c256_i64, %[[O:[0-9]+]], %c0_i64, %[[S]], %c0_i64, %c2_i64, %c16_i64, %c16_i64, %c4_i64, %c4_i64, %c8_i64, %c96_i64, %c96_i64, %c1_i32,
// CHECK: %[[G:[0-9]+]] = rt.alloc_at %arg0 offset {{[0-9]+}} bytes 12288
// CHECK: rt.call @attention_backward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %[[P]], %c0_i64, %[[P]], %c128_i64, %[[P]], %c256_i64, %{{[0-9]+}}, %c0_i64, %[[O]], %c0_i64, %[[S]], %c0_i64, %[[G]], %c0_i64, %[[G]], %c128_i64, %[[G]], %c256_i64, %c2_i64, %c16_i64, %c16_i64, %c4_i64, %c4_i64, %c8_i64, %c96_i64, %c96_i64,
// CHECK-NOT: rt.call @split
// CHECK-NOT: rt.call @concat

// RECOMPUTE: %[[NULL:[0-9]+]] = rt.null :
// RECOMPUTE: rt.call @attention_forward({{.*}}, %c256_i64, %{{[0-9]+}}, %c0_i64, %[[NULL]], %c0_i64, %c2_i64,
// RECOMPUTE: rt.call @attention_backward({{.*}}, %c256_i64, %{{[0-9]+}}, %c0_i64, %[[NULL]], %c0_i64, %[[NULL]], %c0_i64, %{{[0-9]+}}, %c0_i64,
fsdp.model @packed {
  fsdp.module @root kind "Attn" unit {
    fsdp.param @w : tensor<96x96xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<2x16x96xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<96x96xf32>
      %p = nn.linear %x, %w : (tensor<2x16x96xf32>, tensor<96x96xf32>) -> tensor<2x16x96xf32>
      %q, %k, %v = nn.split %p {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
      %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
      %l = nn.reduce_sum %o {dims = array<i64: 0, 1, 2>} : (tensor<2x16x32xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
