// NestedWrappedModule on 4 ranks with backward prefetch `pre`: every
// all-gather on the all-gather stream, every reduce-scatter on the
// reduce-scatter stream, kernels on compute; 7 gathers and 4 reductions.
// RUN: fsdp-opt %S/../../examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 optimizer=sgd momentum=0.9 backward-prefetch=pre" --convert-fsdp-to-rt | FileCheck %s
// RUN: fsdp-opt %S/../../examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 optimizer=sgd momentum=0.9" --convert-fsdp-to-rt | grep -c "rt.call @all_gather(%arg0, %arg3," | FileCheck %s --check-prefix=GATHERS
// RUN: fsdp-opt %S/../../examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 optimizer=sgd momentum=0.9" --convert-fsdp-to-rt | grep -c "rt.call @reduce_scatter(%arg0, %arg4," | FileCheck %s --check-prefix=REDUCES
// RUN: fsdp-opt %S/../../examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 optimizer=sgd momentum=0.9" --convert-fsdp-to-rt | grep "rt.call" | grep -v "@all_gather\|@reduce_scatter" | FileCheck %s --check-prefix=ONCOMPUTE
// Hybrid 2x2: reduce-scatter in the shard group, then all-reduce in the replicate group, both on the reduce-scatter stream.
// RUN: fsdp-opt %S/../../examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 sharding-strategy=hybrid-shard shard-group-size=2 optimizer=adamw" --convert-fsdp-to-rt | FileCheck %s --check-prefix=HYBRID
// No-shard (DDP): no all-gather; one all-reduce per unit over the replicate (whole world) group.
// RUN: fsdp-opt %S/../../examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 sharding-strategy=no-shard optimizer=adamw" --convert-fsdp-to-rt | FileCheck %s --check-prefix=DDP

// GATHERS: 7
// REDUCES: 4
// ONCOMPUTE: rt.call @linear_forward(%arg0, %arg2,
// ONCOMPUTE-NOT: rt.call @{{[a-z_]+}}(%arg0, %arg{{[013-9]}},

// CHECK-LABEL: func.func @nested_wrapped_train_step
// Before compute reads a gathered unit it waits for the gather's event.
// CHECK: rt.call @all_gather(%arg0, %arg3,
// CHECK-NEXT: %[[E:.*]] = rt.event_create
// CHECK-NEXT: rt.event_record %arg0, %[[E]] on %arg3
// CHECK: rt.stream_wait %arg0, %arg2 waits %[[E]]
// CHECK: rt.call @linear_forward(%arg0, %arg2,

// HYBRID: rt.call @reduce_scatter(%arg0, %arg4, %arg5,
// HYBRID: rt.call @all_reduce(%arg0, %arg4, %arg6, %c0_i32, %c0_i32,

// DDP-NOT: @all_gather
// DDP: rt.call @scale_forward(%arg0, %arg4,
// DDP: rt.call @all_reduce(%arg0, %arg4, %arg6,

// Gradients are written in place into their unit's flat gradient unless
// that raises the peak, chosen unit by unit (NestedWrappedModule at 2
// ranks): the three inner units' gradients in place; the root's four
// (module.0 and module.3, whose first gradient comes early) are copied.
// Each layer's gradients come from one nn.linear_grad, which keeps the
// gathered weight until its weight and bias gradients exist.
// RUN: fsdp-opt %S/../../examples/nested_wrapped.mlir --fsdp-pipeline="world-size=2 optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s --check-prefix=INPLACE
// INPLACE-LABEL: func.func @nested_wrapped_train_step
// INPLACE-SAME: rt.arena_bytes = 5120
// INPLACE-COUNT-3: rt.call @reduce_scatter(
// INPLACE-NOT: rt.call @copy(
// INPLACE-COUNT-4: rt.call @copy(%arg0, %arg2, %[[ROOTGRAD:[0-9]+]], %c{{[0-9]+}}_i64, %{{[0-9]+}}, %c0_i64, %c{{(128|16|32)}}_i64)
// INPLACE-NOT: rt.call @copy(
// INPLACE: rt.call @reduce_scatter(
// INPLACE-NOT: rt.call @copy(
// INPLACE: return

// The output does not depend on where values sit in memory (frees at the
// same point come in plan order): two runs print the same module.
// RUN: fsdp-opt %S/../../examples/gpt2.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw lower=true" -o %t.first
// RUN: fsdp-opt %S/../../examples/gpt2.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw lower=true" -o %t.second
// RUN: diff %t.first %t.second
