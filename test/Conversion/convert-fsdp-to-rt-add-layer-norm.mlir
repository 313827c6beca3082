// nn.add_layer_norm (fuse-add-layer-norm) lowers to one
// add_layer_norm_forward call: a, b, the optional weight and bias (a null
// buffer when absent), then the sum and the output; the backward's
// layer_norm_backward reads the sum the call wrote. nn.add_layer_norm_grad
// lowers to one add_layer_norm_backward call: x, the optional weight, dy,
// the addend (here the last norm's input gradient), then dx, dw and db.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 fuse-add-layer-norm=true" --convert-fsdp-to-rt | FileCheck %s

// CHECK-LABEL: func.func @pre_ln_train_step(
// CHECK: rt.call @add_layer_norm_forward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[S1:[a-z0-9_]+]], %[[S1O:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c8_i64, %c16_i64, %{{[a-z0-9_]+}})
// CHECK: rt.call @add_layer_norm_forward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %[[S1]], %[[S1O]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[NULL:[a-z0-9_]+]], %c0_i64, %[[NULL]], %c0_i64, %[[S2:[a-z0-9_]+]], %[[S2O:[a-z0-9_]+]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c8_i64, %c16_i64, %{{[a-z0-9_]+}})
// CHECK-NOT: rt.call @binary_forward
// CHECK: rt.call @layer_norm_backward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %[[S2]], %[[S2O]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[DX:[a-z0-9_]+]], %[[DXO:[a-z0-9_]+]],
// CHECK-NOT: rt.call @binary_forward
// CHECK: rt.call @add_layer_norm_backward(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c0_i32, %[[S1]], %[[S1O]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %[[DX]], %[[DXO]], %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %c8_i64, %c16_i64, %{{[a-z0-9_]+}})
// CHECK-NOT: rt.call @binary_forward
fsdp.model @pre_ln {
  fsdp.module @root kind "Block" unit {
    fsdp.param @ln1_w : tensor<16xf32> init <ones>
    fsdp.param @ln1_b : tensor<16xf32> init <zeros>
    fsdp.param @fc1 : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.param @ln2_w : tensor<16xf32> init <ones>
    fsdp.param @ln2_b : tensor<16xf32> init <zeros>
    fsdp.param @fc2 : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<8x16xf32>) -> tensor<f32> {
      %w1 = fsdp.get_param @ln1_w : tensor<16xf32>
      %b1 = fsdp.get_param @ln1_b : tensor<16xf32>
      %f1 = fsdp.get_param @fc1 : tensor<16x16xf32>
      %w2 = fsdp.get_param @ln2_w : tensor<16xf32>
      %b2 = fsdp.get_param @ln2_b : tensor<16xf32>
      %f2 = fsdp.get_param @fc2 : tensor<16x16xf32>
      %h1 = nn.layer_norm %x weight %w1 bias %b1 : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %a1 = nn.linear %h1, %f1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %r1 = nn.add %x, %a1 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %h2 = nn.layer_norm %r1 weight %w2 bias %b2 : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %a2 = nn.linear %h2, %f2 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %r2 = nn.add %r1, %a2 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %h3 = nn.layer_norm %r2 {epsilon = 1.0e-6 : f64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %h3 {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

