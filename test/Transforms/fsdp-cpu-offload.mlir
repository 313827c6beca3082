// CPU offload (CPUOffload(offload_params=True)) on NestedWrappedModule at 2
// ranks with SGD + momentum: each all-gather reads a host-to-device copy of
// its shard placed right before it (forward and backward), each reduced
// gradient shard is copied to the host right after its reduction, and the
// optimizer reads the host copies. At one rank (no gather) the views of the
// flat parameter share one copy. The report keeps host memory out of the
// device peak; the lowering puts the copies and the optimizer on their
// streams and the state in the host buffer.
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step="optimizer=sgd momentum=0.9" --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-prefetch --fsdp-cpu-offload | FileCheck %s
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step --fsdp-shard="world-size=1" --fsdp-insert-collectives --fsdp-cpu-offload | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-pipeline="world-size=2 optimizer=adamw cpu-offload report" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-pipeline="world-size=2 optimizer=adamw report" -o /dev/null | FileCheck %s --check-prefix=PLAIN
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-pipeline="world-size=2 optimizer=adamw cpu-offload" --convert-fsdp-to-rt | FileCheck %s --check-prefix=LOWERED
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-pipeline="world-size=2 optimizer=adamw cpu-offload" --fsdp-report="host-link-gbps=0.0001" -o /dev/null | FileCheck %s --check-prefix=SLOWLINK
// RUN: not fsdp-opt %examples/nested_wrapped.mlir --fsdp-cpu-offload -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNSHARDED

// CHECK: func.func @nested_wrapped_train_step
// CHECK-SAME: fsdp.cpu_offload
// CHECK: %[[D0:.*]] = fsdp.to_device %arg0 {fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""}
// CHECK-NEXT: fsdp.unshard %[[D0]] unit ""
// CHECK: %[[D2:.*]] = fsdp.to_device %arg3 {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.2"}
// CHECK-NEXT: fsdp.unshard %[[D2]] unit "module.2"
// CHECK: %[[R2:.*]] = fsdp.reduce_grads {{.*}} unit "module.2"
// CHECK-NEXT: %[[H2:.*]] = fsdp.to_host %[[R2]] {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.2"}
// CHECK: %[[R:.*]] = fsdp.reduce_grads {{.*}} unit ""
// CHECK-NEXT: %[[H:.*]] = fsdp.to_host %[[R]]
// CHECK-NEXT: fsdp.sgd_step %arg0, %[[H]] momentum_buffer %arg4
// CHECK: fsdp.sgd_step %arg3, %[[H2]] momentum_buffer %arg7
// CHECK-NOT: fsdp.to_device

// ONE: %[[D:.*]] = fsdp.to_device %arg0 {fsdp.phase = #fsdp<phase forward>
// ONE-NEXT: fsdp.view %[[D]][0]
// ONE-NEXT: fsdp.view %[[D]][512]
// ONE-NOT: fsdp.to_device

// REPORT: cpu offload: host memory per rank 3968 bytes (pinned on GPUs; not in the device peak): sharded parameters 992; optimizer state 1984; gradients 992; the optimizer runs on the host
// REPORT: peak memory per rank: 3628 bytes
// REPORT-NEXT: sharded parameters 0
// REPORT-NEXT: optimizer state 0
// PLAIN-NOT: cpu offload
// PLAIN: peak memory per rank: 6740 bytes
// PLAIN-NEXT: sharded parameters 992
// PLAIN-NEXT: optimizer state 1984

// LOWERED: fsdp.program = "{{.*}}\22cpu_offload\22:true{{.*}}\22host_bytes\22:4608
// LOWERED: func.func @nested_wrapped_train_step(%arg0: !rt.context {rt.name = "ctx"}, %arg1: !rt.buffer {rt.name = "persistent"}, %arg2: !rt.stream {rt.name = "compute"}, %arg3: !rt.stream {rt.name = "all_gather"}, %arg4: !rt.stream {rt.name = "reduce_scatter"}, %arg5: !rt.comm {rt.name = "shard"}, %arg6: !rt.comm {rt.name = "replicate"}, %arg7: !rt.comm {rt.name = "post_forward"}, %arg8: i64 {rt.name = "step_count"}, %arg9: i64 {rt.name = "seed"}, %arg10: i64 {rt.name = "rank"}, %arg11: !rt.buffer {rt.name = "host"}, %arg12: !rt.stream {rt.name = "host_to_device"}, %arg13: !rt.stream {rt.name = "device_to_host"}, %arg14: !rt.stream {rt.name = "host_compute"}
// LOWERED-SAME: rt.host_bytes = 4608
// The root's shard: copied from the host buffer on the host-to-device
// stream, gathered once the copy's event is reached.
// LOWERED: %[[STAGE:.*]] = rt.alloc_at %arg0 offset {{[0-9]+}} bytes 192
// LOWERED: rt.call @copy(%arg0, %arg12, %[[STAGE]], %c0_i64, %arg11, %c0_i64, %c152_i64)
// LOWERED-NEXT: %[[COPIED:.*]] = rt.event_create
// LOWERED-NEXT: rt.event_record %arg0, %[[COPIED]] on %arg12
// LOWERED: rt.stream_wait %arg0, %arg3 waits %[[COPIED]]
// LOWERED: rt.call @all_gather(%arg0, %arg3, %arg5, %c0_i32, %[[STAGE]]
// The optimizer on the host stream, on the host buffer only.
// LOWERED: rt.call @adamw_step(%arg0, %arg14, %c0_i32, %arg11, %c0_i64, %arg11, %{{.*}}, %arg11, %{{.*}}, %arg11,

// With the copies at 0.1 MB/s the compute waits for them: the predicted
// step goes from 0.9 ms to tens of milliseconds.
// SLOWLINK: predicted step time: {{[0-9][0-9]\.[0-9]}} ms = compute
// SLOWLINK-SAME: 0.0001 GB/s host link

// UNSHARDED: error: fsdp-cpu-offload: model 'nested_wrapped' has no sharded train step
