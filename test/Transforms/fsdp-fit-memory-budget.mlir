// memory-budget= (fsdp-fit-memory-budget): each unit's recompute policy is
// chosen so that the planned peak per rank (the report's) fits the budget,
// with the least predicted recompute. Three Blocks; per rank at 2 ranks the
// plain peak is 161292 bytes, every Block recomputed whole 111116.
// An eval step's choice: fsdp-fit-memory-budget-eval.mlir.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 report=true memory-budget=200000" -o /dev/null | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 report=true memory-budget=0.15MiB" -o /dev/null | FileCheck %s --check-prefix=MIB
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 report=true memory-budget=1.5GiB" -o /dev/null | FileCheck %s --check-prefix=GIB
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 report=true memory-budget=159000" -o /dev/null | FileCheck %s --check-prefix=SELECTIVE
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 report=true memory-budget=130000" -o /dev/null | FileCheck %s --check-prefix=MIXED
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=130000" | FileCheck %s --check-prefix=IR
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 report=true lower=true memory-budget=150000" -o /dev/null | FileCheck %s --check-prefix=LOWERED
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 lower=true memory-budget=111200" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ARENA
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 report=true memory-budget=112000" -o /dev/null | FileCheck %s --check-prefix=WHOLE
// RUN: sed 's/@b1 kind "Block" unit/@b1 kind "Block" unit<activation_checkpointing = selective>/' %s | fsdp-opt --fsdp-pipeline="world-size=2 report=true memory-budget=130000" -o /dev/null | FileCheck %s --check-prefix=MARKED
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-fit-memory-budget='budget=150000 evaluation="fsdp-checkpoint-activations,fsdp-shard{world-size=2},fsdp-insert-collectives,fsdp-prefetch"' | FileCheck %s --check-prefix=PASS
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=100000" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INFEASIBLE
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=24XB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADTEXT
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=1.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FRACTION
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=-3MiB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=24MiB activation-checkpointing=Block" -o /dev/null 2>&1 | FileCheck %s --check-prefix=KINDS
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=24MiB activation-checkpointing-policy=selective" -o /dev/null 2>&1 | FileCheck %s --check-prefix=POLICY

// A budget above the plain peak: nothing recomputed, one evaluation.
// NONE: memory budget: 200000 bytes (0.19 MiB) per rank for model net: planned peak 161292 bytes (0.15 MiB), 161292 bytes (0.15 MiB) before its choice; predicted recompute of the choice 0.00 ms per step; 1 choices evaluated
// NONE-NEXT: recompute (root): none
// NONE-NEXT: recompute b0: none
// NONE-NEXT: recompute b1: none
// NONE-NEXT: recompute b2: none
// NONE: peak memory per rank: 161292 bytes

// Suffixes: KiB / MiB / GiB are powers of 1024, fractions rounded.
// MIB: memory budget: 157286 bytes
// GIB: memory budget: 1610612736 bytes (1536.00 MiB)

// 2292 bytes to save: one Block's selective recompute (its layer norm's
// output, 4096 bytes) is the cheapest change that fits.
// SELECTIVE: memory budget: 159000 bytes {{.*}} planned peak 157196 bytes
// SELECTIVE-NEXT: recompute (root): none
// SELECTIVE-NEXT: recompute b0: none
// SELECTIVE-NEXT: recompute b1: none
// SELECTIVE-NEXT: recompute b2: selective
// SELECTIVE: peak memory per rank: 157196 bytes

// Policies mix: the first Block whole (most bytes per recompute second),
// then a selective Block fits for less recompute than a second whole one.
// MIXED: memory budget: 130000 bytes {{.*}} planned peak 128012 bytes {{.*}} predicted recompute of the choice 0.19 ms
// MIXED-NEXT: recompute (root): none
// MIXED-NEXT: recompute b0: whole unit
// MIXED-NEXT: recompute b1: none
// MIXED-NEXT: recompute b2: selective
// MIXED: peak memory per rank: 128012 bytes

// The choice is marks on the units, which fsdp-checkpoint-activations reads.
// IR: fsdp.module @b0 kind "Block" unit<activation_checkpointing = true>
// IR: fsdp.module @b1 kind "Block" unit {
// IR: fsdp.module @b2 kind "Block" unit<activation_checkpointing = selective>
// IR: nn.layer_norm {{.*}}phase backward

