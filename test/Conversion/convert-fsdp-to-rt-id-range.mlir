// The labels an nn.id_range bounds (a one-hot of class labels, as F.one_hot
// and cross_entropy with class weights build one) reach the program
// description as the input's max_id and ignore_id, through a reshape, so the
// runner checks every batch it loads against them. The op renames its
// operand (no copy) and checks it where it stands (fsdprt_index_check: ids
// computed in the step, and batches a Session passes, meet no loader), its
// error naming the op's source line.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s --check-prefix=PROGRAM

// PROGRAM: {\22dtype\22:\22i64\22,\22ignore_id\22:-1,\22index\22:1,\22max_id\22:3,

// CHECK-LABEL: func.func @one_hot_train_step(
// CHECK: %[[WHAT:.*]] = rt.string "net.py:12: nn.id_range"
// CHECK: rt.call @index_check(%{{.*}}, %{{.*}}, %{{.*}}, %[[IDS:.*]], %[[OFF:.*]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[WHAT]]) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, i64, i64, i32, i64, !rt.string) -> ()
// The cast reads the same storage the check did.
// CHECK: rt.call @cast(%{{.*}}, %{{.*}}, %{{.*}}, %[[IDS]], %[[OFF]],

fsdp.model @one_hot {
  fsdp.module @root kind "Net" unit {
    fsdp.param @w : tensor<3xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%x: tensor<8x3xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
      %flat = nn.reshape %labels : tensor<2x4xi64> to tensor<8xi64>
      %ids = nn.id_range %flat {count = 3 : i64, ignore = -1 : i64} : tensor<8xi64> loc("net.py":12:0)
      %f = nn.cast %ids : tensor<8xi64> to tensor<8xf32>
      %col = nn.reshape %f : tensor<8xf32> to tensor<8x1xf32>
      %w = fsdp.get_param @w : tensor<3xf32>
      %h = nn.mul %x, %w : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
      %m = nn.mul %h, %col : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
      %loss = nn.reduce_mean %m {dims = array<i64: 0, 1>} : (tensor<8x3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
