// PyTorch FSDP's collective schedule for NestedWrappedModule wrapped as in
// its test (4 units: root 76, module.1 272, module.1.0 80, module.2 68) at
// world size 4: exact counts per strategy, and placement.
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=full-shard" --fsdp-insert-collectives > %t.full
// RUN: FileCheck %s --check-prefix=FULL-AG < %t.full
// RUN: FileCheck %s --check-prefix=FULL-RS < %t.full
// RUN: FileCheck %s --check-prefix=PLACE < %t.full
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=shard-grad-op" --fsdp-insert-collectives | FileCheck %s --check-prefix=ZERO2
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=no-shard" --fsdp-insert-collectives | FileCheck %s --check-prefix=DDP
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" --fsdp-insert-collectives | FileCheck %s --check-prefix=HSDP
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard-zero2 shard-group-size=2" --fsdp-insert-collectives | FileCheck %s --check-prefix=HSDP2
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives="reshard-root-after-forward=true" | FileCheck %s --check-prefix=ROOT
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step="grad-accum-steps=2" --fsdp-shard="world-size=4" --fsdp-insert-collectives > %t.sync
// RUN: FileCheck %s --check-prefix=ACCUM < %t.sync
// RUN: FileCheck %s --check-prefix=SYNC < %t.sync
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step="grad-accum-steps=3" --fsdp-shard="world-size=4" --fsdp-insert-collectives | FileCheck %s --check-prefix=SYNC3
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step="grad-accum-steps=2 no-sync=true" --fsdp-shard="world-size=4" --fsdp-insert-collectives > %t.nosync
// RUN: FileCheck %s --check-prefix=ACCUM < %t.nosync
// RUN: FileCheck %s --check-prefix=NOSYNC < %t.nosync
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step="grad-accum-steps=2" --fsdp-shard="world-size=4 strategy=shard-grad-op" --fsdp-insert-collectives="reshard-after-backward=false" | FileCheck %s --check-prefix=KEPT
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-insert-collectives | FileCheck %s --check-prefix=ALIAS
// RUN: sed -e 's/fsdp.module @"2" kind "Linear" unit {/fsdp.module @"2" kind "Linear" unit<reshard_after_forward = false> {/' %examples/nested_wrapped.mlir | fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives | FileCheck %s --check-prefix=KEEP
// RUN: sed -e 's/fsdp.module @"2" kind "Linear" unit {/fsdp.module @"2" kind "Linear" unit<reshard_after_forward = 2> {/' %examples/nested_wrapped.mlir | fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives | FileCheck %s --check-prefix=PAIRS
// RUN: sed -e 's/fsdp.module @"2" kind "Linear" unit {/fsdp.module @"2" kind "Linear" unit<reshard_after_forward = 4> {/' %examples/nested_wrapped.mlir | fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives | FileCheck %s --check-prefix=ALL4
// RUN: sed -e 's/fsdp.module @"2" kind "Linear" unit {/fsdp.module @"2" kind "Linear" unit<reshard_after_forward = 1> {/' %examples/nested_wrapped.mlir | fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives | FileCheck %s --check-prefix=ONE

// Full shard: 4 all-gathers in the forward, 3 in the backward (the root is
// kept), 4 gradient reductions.
// FULL-AG-COUNT-4: fsdp.unshard {{.*}}fsdp.phase = #fsdp<phase forward>
// FULL-AG-NOT: fsdp.unshard {{.*}}fsdp.phase = #fsdp<phase forward>
// FULL-AG-COUNT-3: fsdp.unshard {{.*}}fsdp.phase = #fsdp<phase backward>
// FULL-AG-NOT: fsdp.unshard
// FULL-RS-COUNT-4: fsdp.reduce_grads {{.*}} mesh<shard = 4>
// FULL-RS-NOT: fsdp.reduce_grads
// FULL-RS-NOT: fsdp.all_reduce

