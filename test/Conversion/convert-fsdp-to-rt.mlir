// The MLP (one unit) on 2 ranks: where each tensor lives, which stream runs
// each call, and the events between streams.
// RUN: fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adamw" --convert-fsdp-to-rt | FileCheck %s
// RUN: fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adamw" --convert-fsdp-to-rt | FileCheck %s --check-prefix=PROGRAM

// The fsdp.model is gone; the program description carries what fsdp-run needs.
// PROGRAM-NOT: fsdp.model
// PROGRAM: module attributes {fsdp.program = "{\22arena_bytes\22:[[ARENA:[0-9]+]],{{.*}}\22entry\22:\22mlp_train_step\22,\22estimate_bytes\22:[[ARENA]],{{.*}}\22optimizer\22:\22adamw\22,\22persistent_bytes\22:11328,\22replicate\22:1,{{.*}}arena plan per rank: [[ARENA]] bytes{{.*}}\22shard\22:2,{{.*}}\22units\22:[{\22dtype\22:\22f32\22,\22flat_numel\22:1732,\22frozen\22:false,\22ignored\22:false,\22name\22:\22\22,\22offset\22:0,\22padded_numel\22:1732,\22params\22:[{\22flat_offset\22:0,\22init\22:{\22args\22:[2.2360679774997898],\22kind\22:\22kaiming_uniform\22},\22name\22:\22fc1.weight\22,\22shape\22:[32,16]}
// PROGRAM-SAME: \22shard_numel\22:866,\22state\22:[{\22name\22:\22exp_avg\22,\22offset\22:3520},{\22name\22:\22exp_avg_sq\22,\22offset\22:7040}]

// CHECK-LABEL: func.func @mlp_train_step(
// CHECK-SAME: %[[CTX:[a-z0-9]+]]: !rt.context {rt.name = "ctx"}, %[[P:[a-z0-9]+]]: !rt.buffer {rt.name = "persistent"},
// CHECK-SAME: %[[C:[a-z0-9]+]]: !rt.stream {rt.name = "compute"}, %[[AG:[a-z0-9]+]]: !rt.stream {rt.name = "all_gather"}, %[[RS:[a-z0-9]+]]: !rt.stream {rt.name = "reduce_scatter"},
// CHECK-SAME: %[[SHARD:[a-z0-9]+]]: !rt.comm {rt.name = "shard"}, %{{.*}}: !rt.comm {rt.name = "replicate"}, %{{.*}}: !rt.comm {rt.name = "post_forward"}, %[[COUNT:[a-z0-9]+]]: i64 {rt.name = "step_count"}, %{{.*}}: i64 {rt.name = "seed"}, %{{.*}}: i64 {rt.name = "rank"}, %{{.*}}: !rt.buffer {rt.name = "host"}, %{{.*}}: !rt.stream {rt.name = "host_to_device"}, %{{.*}}: !rt.stream {rt.name = "device_to_host"}, %{{.*}}: !rt.stream {rt.name = "host_compute"})
// CHECK-SAME: rt.arena_bytes = [[ARENA:[0-9]+]] : i64, rt.persistent_bytes = 11328 : i64
// CHECK: %[[STEP:.*]] = arith.addi %[[COUNT]], %c1_i64
// The unit's gathered buffer is placed after the persistent part and filled
// on the all-gather stream from the shard at persistent offset 0.
// CHECK: %[[FULL:.*]] = rt.alloc_at %[[CTX]] offset 11328 bytes 6976
// CHECK: rt.call @all_gather(%[[CTX]], %[[AG]], %[[SHARD]], %c0_i32, %[[P]], %c0_i64, %[[FULL]], %c0_i64, %c1732_i64)
// CHECK-NEXT: %[[GATHERED:.*]] = rt.event_create
// CHECK-NEXT: rt.event_record %[[CTX]], %[[GATHERED]] on %[[AG]]
// CHECK-NEXT: rt.stream_wait %[[CTX]], %[[C]] waits %[[GATHERED]]
// Views are offsets into the gathered buffer (fc1.bias at element 512).
// CHECK: rt.call @linear_forward(%[[CTX]], %[[C]], %c0_i32, %[[P]], %c10560_i64, %[[FULL]], %c0_i64, %[[FULL]], %c2048_i64,
// CHECK: rt.call @mse_loss_forward(%[[CTX]], %[[C]], {{.*}}, %[[P]], %c11264_i64, %c32_i64, %c0_i32)
// The gathered buffer is freed on compute after its last use (the reshard).
// CHECK: rt.free %[[CTX]], %[[C]], %[[FULL]]
// The flat gradient reuses the gathered buffer's range once it is free.
// CHECK: %[[GRAD:.*]] = rt.alloc_at %[[CTX]] offset 11328 bytes 6976
// CHECK: rt.call @copy(%[[CTX]], %[[C]], %[[GRAD]], %c0_i64,
// CHECK: %[[FLAT:.*]] = rt.event_create
// CHECK-NEXT: rt.event_record %[[CTX]], %[[FLAT]] on %[[C]]
// CHECK: %[[SHARDGRAD:.*]] = rt.alloc_at
// CHECK-NEXT: rt.stream_wait %[[CTX]], %[[RS]] waits %[[FLAT]]
// CHECK: rt.call @reduce_scatter(%[[CTX]], %[[RS]], %[[SHARD]], %c0_i32, %c0_i32, %[[GRAD]], %c0_i64, %[[SHARDGRAD]], %c0_i64, %c1732_i64, %cst{{.*}}, %cst{{.*}})
// CHECK-NEXT: %[[REDUCED:.*]] = rt.event_create
// CHECK-NEXT: rt.event_record %[[CTX]], %[[REDUCED]] on %[[RS]]
// CHECK-NEXT: rt.free %[[CTX]], %[[RS]], %[[GRAD]]
// CHECK-NEXT: rt.stream_wait %[[CTX]], %[[C]] waits %[[REDUCED]]
// The optimizer updates the shard and its state in place, with step count + 1.
// CHECK: rt.call @adamw_step(%[[CTX]], %[[C]], %c0_i32, %[[P]], %c0_i64, %[[SHARDGRAD]], %c0_i64, %[[P]], %c3520_i64, %[[P]], %c7040_i64, %c866_i64, %[[STEP]],
// CHECK: rt.free %[[CTX]], %[[C]], %[[SHARDGRAD]]
// CHECK-NEXT: rt.synchronize %[[CTX]]
// CHECK-COUNT-3: rt.event_destroy
// CHECK-NEXT: return
