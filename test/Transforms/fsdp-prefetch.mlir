// Prefetch placement on NestedWrappedModule (full shard, 4 ranks); forward
// order root, module.1.0, module.1, module.2; backward order module.2,
// module.1, module.1.0 (the root is kept).
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-prefetch="forward-prefetch=false backward-prefetch=none" | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-prefetch="forward-prefetch=true backward-prefetch=none" | FileCheck %s --check-prefix=FWD
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-prefetch="forward-prefetch=true limit-all-gathers=1" | FileCheck %s --check-prefix=LIMIT1
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-prefetch | FileCheck %s --check-prefix=PRE
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-prefetch="backward-prefetch=post" | FileCheck %s --check-prefix=POST
// RUN: not fsdp-opt %examples/nested_wrapped.mlir --fsdp-prefetch="backward-prefetch=early" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADMODE
// RUN: not fsdp-opt %examples/nested_wrapped.mlir --fsdp-prefetch="limit-all-gathers=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADLIMIT
// RUN: not fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-prefetch -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNSHARDED
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step="grad-accum-steps=2" --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-prefetch="forward-prefetch=true limit-all-gathers=0" | FileCheck %s --check-prefix=MB
// RUN: sed -e 's/kind "NestedWrappedModule" unit {/kind "NestedWrappedModule" unit<forward_prefetch = ["module.1", "module.2"]> {/' -e 's/@"2" kind "Linear" unit {/@"2" kind "Linear" unit<backward_prefetch = ["module.1.0"]> {/' %examples/nested_wrapped.mlir | fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-prefetch="forward-prefetch=false backward-prefetch=none limit-all-gathers=0" | FileCheck %s --check-prefix=LISTS
// RUN: sed -e 's/@"2" kind "Linear" unit {/@"2" kind "Linear" unit<backward_prefetch = ["module.3"]> {/' %examples/nested_wrapped.mlir | not fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-prefetch -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTUNIT
// RUN: sed -e 's/@"2" kind "Linear" unit {/@"2" kind "Linear" unit<backward_prefetch = ["module.1", 3]> {/' %examples/nested_wrapped.mlir | not fsdp-opt -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTNAME

// Explicit lists (FSDP2's set_modules_to_forward_prefetch /
// set_modules_to_backward_prefetch), default prefetching off: once the
// root's gather is done, module.1's and module.2's are issued, in that
// order, two units ahead; module.1.0's stays before its own wait. In the
// backward module.2 issues module.1.0's gather once its own is done, and
// module.1's (not listed) stays before its wait.
// LISTS: %[[W0:.*]] = fsdp.wait %{{.*}} {fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""}
// LISTS-NEXT: fsdp.unshard %arg1 unit "module.1" {{.*}}phase forward>
// LISTS-NEXT: fsdp.unshard %arg3 unit "module.2" {{.*}}phase forward>
// LISTS: %[[T10:.*]] = fsdp.unshard %arg2 unit "module.1.0" {{.*}}phase forward>
// LISTS-NEXT: fsdp.wait %[[T10]]
// LISTS: fsdp.wait %{{.*}} {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.2"}
// LISTS-NEXT: fsdp.unshard %arg2 unit "module.1.0" {{.*}}phase backward>
// LISTS: %[[T1:.*]] = fsdp.unshard %arg1 unit "module.1" {{.*}}phase backward>
// LISTS-NEXT: fsdp.wait %[[T1]]
// NOTUNIT: error: 'fsdp.module' op unit 'module.2': backward_prefetch names 'module.3', which is not a unit this step gathers
// NOTNAME: error: custom op 'fsdp.module' backward_prefetch must list unit names (non-empty strings), got ["module.1", 3]

// Without prefetch every gather is issued right before its wait.
// NONE: %[[T:.*]] = fsdp.unshard %arg2 unit "module.1.0"
// NONE-NEXT: fsdp.wait %[[T]]
// NONE: %[[B:.*]] = fsdp.unshard %arg1 unit "module.1" {{.*}}phase backward>
// NONE-NEXT: fsdp.wait %[[B]]

// Forward prefetch: each next unit's gather is issued right after the
// current unit's gather completes, before the current unit's compute.
// FWD: %[[W0:.*]] = fsdp.wait %{{.*}} {fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""}
// FWD-NEXT: %[[T1:.*]] = fsdp.unshard %arg2 unit "module.1.0"
// FWD: nn.linear %arg5
// FWD: %[[W1:.*]] = fsdp.wait %[[T1]]
// FWD-NEXT: %[[T2:.*]] = fsdp.unshard %arg1 unit "module.1"
// FWD: nn.linear {{.*}}fsdp.unit = "module.1.0"
// FWD: fsdp.reshard %[[W1]]
// FWD-NEXT: %[[W2:.*]] = fsdp.wait %[[T2]]
// FWD-NEXT: %[[T3:.*]] = fsdp.unshard %arg3 unit "module.2"

// With limit-all-gathers=1, module.1's gather waits for module.1.0's free
// (the kept root does not count).
// LIMIT1: %[[T1:.*]] = fsdp.unshard %arg2 unit "module.1.0"
// LIMIT1: %[[W1:.*]] = fsdp.wait %[[T1]]
// LIMIT1: nn.linear
// LIMIT1-NEXT: fsdp.reshard %[[W1]]
// LIMIT1-NEXT: fsdp.unshard %arg1 unit "module.1"

// Backward pre (PyTorch's default): the next unit's gather before the
// current unit's gradient computation.
// PRE: %[[W2:.*]] = fsdp.wait %{{.*}} {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.2"}
// PRE-NEXT: %[[T1:.*]] = fsdp.unshard %arg1 unit "module.1" {{.*}}phase backward>
// PRE: fsdp.reduce_grads {{.*}} unit "module.2"
// PRE: fsdp.wait %[[T1]]
// PRE-NEXT: fsdp.unshard %arg2 unit "module.1.0" {{.*}}phase backward>

// Backward post: after the current unit's gradients, before their reduction.
// POST: fsdp.wait %{{.*}} {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.2"}
// POST-NOT: fsdp.unshard
// POST: %[[T1:.*]] = fsdp.unshard %arg1 unit "module.1" {{.*}}phase backward>
// POST-NEXT: fsdp.flatten {{.*}}fsdp.unit = "module.2"
// POST-NEXT: fsdp.reduce_grads {{.*}} unit "module.2"

// BADMODE: error: fsdp-prefetch: backward-prefetch must be none, pre or post, got 'early'
// BADLIMIT: error: fsdp-prefetch: limit-all-gathers must be >= 0, got -1
// UNSHARDED: error: 'fsdp.model' op has no sharded train step; run fsdp-shard and fsdp-insert-collectives first

// Two micro-batches, prefetching without a limit: no gather of the second
// micro-batch is issued before the first one's last reduction (prefetching
// stays within a pass, as PyTorch's does).
// MB-LABEL: func.func
// MB-NOT: fsdp.unshard {{.*}}fsdp.micro_batch = 1
// MB-COUNT-4: fsdp.reduce_grads {{.*}}fsdp.micro_batch = 0
// MB: fsdp.unshard {{.*}}fsdp.micro_batch = 1