// Placement: each gather just before its unit's first use, a free after its
// last forward use, a second gather before its first backward use, the
// reduction right after its last gradient, the free after its last use.
// PLACE: %[[T0:.*]] = fsdp.unshard %arg0 unit ""
// PLACE: %[[F0:.*]] = fsdp.wait %[[T0]]
// PLACE: nn.linear %arg5
// PLACE: %[[T1:.*]] = fsdp.unshard %arg2 unit "module.1.0"
// PLACE: %[[F1:.*]] = fsdp.wait %[[T1]]
// PLACE: nn.linear
// PLACE-NEXT: fsdp.reshard %[[F1]] unit "module.1.0" {fsdp.phase = #fsdp<phase forward>
// PLACE-NEXT: fsdp.unshard %arg1 unit "module.1"
// PLACE: nn.linear
// PLACE-NEXT: fsdp.reshard %{{.*}} unit "module.1" {fsdp.phase = #fsdp<phase forward>
// PLACE: fsdp.unshard %arg3 unit "module.2"
// PLACE: fsdp.reshard %{{.*}} unit "module.2" {fsdp.phase = #fsdp<phase forward>
// PLACE: nn.reduce_sum {{.*}}fsdp.phase = #fsdp<phase forward>
// PLACE: %[[B2:.*]] = fsdp.unshard %arg3 unit "module.2" {{.*}}fsdp.phase = #fsdp<phase backward>
// PLACE: %[[R2:.*]] = fsdp.reduce_grads %{{.*}} unit "module.2"
// PLACE: fsdp.unshard %arg1 unit "module.1" {{.*}}fsdp.phase = #fsdp<phase backward>
// PLACE: fsdp.reduce_grads %{{.*}} unit "module.1"
// PLACE: fsdp.unshard %arg2 unit "module.1.0" {{.*}}fsdp.phase = #fsdp<phase backward>
// PLACE: fsdp.reduce_grads %{{.*}} unit "module.1.0"
// PLACE: fsdp.reduce_grads %{{.*}} unit ""
// PLACE: fsdp.sgd_step %arg3, %[[R2]]

// Shard-grad-op (ZeRO-2): parameters stay gathered from forward to
// backward: no backward all-gathers; freed after the backward.
// ZERO2-COUNT-4: fsdp.unshard {{.*}}fsdp.phase = #fsdp<phase forward>
// ZERO2-NOT: fsdp.unshard
// ZERO2: fsdp.reshard {{.*}}fsdp.phase = #fsdp<phase backward>

// No-shard (DDP): no all-gathers; 4 all-reduces of whole gradients.
// DDP-NOT: fsdp.unshard
// DDP-COUNT-4: fsdp.reduce_grads {{.*}} mesh<replicate = 4, shard = 1> {{.*}} : tensor<[[N:[0-9]+]]xf32> -> tensor<[[N]]xf32>
// DDP-NOT: fsdp.reduce_grads

// Hybrid 2 x 2: as full shard within a shard group; each reduction is a
// reduce-scatter in the group plus an all-reduce across the 2 replicas.
// HSDP-COUNT-4: fsdp.unshard {{.*}}mesh<replicate = 2, shard = 2> {{.*}}fsdp.phase = #fsdp<phase forward>
// HSDP-COUNT-3: fsdp.unshard {{.*}}mesh<replicate = 2, shard = 2> {{.*}}fsdp.phase = #fsdp<phase backward>
// HSDP-NOT: fsdp.unshard

// Hybrid ZeRO-2 (FSDP1's _HYBRID_SHARD_ZERO2), 2 x 2: gathered within the
// shard group once, kept from forward to backward, each unit freed in the
// backward before its reduction (a reduce-scatter in the group and an
// all-reduce across the replicas, as hybrid's).
// HSDP2: fsdp.strategy = #fsdp<strategy hybrid_shard_zero2>
// HSDP2-COUNT-4: fsdp.unshard {{.*}}mesh<replicate = 2, shard = 2> {{.*}}fsdp.phase = #fsdp<phase forward>
// HSDP2-NOT: fsdp.unshard
// HSDP2: fsdp.reshard %{{.*}} unit "module.2" {fsdp.phase = #fsdp<phase backward>
// HSDP2: fsdp.reduce_grads %{{.*}} unit "module.2" mesh<replicate = 2, shard = 2>
// HSDP2-NOT: fsdp.unshard

