// fsdp-keep-attention-stats: in a train step, the backward of a packed
// attention reads its forward's result and softmax statistics (the forward
// becomes keep_stats); under activation checkpointing, those of the
// forward recomputed for it (the first forward's statistics are not kept),
// under selective checkpointing the kept forward's, its inputs recomputed.
// Of two candidate forwards the later keeps them; a forward of other
// attributes is not the backward's. nn.attention too.
// RUN: fsdp-opt %s -split-input-file --fsdp-pack-attention --fsdp-build-train-step --fsdp-keep-attention-stats | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-pack-attention --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Attn" --fsdp-keep-attention-stats | FileCheck %s --check-prefix=CKPT

// CHECK-LABEL: func.func @gpt_train_step(
// The kept forward is still the unit's forward-phase op.
// CHECK: %[[O:.*]], %[[S:.*]] = nn.packed_attention %{{.*}} {causal, fsdp.phase = #fsdp<phase forward>, fsdp.unit = "attn", keep_stats, num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x4x16xf32>)
// CHECK: nn.packed_attention_grad %{{.*}}, %{{.*}} saved %[[O]], %[[S]] {causal, {{.*}}num_heads = 4 : i64}
// CKPT-LABEL: func.func @gpt_train_step(
// CKPT: nn.packed_attention %{{.*}} {causal, {{[^}]*}}num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
// CKPT: %[[RO:.*]], %[[RS:.*]] = nn.packed_attention %{{.*}} {causal, {{.*}}keep_stats, num_heads = 4 : i64}
// CKPT: nn.packed_attention_grad %{{.*}}, %{{.*}} saved %[[RO]], %[[RS]]
fsdp.model @gpt {
  fsdp.module @root kind "Net" unit {
    fsdp.module @attn kind "Attn" unit {
      fsdp.param @w : tensor<96x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @proj : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
        %w = fsdp.get_param @w : tensor<96x32xf32>
        %proj = fsdp.get_param @proj : tensor<32x32xf32>
        %p = nn.linear %x, %w : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
        %q, %k, %v = nn.split %p {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %y = nn.linear %o, %proj : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
        fsdp.return %y : tensor<2x16x32xf32>
      }
    }
    fsdp.forward (%x: tensor<2x16x32xf32>) -> tensor<f32> {
      %y = fsdp.call @attn(%x) : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x16x32xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// Two forwards of the same qkv and attributes compute the same values: the
// later one keeps its statistics (the one the backward's inputs stay alive
// the least for).
// CHECK-LABEL: func.func @twice(
// CHECK: nn.packed_attention %{{.*}} {causal, num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
// CHECK: %[[TO:.*]], %[[TS:.*]] = nn.packed_attention %{{.*}} {causal, keep_stats, num_heads = 4 : i64}
// CHECK: nn.packed_attention_grad %{{.*}}, %{{.*}} saved %[[TO]], %[[TS]] {causal
func.func @twice(%qkv: tensor<2x16x96xf32>, %g: tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x96xf32>) {
  %a = nn.packed_attention %qkv {causal, num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %b = nn.packed_attention %qkv {causal, num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %d = nn.packed_attention_grad %g, %qkv {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x96xf32>) -> tensor<2x16x96xf32>
  return %a, %b, %d : tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x96xf32>
}

// -----

// A forward of other attributes (not causal) is not this backward's.
// CHECK-LABEL: func.func @other_attributes(
// CHECK-NOT: keep_stats
// CHECK: nn.packed_attention_grad %{{.*}}, %{{.*}} {causal
func.func @other_attributes(%qkv: tensor<2x16x96xf32>, %g: tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x96xf32>) {
  %a = nn.packed_attention %qkv {num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
  %d = nn.packed_attention_grad %g, %qkv {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x96xf32>) -> tensor<2x16x96xf32>
  return %a, %d : tensor<2x16x32xf32>, tensor<2x16x96xf32>
}

// -----

// nn.attention (separate q, k, v, as Llama's rotated q and k; a bias too):
// the same, the backward reading the result and statistics after its bias.
// CHECK-LABEL: func.func @separate(
// CHECK: %[[AO:.*]], %[[AS:.*]] = nn.attention %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} {causal, keep_stats, num_heads = 4 : i64, num_kv_heads = 2 : i64} : {{.*}} -> (tensor<2x16x32xf32>, tensor<2x4x16xf32>)
// CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} saved %[[AO]], %[[AS]] {causal
func.func @separate(%q: tensor<2x16x32xf32>, %kv: tensor<2x16x16xf32>, %b: tensor<1x1x16x16xf32>, %g: tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<1x1x16x16xf32>) {
  %o = nn.attention %q, %kv, %kv bias %b {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<2x16x32xf32>
  %dq, %dk, %dv, %db = nn.attention_grad %g, %q, %kv, %kv bias %b {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<1x1x16x16xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<1x1x16x16xf32>)
  return %o, %dq, %dk, %dv, %db : tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x16xf32>, tensor<2x16x16xf32>, tensor<1x1x16x16xf32>
}

// -----

// Selective checkpointing keeps the attention but recomputes what feeds
// it: the backward's query is a recomputation (backward ops repeating the
// forward's: the same RoPE of the same value) and counts as the forward's;
// its key, a dropout of another site, does not.
// CHECK-LABEL: func.func @recomputed(
// CHECK: %[[RO:.*]], %[[RS:.*]] = nn.attention {{.*}}keep_stats
// CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved %[[RO]], %[[RS]]
// CHECK-LABEL: func.func @not_recomputed(
// CHECK-NOT: keep_stats
// CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal
func.func @recomputed(%x: tensor<2x16x32xf32>, %g: tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>) {
  %q = nn.rope %x {fsdp.phase = #fsdp<phase forward>, num_heads = 4 : i64} : tensor<2x16x32xf32>
  %o = nn.attention %q, %x, %x {causal, fsdp.phase = #fsdp<phase forward>, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %q2 = nn.rope %x {fsdp.phase = #fsdp<phase backward>, num_heads = 4 : i64} : tensor<2x16x32xf32>
  %dq, %dk, %dv = nn.attention_grad %g, %q2, %x, %x {causal, fsdp.phase = #fsdp<phase backward>, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
  return %o, %dq : tensor<2x16x32xf32>, tensor<2x16x32xf32>
}
func.func @not_recomputed(%x: tensor<2x16x32xf32>, %g: tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>) {
  %k = nn.dropout %x {fsdp.phase = #fsdp<phase forward>, p = 1.000000e-01 : f64, rng_id = 1 : i64} : tensor<2x16x32xf32>
  %o = nn.attention %x, %k, %x {causal, fsdp.phase = #fsdp<phase forward>, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  %k2 = nn.dropout %x {fsdp.phase = #fsdp<phase backward>, p = 1.000000e-01 : f64, rng_id = 2 : i64} : tensor<2x16x32xf32>
  %dq, %dk, %dv = nn.attention_grad %g, %x, %k2, %x {causal, fsdp.phase = #fsdp<phase backward>, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
  return %o, %dq : tensor<2x16x32xf32>, tensor<2x16x32xf32>
}
