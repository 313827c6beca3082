// A strided, padded, grouped nn.conv with a bias, a max pooling, a 1x1
// nn.conv, and their gradients: one call each with the geometry of
// fsdprt.h as an rt.array (n, c, h, w, o, kh, kw, oh, ow, stride h/w,
// padding before h/w, dilation h/w, groups); a pooling's is a depthwise
// convolution's. The bias gradient is a reduction; the first conv reads a
// data input, so its input gradient is never computed.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT

// The report's CPU scratch: the strided conv's column matrix, [2 · 3 · 3,
// 3 · 4] f32 (forward and weight gradient alike); the 1x1 conv reads its
// input in place.
// REPORT: convolution scratch: 864 bytes per call at most (the CPU backend's im2col column matrix, host memory outside the arena plan; the CUDA kernels need none)

// CHECK-LABEL: func.func @convnet_train_step(
// CHECK: %[[G:[0-9]+]] = rt.array %c2_i64, %c4_i64, %c6_i64, %c6_i64, %c6_i64, %c3_i64, %c3_i64, %c3_i64, %c4_i64, %c2_i64, %c1_i64, %c1_i64, %c1_i64, %c1_i64, %c2_i64, %c2_i64 :
// CHECK-NEXT: rt.call @conv_forward(%{{.*}}, %{{.*}}, %c0_i32, {{.*}}, %[[G]])
// CHECK: %[[P:[0-9]+]] = rt.array %c2_i64, %c6_i64, %c3_i64, %c4_i64, %c6_i64, %c2_i64, %c2_i64, %c1_i64, %c2_i64, %c2_i64, %c2_i64, %c0_i64, %c0_i64, %c1_i64, %c1_i64, %c6_i64 :
// CHECK-NEXT: rt.call @max_pool_forward(%{{.*}}, %{{.*}}, %c0_i32, {{.*}}, %[[P]])
// CHECK: %[[Q:[0-9]+]] = rt.array %c2_i64, %c6_i64, %c1_i64, %c2_i64, %c2_i64, %c1_i64, %c1_i64, %c1_i64, %c2_i64, %c1_i64, %c1_i64, %c0_i64, %c0_i64, %c1_i64, %c1_i64, %c1_i64 :
// CHECK-NEXT: rt.call @conv_forward(%{{.*}}, %{{.*}}, %c0_i32, {{.*}}, %[[Q]])
// CHECK: rt.call @conv_backward_input(
// CHECK: rt.call @conv_backward_weight(
// CHECK: rt.call @max_pool_backward(
// CHECK: rt.call @conv_backward_weight(
// CHECK: rt.call @reduce_forward(
// CHECK-NOT: rt.call @conv_backward_input(
// CHECK: return
fsdp.model @convnet {
  fsdp.module @root kind "ConvNet" unit {
    fsdp.param @weight : tensor<6x2x3x3xf32> init <kaiming_uniform(2.23606797749979)>
    fsdp.param @bias : tensor<6xf32> init <zeros>
    fsdp.param @proj : tensor<2x6x1x1xf32> init <kaiming_uniform(2.23606797749979)>
    fsdp.forward (%x: tensor<2x4x6x6xf32>) -> tensor<f32> {
      %w = fsdp.get_param @weight : tensor<6x2x3x3xf32>
      %b = fsdp.get_param @bias : tensor<6xf32>
      %v = fsdp.get_param @proj : tensor<2x6x1x1xf32>
      %y = nn.conv %x, %w, %b {stride = array<i64: 2, 1>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 0, 1>, dilation = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x6x6xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x3x4xf32>
      %p = nn.max_pool %y {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<2x6x3x4xf32>) -> tensor<2x6x1x2xf32>
      %z = nn.conv %p, %v {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x6x1x2xf32>, tensor<2x6x1x1xf32>) -> tensor<2x2x1x2xf32>
      %sq = nn.mul %z, %z : (tensor<2x2x1x2xf32>, tensor<2x2x1x2xf32>) -> tensor<2x2x1x2xf32>
      %loss = nn.reduce_sum %sq {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x2x1x2xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
