// The VJPs of a mixture-of-experts layer as a Mixtral-style model exports
// it: the router's top-k scatters its values' cotangent back into the
// softmax's shape (nn.embedding_grad over the flattened rows), the grouped
// GEMM's input cotangent is the grouped GEMM on the transposed expert
// weights and its weight cotangent nn.grouped_matmul_grad_weight; the
// integer bookkeeping (sort, floor_div, histc, invert_permutation) gets
// none.
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step | FileCheck %s

// CHECK-LABEL: func.func @moe_train_step
// Forward: the routing ops, once each.
// CHECK: %{{[^ ,:]+}}, %[[I:[^ ,:]+]] = nn.topk
// CHECK: %{{[^ ,:]+}}, %[[PERM:[^ ,:]+]] = nn.sort
// CHECK: nn.floor_div
// CHECK: nn.histc
// CHECK: %[[WT:[^ ,:]+]] = nn.transpose %arg2 {{.*}}permutation = array<i64: 0, 2, 1>
// CHECK: %[[OFFS:[^ ,:]+]] = nn.cast %{{.*}} : tensor<4xf32> to tensor<4xi32>
// CHECK: %[[ROWS:[^ ,:]+]] = nn.embedding
// CHECK: nn.grouped_matmul %[[ROWS]], %[[WT]], %[[OFFS]] {{.*}}: (tensor<16x8xf32>, tensor<4x8x6xf32>, tensor<4xi32>) -> tensor<16x6xf32>
// CHECK: nn.invert_permutation %[[PERM]]
// Backward: the grouped GEMM of the transposed weights and the weight
// gradient, transposed back to the parameter's layout.
// CHECK: nn.embedding_grad %{{.*}} -> tensor<16x6xf32>
// CHECK-NEXT: %[[DY:[^ ,:]+]] = nn.mul
// CHECK: %[[WTT:[^ ,:]+]] = nn.transpose %[[WT]] {{.*}}permutation = array<i64: 0, 2, 1>
// CHECK: nn.grouped_matmul %[[DY]], %[[WTT]], %[[OFFS]] {{.*}}-> tensor<16x8xf32>
// CHECK: %[[DW:[^ ,:]+]] = nn.grouped_matmul_grad_weight %[[DY]], %[[ROWS]], %[[OFFS]] {{.*}}-> tensor<4x8x6xf32>
// CHECK: %[[DWT:[^ ,:]+]] = nn.transpose %[[DW]] {{.*}}-> tensor<4x6x8xf32>
// The top-k values' cotangent lands at entry r·4 + index of the [8, 4]
// scores.
// CHECK: %[[BASE:[^ ,:]+]] = arith.constant {{.*}}dense<{{\[}}[0, 0], [4, 4], [8, 8], [12, 12]{{.*}}> : tensor<8x2xi64>
// CHECK: %[[AT:[^ ,:]+]] = nn.add %[[I]], %[[BASE]]
// CHECK: %[[FLAT:[^ ,:]+]] = nn.reshape %[[AT]] {{.*}} to tensor<16xi64>
// CHECK: nn.embedding_grad %{{[^ ]+}}, %[[FLAT]] {{{.*}}num_embeddings = 32 : i64} : (tensor<16x1xf32>, tensor<16xi64>) -> tensor<32x1xf32>
// No integer op has a backward.
// CHECK-NOT: nn.sort
// CHECK-NOT: nn.histc
// CHECK-NOT: nn.floor_div
// CHECK-NOT: nn.invert_permutation
// CHECK: fsdp.sgd_step %arg0
// CHECK: fsdp.sgd_step %arg1
// CHECK: fsdp.sgd_step %arg2, %[[DWT]]
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
      %ends = nn.cumsum %counts {dim = 0 : i64} : tensor<4xf32>
      %we = fsdp.get_param @experts : tensor<4x6x8xf32>
      %wt = nn.transpose %we {permutation = array<i64: 0, 2, 1>} : (tensor<4x6x8xf32>) -> tensor<4x8x6xf32>
      %offs = nn.cast %ends : tensor<4xf32> to tensor<4xi32>
      %rows = nn.embedding %tok, %x : (tensor<16xi64>, tensor<8x8xf32>) -> tensor<16x8xf32>
      %y = nn.grouped_matmul %rows, %wt, %offs : (tensor<16x8xf32>, tensor<4x8x6xf32>, tensor<4xi32>) -> tensor<16x6xf32>
      %inv = nn.invert_permutation %perm : tensor<16xi64>
      %v16 = nn.reshape %v : tensor<8x2xf32> to tensor<16x1xf32>
      %wsort = nn.embedding %perm, %v16 : (tensor<16xi64>, tensor<16x1xf32>) -> tensor<16x1xf32>
      %yw = nn.mul %y, %wsort : (tensor<16x6xf32>, tensor<16x1xf32>) -> tensor<16x6xf32>
      %back = nn.embedding %inv, %yw : (tensor<16xi64>, tensor<16x6xf32>) -> tensor<16x6xf32>
      %loss = nn.reduce_sum %back {dims = array<i64: 0, 1>} : (tensor<16x6xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// A load-balancing loss (Mixtral's): the histogram of the router's choices
// times its mean probabilities. The counts are piecewise constant, so only
// the probabilities carry the router's gradient; no histc in the backward.
// CHECK-LABEL: func.func @aux_train_step
// CHECK: %[[P:[^ ,:]+]] = nn.softmax
// CHECK: nn.histc
// CHECK-NOT: nn.histc
// CHECK: nn.broadcast %{{.*}} to tensor<8x4xf32>
// CHECK: fsdp.sgd_step %arg0
fsdp.model @aux {
  fsdp.module @root kind "Test" {
    fsdp.param @router : tensor<4x8xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%x: tensor<8x8xf32>) -> tensor<f32> {
      %r = fsdp.get_param @router : tensor<4x8xf32>
      %logits = nn.linear %x, %r : (tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<8x4xf32>
      %p = nn.softmax %logits : tensor<8x4xf32>
      %v, %i = nn.topk %p {k = 2 : i64} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi64>)
      %flat = nn.reshape %i : tensor<8x2xi64> to tensor<16xi64>
      %f = nn.cast %flat : tensor<16xi64> to tensor<16xf32>
      %counts = nn.histc %f {bins = 4 : i64, min = 0.0, max = 4.0} : (tensor<16xf32>) -> tensor<4xf32>
      %mean = nn.reduce_mean %p {dims = array<i64: 0>} : (tensor<8x4xf32>) -> tensor<4xf32>
      %prod = nn.mul %counts, %mean : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %loss = nn.reduce_sum %prod {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
