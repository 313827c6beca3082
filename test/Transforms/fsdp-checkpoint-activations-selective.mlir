// Selective activation checkpointing (policy=selective): the backward
// recomputes only the cheap ops of a checkpointed unit (layer norm, split,
// gelu here) and reads the results of its linears, matmul and attention
// (with the attention's softmax statistics) kept from the forward.
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Block policy=selective" --fsdp-keep-attention-stats | FileCheck %s
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Block policy=selective" --fsdp-keep-attention-stats | FileCheck %s --check-prefix=KEPT
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Block" | FileCheck %s --check-prefix=UNIT
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=PLAIN
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none activation-checkpointing=Block activation-checkpointing-policy=selective" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=SELECTIVE
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none activation-checkpointing=Block" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=WHOLE
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Block policy=ops" 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not fsdp-opt %s --fsdp-pipeline="activation-checkpointing=Block activation-checkpointing-policy=none" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="policy=selective" 2>&1 | FileCheck %s --check-prefix=NOKINDS

// The forward; then the recomputation, of the cheap ops only, reading the
// kept linear results: the gradients read the recomputed layer norm,
// split and gelu, and the forward's linear, attention and statistics.
// CHECK-LABEL: func.func @net_train_step(
// CHECK: %[[N:.*]] = nn.layer_norm %arg3 {{.*}}phase forward
// CHECK: %[[P:.*]] = nn.linear %[[N]], %arg0 {{.*}}phase forward
// CHECK: nn.split %[[P]] {{.*}}phase forward
// CHECK: %[[O:.*]], %[[S:.*]] = nn.attention {{.*}}phase forward{{.*}}keep_stats
// CHECK: %[[Y:.*]] = nn.linear %[[O]], %arg1 {{.*}}phase forward
// CHECK: nn.gelu %[[Y]] {{.*}}phase forward
// CHECK: nn.matmul {{.*}}phase forward
// CHECK: %[[N2:.*]] = nn.layer_norm %arg3 {{.*}}phase backward
// CHECK: %[[QKV2:.*]]:3 = nn.split %[[P]] {{.*}}phase backward
// CHECK: %[[G2:.*]] = nn.gelu %[[Y]] {{.*}}phase backward
// CHECK: nn.matmul %{{.*}}, %[[G2]] {{.*}}phase backward
// CHECK: nn.gelu_grad %{{.*}}, %[[Y]]
// CHECK: nn.reshape %[[O]]
// CHECK: nn.attention_grad %{{.*}}, %[[QKV2]]#0, %[[QKV2]]#1, %[[QKV2]]#2 saved %[[O]], %[[S]]
// CHECK: nn.reshape %[[N2]]
// CHECK: return

// After the forward (up to the root's sum), no linear, attention or
// forward matmul (the only one that transposes its right operand) runs
// again.
// KEPT-LABEL: func.func @net_train_step(
// KEPT: nn.reduce_sum {{.*}}phase forward
// KEPT-NOT: nn.linear
// KEPT-NOT: nn.attention %
// KEPT-NOT: transpose_rhs
// KEPT: return

// Whole-unit checkpointing recomputes the linears and the attention too
// (not the matmul: the backward reads only its operands).
// UNIT-LABEL: func.func @net_train_step(
// UNIT: nn.linear {{.*}}phase backward
// UNIT: nn.attention {{.*}}phase backward
// UNIT: nn.linear {{.*}}phase backward
// UNIT: nn.gelu {{.*}}phase backward

// Activations kept for the backward at the step's peak (per rank, f32;
// fsdp-pack-attention makes the attention read the qkv projection):
// without checkpointing the layer norm's output 2·16·32·4 = 4096, the qkv
// projection 2·16·96·4 = 12288, the attention's output 2·16·32·4 = 4096
// and statistics 2·4·16·4 = 512, in all 20992; selective recomputes the
// layer norm: 20992 - 4096 = 16896; whole-unit keeps nothing (the unit's
// input is the step's).
// PLAIN: activations for backward{{ +}}20992
// SELECTIVE: activations for backward{{ +}}16896
// WHOLE: activations for backward{{ +}}0

// POLICY: error: 'fsdp.model' op asks for activation checkpointing policy 'ops'; expected unit or selective
// NONE: error: 'fsdp.model' op asks for activation checkpointing policy 'none'; expected unit or selective
// NOKINDS: error: 'fsdp.model' op asks for selective activation checkpointing without the kinds of the units to checkpoint (activation-checkpointing=<kinds>|all)

fsdp.model @net {
  fsdp.module @root kind "Net" {
    fsdp.module @block kind "Block" unit {
      fsdp.param @qkv : tensor<96x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @proj : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<2x16x32xf32>) -> tensor<2x16x16xf32> {
        %wqkv = fsdp.get_param @qkv : tensor<96x32xf32>
        %wproj = fsdp.get_param @proj : tensor<32x32xf32>
        %n = nn.layer_norm %x : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %p = nn.linear %n, %wqkv : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
        %q, %k, %v = nn.split %p {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %y = nn.linear %o, %wproj : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
        %g = nn.gelu %y : tensor<2x16x32xf32>
        %m = nn.matmul %g, %g {transpose_rhs} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x16xf32>
        fsdp.return %m : tensor<2x16x16xf32>
      }
    }
    fsdp.forward (%x: tensor<2x16x32xf32>) -> tensor<f32> {
      %m = fsdp.call @block(%x) : (tensor<2x16x32xf32>) -> tensor<2x16x16xf32>
      %l = nn.reduce_sum %m {dims = array<i64: 0, 1, 2>} : (tensor<2x16x16xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
