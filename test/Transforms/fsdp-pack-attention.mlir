// fsdp-pack-attention: an nn.attention whose query, key and value are the
// three results of one nn.split along the last dimension, read by nothing
// else, becomes nn.packed_attention of the split's input (the split and
// unused nn ops erased); grouped-query heads too. Anything else is left alone:
// a bias, a part read elsewhere, parts in another order, a split of
// another dimension. The split's dim may count from the end (-1).
// RUN: fsdp-opt %s -split-input-file --fsdp-pack-attention | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-pack-attention --fsdp-build-train-step | FileCheck %s --check-prefix=STEP

// CHECK-LABEL: fsdp.model @gpt
// CHECK: fsdp.forward (%[[X:.*]]: tensor<2x16x96xf32>) -> tensor<2x16x32xf32> {
// CHECK-NEXT: %[[O:.*]] = nn.packed_attention %[[X]] {causal, num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
// CHECK-NEXT: fsdp.return %[[O]]
// CHECK-LABEL: fsdp.forward (%{{.*}}: tensor<2x16x64xf32>)
// CHECK-NEXT: nn.packed_attention %{{.*}} {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 5.000000e-01 : f64} : (tensor<2x16x64xf32>) -> tensor<2x16x32xf32>
// An unused read of a parameter stays (it places the parameter's owner).
// CHECK: fsdp.forward (%{{.*}}: tensor<2x16x96xf32>, %{{.*}}: tensor<2x16x64xf32>) -> tensor<f32> {
// CHECK-NEXT: fsdp.get_param @g
// STEP-LABEL: func.func @gpt_train_step(
// STEP: nn.packed_attention %
// STEP: nn.packed_attention_grad %{{.*}}, %{{.*}} {causal{{.*}}num_heads = 4 : i64{{.*}}} : (tensor<2x16x32xf32>, tensor<2x16x96xf32>) -> tensor<2x16x96xf32>
// STEP-NOT: nn.concat
fsdp.model @gpt {
  fsdp.module @root kind "Attn" unit {
    fsdp.param @w : tensor<96x96xf32> init <normal(0.0, 0.02)>
    fsdp.param @g : tensor<64x64xf32> init <normal(0.0, 0.02)>
    fsdp.module @mha kind "MHA" {
      fsdp.forward (%qkv: tensor<2x16x96xf32>) -> tensor<2x16x32xf32> {
        %q, %k, %v = nn.split %qkv {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %unused = nn.reshape %k : tensor<2x16x32xf32> to tensor<2x16x4x8xf32>
        %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        fsdp.return %o : tensor<2x16x32xf32>
      }
    }
    fsdp.module @gqa kind "GQA" {
      fsdp.forward (%qkv: tensor<2x16x64xf32>) -> tensor<2x16x32xf32> {
        %q, %k, %v = nn.split %qkv {dim = -1 : i64, sizes = array<i64: 32, 16, 16>} : (tensor<2x16x64xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>)
        %o = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64} : (tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x32xf32>
        fsdp.return %o : tensor<2x16x32xf32>
      }
    }
    fsdp.forward (%x: tensor<2x16x96xf32>, %y: tensor<2x16x64xf32>) -> tensor<f32> {
      %owner = fsdp.get_param @g : tensor<64x64xf32>
      %w = fsdp.get_param @w : tensor<96x96xf32>
      %p = nn.linear %x, %w : (tensor<2x16x96xf32>, tensor<96x96xf32>) -> tensor<2x16x96xf32>
      %a = fsdp.call @mha(%p) : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
      %g = fsdp.get_param @g : tensor<64x64xf32>
      %r = nn.linear %y, %g : (tensor<2x16x64xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
      %b = fsdp.call @gqa(%r) : (tensor<2x16x64xf32>) -> tensor<2x16x32xf32>
      %s = nn.add %a, %b : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
      %l = nn.reduce_sum %s {dims = array<i64: 0, 1, 2>} : (tensor<2x16x32xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// CHECK-LABEL: fsdp.model @alone
// CHECK-NOT: nn.packed_attention
// CHECK-COUNT-4: nn.split
fsdp.model @alone {
  fsdp.module @root kind "Alone" unit {
    fsdp.module @cases kind "Cases" {
      fsdp.forward (%qkv: tensor<2x16x96xf32>, %bias: tensor<1x1x16x16xf32>, %t: tensor<6x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) {
        %q, %k, %v = nn.split %qkv {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %biased = nn.attention %q, %k, %v bias %bias {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<1x1x16x16xf32>) -> tensor<2x16x32xf32>
        %q2, %k2, %v2 = nn.split %qkv {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %reread = nn.attention %q2, %k2, %v2 {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %q3, %k3, %v3 = nn.split %qkv {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %swapped = nn.attention %k3, %q3, %v3 {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %a, %b, %c = nn.split %t {dim = 0 : i64, sizes = array<i64: 2, 2, 2>} : (tensor<6x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %rows = nn.attention %a, %b, %c {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        fsdp.return %biased, %reread, %q2, %swapped, %rows : tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>
      }
    }
    fsdp.forward (%qkv: tensor<2x16x96xf32>, %bias: tensor<1x1x16x16xf32>, %t: tensor<6x16x32xf32>) -> tensor<f32> {
      %r:5 = fsdp.call @cases(%qkv, %bias, %t) : (tensor<2x16x96xf32>, tensor<1x1x16x16xf32>, tensor<6x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
      %l = nn.reduce_sum %r#0 {dims = array<i64: 0, 1, 2>} : (tensor<2x16x32xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
