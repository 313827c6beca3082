// nn.fmod lowers to binary_forward with FSDPRT_FMOD (16), f32 (dtype 0); its
// VJP is built from sub, div and mul, so no binary_backward takes code 16.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s

// CHECK-LABEL: func.func @wrap_train_step(
// CHECK: rt.call @binary_forward({{.*}}, %c0_i32, %c16_i32,
// CHECK-NOT: rt.call @binary_backward({{.*}}, %c16_i32,
// CHECK: return

fsdp.model @wrap {
  fsdp.module @root kind "Net" unit {
    fsdp.param @w : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.param @period : tensor<4xf32> init <uniform(1.0, 2.0)>
    fsdp.forward (%x: tensor<8x4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4xf32>
      %p = fsdp.get_param @period : tensor<4xf32>
      %h = nn.mul %x, %w : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
      %r = nn.fmod %h, %p : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
      %sq = nn.mul %r, %r : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
      %loss = nn.reduce_mean %sq {dims = array<i64: 0, 1>} : (tensor<8x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
