// nn.linear_gelu and nn.linear_gelu_grad (fuse-bias-gelu) lower to one
// linear_gelu_forward and one linear_gelu_backward call: the forward writes
// pre and the GELU's output, the backward reads that pre (its rows) and the
// GELU's output as c_proj's input.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 fuse-bias-gelu=true" --convert-fsdp-to-rt | FileCheck %s

// CHECK-LABEL: func.func @mlp_train_step(
// CHECK: rt.call @linear_gelu_forward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[PRE:[a-z0-9_]+]], %[[PREO:[a-z0-9_]+]], %[[Y:[a-z0-9_]+]], %[[YO:[a-z0-9_]+]], %c8_i64, %c16_i64, %c64_i64)
// CHECK-NOT: rt.call @activation_forward
// CHECK: rt.call @linear_forward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %[[Y]], %[[YO]],
// CHECK-NOT: rt.call @activation_backward
// CHECK: rt.call @linear_gelu_backward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %[[Y]], %[[YO]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[PRE]], %[[PREO]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c8_i64, %c64_i64, %c16_i64)
// CHECK-NOT: rt.call @activation_backward
// CHECK: return
fsdp.model @mlp {
  fsdp.module @root kind "Block" unit {
    fsdp.param @fc_w : tensor<64x16xf32> init <normal(0.0, 0.02)>
    fsdp.param @fc_b : tensor<64xf32> init <zeros>
    fsdp.param @proj_w : tensor<16x64xf32> init <normal(0.0, 0.02)>
    fsdp.param @proj_b : tensor<16xf32> init <zeros>
    fsdp.forward (%x: tensor<2x4x16xf32>) -> tensor<f32> {
      %w1 = fsdp.get_param @fc_w : tensor<64x16xf32>
      %b1 = fsdp.get_param @fc_b : tensor<64xf32>
      %w2 = fsdp.get_param @proj_w : tensor<16x64xf32>
      %b2 = fsdp.get_param @proj_b : tensor<16xf32>
      %h = nn.linear %x, %w1, %b1 : (tensor<2x4x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<2x4x64xf32>
      %a = nn.gelu %h {approximate = #nn.approximation<tanh>} : tensor<2x4x64xf32>
      %y = nn.linear %a, %w2, %b2 : (tensor<2x4x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x4x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
