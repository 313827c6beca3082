// The report's line for a mixture of experts: its grouped GEMMs (the
// forward one, the input gradient's on the transposed experts, the weight
// gradient) each over the static tokens x top-k rows, whatever the router's
// split; a dense model has no such line.
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-report -o /dev/null | FileCheck %s
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-report -o /dev/null | FileCheck %s --check-prefix=DENSE

// CHECK: grouped GEMMs (mixture of experts): 2 forward and input-gradient, 1 weight-gradient, each over 16 rows (tokens x top-k: static, none dropped) split among 4 experts at run time; the step time counts every row
// DENSE-NOT: grouped GEMMs
fsdp.model @moe {
  fsdp.module @root kind "Test" {
    fsdp.param @proj : tensor<8x8xf32> init <normal(0.0, 1.0)>
    fsdp.param @router : tensor<4x8xf32> init <normal(0.0, 1.0)>
    fsdp.param @experts : tensor<4x6x8xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%in: tensor<8x8xf32>) -> tensor<f32> {
      %proj = fsdp.get_param @proj : tensor<8x8xf32>
      %x = nn.linear %in, %proj : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
      %r = fsdp.get_param @router : tensor<4x8xf32>
      %logits = nn.linear %x, %r : (tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<8x4xf32>
      %p = nn.softmax %logits : tensor<8x4xf32>
      %v, %i = nn.topk %p {k = 2 : i64} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
      %flat = nn.reshape %i : tensor<8x2xi64> to tensor<16xi64>
      %s, %perm = nn.sort %flat : (tensor<16xi64>) -> (tensor<16xi64>, tensor<16xi64>)
      %k = arith.constant dense<2> : tensor<i64>
      %tok = nn.floor_div %perm, %k : (tensor<16xi64>, tensor<i64>) -> tensor<16xi64>
      %sf = nn.cast %s : tensor<16xi64> to tensor<16xf32>
      %counts = nn.histc %sf {bins = 4 : i64, min = 0.0, max = 3.0} : (tensor<16xf32>) -> tensor<4xf32>
      %ci = nn.cast %counts : tensor<4xf32> to tensor<4xi32>
      %offs = nn.cumsum %ci {dim = 0 : i64} : tensor<4xi32>
      %we = fsdp.get_param @experts : tensor<4x6x8xf32>
      %wt = nn.transpose %we {permutation = array<i64: 0, 2, 1>} : (tensor<4x6x8xf32>) -> tensor<4x8x6xf32>
      %rows = nn.embedding %tok, %x : (tensor<16xi64>, tensor<8x8xf32>) -> tensor<16x8xf32>
      %y = nn.grouped_matmul %rows, %wt, %offs : (tensor<16x8xf32>, tensor<4x8x6xf32>, tensor<4xi32>) -> tensor<16x6xf32>
      %v16 = nn.reshape %v : tensor<8x2xf32> to tensor<16x1xf32>
      %w = nn.embedding %perm, %v16 : (tensor<16xi64>, tensor<16x1xf32>) -> tensor<16x1xf32>
      %yw = nn.mul %y, %w : (tensor<16x6xf32>, tensor<16x1xf32>) -> tensor<16x6xf32>
      %inv = nn.invert_permutation %perm : tensor<16xi64>
      %back = nn.embedding %inv, %yw : (tensor<16xi64>, tensor<16x6xf32>) -> tensor<16x6xf32>
      %loss = nn.reduce_sum %back {dims = array<i64: 0, 1>} : (tensor<16x6xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