// reshard-root-after-forward: the root is gathered again for the backward.
// ROOT-COUNT-4: fsdp.unshard {{.*}}fsdp.phase = #fsdp<phase forward>
// ROOT: fsdp.reshard %{{.*}} unit "" {fsdp.phase = #fsdp<phase forward>
// ROOT-COUNT-4: fsdp.unshard {{.*}}fsdp.phase = #fsdp<phase backward>

// unit<reshard_after_forward = 2> on module.2 at 4 ranks keeps half of it
// after the forward (FSDP2's int reshard_after_forward) and gathers that half
// over pairs of ranks for the backward; 4 and 1 are true and false.
// PAIRS: %[[FULL:.*]] = fsdp.wait %{{.*}} {fsdp.phase = #fsdp<phase forward>, fsdp.unit = "module.2"} : !fsdp.token<tensor<68xf32>>
// PAIRS: %[[HALF:.*]] = fsdp.post_forward_shard %[[FULL]] unit "module.2" group 2 {fsdp.phase = #fsdp<phase forward>, fsdp.unit = "module.2"} : tensor<68xf32> -> tensor<34xf32>
// PAIRS-NEXT: fsdp.reshard %[[FULL]] unit "module.2" {fsdp.phase = #fsdp<phase forward>
// PAIRS: fsdp.unshard %[[HALF]] unit "module.2" mesh<shard = 4> {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.2", post_forward_group = 2 : i64} : tensor<34xf32> -> !fsdp.token<tensor<68xf32>>
// ALL4-NOT: post_forward
// ALL4: fsdp.reshard %{{.*}} unit "module.2" {fsdp.phase = #fsdp<phase forward>
// ALL4: fsdp.unshard %arg3 unit "module.2" {{.*}}fsdp.phase = #fsdp<phase backward>
// ONE-NOT: post_forward
// ONE-NOT: fsdp.reshard %{{.*}} unit "module.2" {fsdp.phase = #fsdp<phase forward>
// ONE: fsdp.reshard %{{.*}} unit "module.2" {fsdp.phase = #fsdp<phase backward>

// reshard-after-backward=false under shard-grad-op: each unit is gathered
// once per step, in micro-batch 0's forward, and freed once, after micro-batch
// 1's backward.
// KEPT-COUNT-4: fsdp.unshard {{.*}}fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase forward>
// KEPT-NOT: fsdp.unshard
// KEPT-NOT: fsdp.reshard {{.*}}fsdp.micro_batch = 0
// KEPT-COUNT-4: fsdp.reshard {{.*}}fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>
// KEPT-NOT: fsdp.reshard

// unit<reshard_after_forward = false> on module.2 keeps it for the backward.
// KEEP-NOT: fsdp.unshard %arg3 {{.*}}fsdp.phase = #fsdp<phase backward>
// KEEP: fsdp.unshard %arg3 unit "module.2" {{.*}}fsdp.phase = #fsdp<phase forward>
// KEEP-NOT: fsdp.reshard %{{.*}} unit "module.2" {fsdp.phase = #fsdp<phase forward>
// KEEP-NOT: fsdp.unshard %arg3
// KEEP: fsdp.reshard %{{.*}} unit "module.2" {fsdp.phase = #fsdp<phase backward>

