// A strided nn.slice lowers to strided_slice (dtype, input, its shape, dim,
// start, step, count) and its gradient, nn.slice_grad, to
// strided_slice_backward with the same window and the input's shape; a
// step-1 slice keeps the plain slice call.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s

// CHECK-LABEL: func.func @strided_train_step(
// x[:, 1::2] of [2, 8] f32 (dtype 0): 4 elements from 1 by step 2.
// CHECK: rt.call @strided_slice({{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}}, %c1_i32, %c1_i64, %c2_i64, %c4_i64, %{{.*}}, %{{.*}})
// x[:, 0:3]: the plain slice.
// CHECK: rt.call @slice({{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}}, %c1_i32, %c0_i64, %c3_i64, %{{.*}}, %{{.*}})
// CHECK: rt.call @strided_slice_backward({{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}}, %c1_i32, %c1_i64, %c2_i64, %c4_i64, %{{.*}}, %{{.*}})
fsdp.model @strided {
  fsdp.module @root kind "Net" unit {
    fsdp.param @w : tensor<2x8xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%x: tensor<2x4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<2x8xf32>
      %odd = nn.slice %w {dim = 1 : i64, start = 1 : i64, end = 8 : i64, step = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x4xf32>
      %head = nn.slice %w {dim = 1 : i64, start = 0 : i64, end = 3 : i64} : (tensor<2x8xf32>) -> tensor<2x3xf32>
      %p = nn.mul %odd, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %s1 = nn.reduce_sum %p {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      %s2 = nn.reduce_sum %head {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
      %loss = nn.add %s1, %s2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