// A lowered program: the budget bounds the arena the runtime allocates
// (aligned buffers placed by lifetime; at least the planned peak).
// LOWERED: memory budget: 150000 bytes (0.14 MiB) per rank for model net: arena plan 132224 bytes (0.13 MiB), 161408 bytes (0.15 MiB) before its choice
// LOWERED-NEXT: recompute (root): none
// LOWERED-NEXT: recompute b0: whole unit
// ARENA: error: model net does not fit memory-budget 111200 bytes (0.11 MiB) per rank: the smallest arena plan activation checkpointing reaches is 111232 bytes (0.11 MiB)

// Close to the smallest peak: two Blocks whole.
// WHOLE: planned peak 111116 bytes
// WHOLE-NEXT: recompute (root): none
// WHOLE-NEXT: recompute b0: whole unit
// WHOLE-NEXT: recompute b1: whole unit
// WHOLE-NEXT: recompute b2: none

// A unit marked by hand keeps its mark; the others are chosen around it.
// MARKED: planned peak 128012 bytes (0.12 MiB), 153100 bytes (0.15 MiB) before its choice
// MARKED-NEXT: recompute (root): none
// MARKED-NEXT: recompute b0: whole unit
// MARKED-NEXT: recompute b2: none
// MARKED-NEXT: recompute b1: selective (marked by hand)

// The pass alone, with the evaluation pipeline spelled out.
// PASS: fsdp.module @b0 kind "Block" unit<activation_checkpointing = selective>

// INFEASIBLE: [[@LINE+6]]:1: error: model net does not fit memory-budget 100000 bytes (0.10 MiB) per rank: the smallest planned peak activation checkpointing reaches is 111116 bytes (0.11 MiB)
// BADTEXT: error: memory-budget '24XB' is not a byte count: expected a positive integer, or a number with a KiB, MiB or GiB suffix (e.g. 24MiB, 1.5GiB)
// FRACTION: error: memory-budget '1.5' is not a byte count
// NEGATIVE: error: memory-budget '-3MiB' is not a byte count
// KINDS: error: memory-budget cannot be combined with activation-checkpointing: the budget chooses what to recompute
// POLICY: error: memory-budget cannot be combined with activation-checkpointing-policy: the budget chooses what to recompute
fsdp.model @net {
  fsdp.module @root kind "Net" {
    fsdp.module @b0 kind "Block" unit {
      fsdp.param @qkv : tensor<96x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @proj : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
        %wqkv = fsdp.get_param @qkv : tensor<96x32xf32>
        %wproj = fsdp.get_param @proj : tensor<32x32xf32>
        %n = nn.layer_norm %x : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %p = nn.linear %n, %wqkv : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
        %q, %k, %v = nn.split %p {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %y = nn.linear %o, %wproj : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
        %g = nn.gelu %y : tensor<2x16x32xf32>
        fsdp.return %g : tensor<2x16x32xf32>
      }
    }
    fsdp.module @b1 kind "Block" unit {
      fsdp.param @qkv : tensor<96x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @proj : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
        %wqkv = fsdp.get_param @qkv : tensor<96x32xf32>
        %wproj = fsdp.get_param @proj : tensor<32x32xf32>
        %n = nn.layer_norm %x : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %p = nn.linear %n, %wqkv : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
        %q, %k, %v = nn.split %p {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %y = nn.linear %o, %wproj : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
        %g = nn.gelu %y : tensor<2x16x32xf32>
        fsdp.return %g : tensor<2x16x32xf32>
      }
    }
    fsdp.module @b2 kind "Block" unit {
      fsdp.param @qkv : tensor<96x32xf32> init <normal(0.0, 0.02)>
      fsdp.param @proj : tensor<32x32xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<2x16x32xf32>) -> tensor<2x16x32xf32> {
        %wqkv = fsdp.get_param @qkv : tensor<96x32xf32>
        %wproj = fsdp.get_param @proj : tensor<32x32xf32>
        %n = nn.layer_norm %x : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %p = nn.linear %n, %wqkv : (tensor<2x16x32xf32>, tensor<96x32xf32>) -> tensor<2x16x96xf32>
        %q, %k, %v = nn.split %p {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
        %o = nn.attention %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
        %y = nn.linear %o, %wproj : (tensor<2x16x32xf32>, tensor<32x32xf32>) -> tensor<2x16x32xf32>
        %g = nn.gelu %y : tensor<2x16x32xf32>
        fsdp.return %g : tensor<2x16x32xf32>
      }
    }
    fsdp.forward (%h0: tensor<2x16x32xf32>) -> tensor<f32> {
      %h1 = fsdp.call @b0(%h0) : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
      %h2 = fsdp.call @b1(%h1) : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
      %h3 = fsdp.call @b2(%h2) : (tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
      %l = nn.reduce_sum %h3 {dims = array<i64: 0, 1, 2>} : (tensor<2x16x32xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