// Two micro-batches: every micro-batch gathers each unit for its forward and
// again for its backward (8 + 6), as PyTorch does for every pass. By default
// each micro-batch reduce-scatters its gradients right after its backward
// of the unit (8) and the shards are summed; no_sync reduces the unsharded
// sum once, after the last (4).
// ACCUM-COUNT-4: fsdp.unshard {{.*}}fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase forward>
// ACCUM-COUNT-3: fsdp.unshard {{.*}}fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase backward>
// ACCUM-COUNT-4: fsdp.unshard {{.*}}fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>
// ACCUM-COUNT-3: fsdp.unshard {{.*}}fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>
// ACCUM-NOT: fsdp.unshard
// SYNC-LABEL: func.func
// SYNC: fsdp.unshard {{.*}}fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase backward>
// SYNC: fsdp.reduce_grads {{.*}}fsdp.micro_batch = 0 : i64
// SYNC: fsdp.unshard {{.*}}fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>
// SYNC-COUNT-4: fsdp.reduce_grads {{.*}}fsdp.micro_batch = 1 : i64
// SYNC-NOT: fsdp.reduce_grads
// SYNC: nn.add %{{.*}}, %{{.*}} {fsdp.grad_accumulation, fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.1.0"} : (tensor<20xf32>, tensor<20xf32>)

// Three micro-batches: the second one's shards join the sum at the start of
// the third one's backward (its reduce-scatters long done, one shard per
// unit through the backward).
// SYNC3: fsdp.reduce_grads {{.*}}fsdp.micro_batch = 1 : i64
// SYNC3: fsdp.unshard {{.*}}fsdp.micro_batch = 2 : i64, fsdp.phase = #fsdp<phase forward>
// SYNC3-NOT: fsdp.micro_batch = 2 : i64, fsdp.phase = #fsdp<phase backward>
// SYNC3-COUNT-4: nn.add {{.*}}fsdp.grad_accumulation, fsdp.micro_batch = 1 : i64
// SYNC3-NEXT: {{.*}}fsdp.micro_batch = 2 : i64, fsdp.phase = #fsdp<phase backward>
// NOSYNC: fsdp.unshard {{.*}}fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>
// NOSYNC-COUNT-4: fsdp.reduce_grads {{.*}}fsdp.phase = #fsdp<phase backward>, fsdp.unit
// NOSYNC-NOT: fsdp.reduce_grads

// A weight reshaped before use: the reshape reads the gathered buffer, so
// the free waits for the reshape's user, and the backward gathers the unit
// again and reshapes again.
// ALIAS-LABEL: func.func @alias_train_step
// ALIAS: fsdp.unshard %{{.*}} unit "a"
// ALIAS: %[[R:.*]] = nn.reshape
// ALIAS-NEXT: nn.matmul %{{.*}}, %[[R]]
// ALIAS-NEXT: fsdp.reshard %{{.*}} unit "a" {fsdp.phase = #fsdp<phase forward>
// ALIAS: fsdp.unshard %{{.*}} unit "a" {{.*}}phase backward>
// ALIAS: %[[R2:.*]] = nn.reshape {{.*}}phase backward>
// ALIAS: nn.matmul %{{.*}}, %[[R2]] {{.*}}transpose_rhs
// ALIAS-NEXT: fsdp.reshard %{{.*}} unit "a" {fsdp.phase = #fsdp<phase backward>
fsdp.model @alias {
  fsdp.module @root kind "M" {
    fsdp.module @a kind "L" unit {
      fsdp.param @w : tensor<16xf32> init <zeros>
      fsdp.forward (%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
        %w = fsdp.get_param @w : tensor<16xf32>
        %t = nn.reshape %w : tensor<16xf32> to tensor<4x4xf32>
        %y = nn.matmul %x, %t : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
        fsdp.return %y : tensor<2x4xf32>
      }
    }
    fsdp.param @v : tensor<4x4xf32> init <zeros>
    fsdp.forward (%x: tensor<2x4xf32>) -> tensor<f32> {
      %v = fsdp.get_param @v : tensor<4x4xf32>
      %h = nn.linear %x, %v : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %y = fsdp.call @a(%h) : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
