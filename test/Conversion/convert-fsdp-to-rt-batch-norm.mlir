// BatchNorm1d in training mode, 2 micro-batches on one rank: both forwards
// normalise with their batch and update the running statistics in place, in
// the buffers' persistent slots (the second micro-batch reads the first's
// update, as two successive F.batch_norm calls); the backward gets the same
// slots (ignored in training) and writes the three gradients. The i64
// num_batches_tracked counts forwards, incremented in place per micro-batch.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd grad-accum-steps=2" --convert-fsdp-to-rt | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd grad-accum-steps=2" --convert-fsdp-to-rt | FileCheck %s --check-prefix=PROGRAM

// The buffers are in the program description, with their persistent offsets.
// PROGRAM: \22buffers\22:[{\22dtype\22:\22f32\22,\22init\22:{\22args\22:[],\22kind\22:\22zeros\22},\22name\22:\22bn.running_mean\22,\22offset\22:256,\22shape\22:[4]},{\22dtype\22:\22f32\22,\22init\22:{\22args\22:[],\22kind\22:\22ones\22},\22name\22:\22bn.running_var\22,\22offset\22:320,\22shape\22:[4]},{\22dtype\22:\22i64\22,\22init\22:{\22args\22:[],\22kind\22:\22zeros\22},\22name\22:\22bn.num_batches_tracked\22,\22offset\22:384,\22shape\22:[]}]

// CHECK-LABEL: func.func @bn_mlp_train_step(
// CHECK-SAME: %[[CTX:[a-z0-9]+]]: !rt.context {rt.name = "ctx"}, %[[P:[a-z0-9]+]]: !rt.buffer {rt.name = "persistent"}, %[[C:[a-z0-9]+]]: !rt.stream {rt.name = "compute"}
// CHECK: rt.call @batch_norm_forward(%[[CTX]], %[[C]], %c0_i32, %{{.*}}, %c0_i64, %[[P]], %c192_i64, %[[P]], %c208_i64, %[[P]], %c256_i64, %[[P]], %c320_i64, %{{.*}}, %c0_i64, %c6_i64, %c4_i64, %c1_i64, %{{.*}}, %{{.*}}, %c1_i32)
// CHECK: rt.call @add_integer(%[[CTX]], %[[C]], %c4_i32, %[[P]], %c384_i64, %c1_i64, %c1_i64)
// CHECK: rt.call @batch_norm_backward(%[[CTX]], %[[C]], %c0_i32, %{{.*}}, %c0_i64, %[[P]], %c192_i64, %[[P]], %c256_i64, %[[P]], %c320_i64, {{.*}}, %c6_i64, %c4_i64, %c1_i64, %{{.*}}, %c1_i32)
// CHECK: rt.call @batch_norm_forward(%[[CTX]], %[[C]], %c0_i32, %{{.*}}, %c0_i64, %[[P]], %c192_i64, %[[P]], %c208_i64, %[[P]], %c256_i64, %[[P]], %c320_i64,
// CHECK: rt.call @add_integer(%[[CTX]], %[[C]], %c4_i32, %[[P]], %c384_i64, %c1_i64, %c1_i64)
// CHECK: rt.call @batch_norm_backward(
// CHECK-NOT: rt.call @copy({{.*}}%c256_i64
fsdp.model @bn_mlp {
  fsdp.module @root kind "BNMLP" unit {
    fsdp.module @fc kind "Linear" {
      fsdp.param @weight : tensor<4x8xf32> init <kaiming_uniform(2.23606797749979)>
      fsdp.param @bias : tensor<4xf32> init <uniform(-0.35, 0.35)>
      fsdp.forward (%x: tensor<6x8xf32>) -> tensor<6x4xf32> {
        %w = fsdp.get_param @weight : tensor<4x8xf32>
        %b = fsdp.get_param @bias : tensor<4xf32>
        %y = nn.linear %x, %w, %b : (tensor<6x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<6x4xf32>
        fsdp.return %y : tensor<6x4xf32>
      }
    }
    fsdp.module @bn kind "BatchNorm1d" unit {
      fsdp.param @weight : tensor<4xf32> init <ones>
      fsdp.param @bias : tensor<4xf32> init <zeros>
      fsdp.buffer @running_mean : tensor<4xf32> init <zeros>
      fsdp.buffer @running_var : tensor<4xf32> init <ones>
      fsdp.buffer @num_batches_tracked : tensor<i64> init <zeros>
      fsdp.forward (%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
        %w = fsdp.get_param @weight : tensor<4xf32>
        %b = fsdp.get_param @bias : tensor<4xf32>
        %rm = fsdp.get_buffer @running_mean : tensor<4xf32>
        %rv = fsdp.get_buffer @running_var : tensor<4xf32>
        %y, %m, %v = nn.batch_norm %x, %w, %b, %rm, %rv {training} : (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>)
        fsdp.set_buffer @running_mean, %m : tensor<4xf32>
        fsdp.set_buffer @running_var, %v : tensor<4xf32>
        %n = fsdp.get_buffer @num_batches_tracked : tensor<i64>
        %one = arith.constant dense<1> : tensor<i64>
        %n1 = arith.addi %n, %one : tensor<i64>
        fsdp.set_buffer @num_batches_tracked, %n1 : tensor<i64>
        fsdp.return %y : tensor<6x4xf32>
      }
    }
    fsdp.forward (%x: tensor<6x8xf32>) -> tensor<f32> {
      %h = fsdp.call @fc(%x) : (tensor<6x8xf32>) -> tensor<6x4xf32>
      %y = fsdp.call @bn(%h) : (tensor<6x4xf32>) -> tensor<6x4xf32>
      %r = nn.relu %y : tensor<6x4xf32>
      %sq = nn.mul %r, %r : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
      %loss = nn.reduce_sum %sq {dims = array<i64: 0, 1>} : (tensor<6x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
