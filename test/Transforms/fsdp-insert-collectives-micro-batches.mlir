// Every micro-batch's backward reads the parameters its own backward gather
// brings (reshard after forward): micro-batch 1's fc2 backward reads the view
// of micro-batch 1's backward gather, not of its forward gather, which is
// resharded after the forward (an op reading it afterwards would keep the
// forward's gather alive to the backward, unreported).
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=always optimizer=sgd grad-accum-steps=2" | FileCheck %s

// CHECK: %[[FWD:.*]] = fsdp.wait %{{.*}} {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>, fsdp.unit = "fc2"}
// CHECK: %[[FWDW:.*]] = fsdp.view %[[FWD]][0]
// CHECK: nn.linear %{{.*}}, %[[FWDW]],
// CHECK: fsdp.reshard %[[FWD]] unit "fc2" {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>
// CHECK-NOT: %[[FWDW]]
// CHECK: %[[BWD:.*]] = fsdp.wait %{{.*}} {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>, fsdp.unit = "fc2"}
// CHECK-NOT: %[[FWDW]]
// CHECK: %[[BWDW:.*]] = fsdp.view %[[BWD]][0]
// CHECK-NOT: %[[FWDW]]
// CHECK: nn.linear_grad %{{.*}}, %{{.*}}, %[[BWDW]] {fsdp.micro_batch = 1 : i64
// CHECK-NOT: %[[FWDW]]
// CHECK: fsdp.reshard %[[BWD]] unit "fc2"


// reshard-after-backward=false: micro-batch 0's backward gather of fc2 is not
// freed after its backward; micro-batch 1's forward reads it (no forward
// gather in micro-batch 1) and frees it after its forward, as FSDP2 skips the
// all-gather of a unit still gathered; the last micro-batch frees as before.
// fc1, whose backward reads no weight, is still freed after each forward.
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=always optimizer=sgd grad-accum-steps=2 reshard-after-backward=false" | FileCheck %s --check-prefix=KEEP

// KEEP: fsdp.reshard %{{.*}} unit "fc1" {fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase forward>
// KEEP: %[[B0:.*]] = fsdp.wait %{{.*}} {fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase backward>, fsdp.unit = "fc2"}
// KEEP: %[[B0W:.*]] = fsdp.view %[[B0]][0]
// KEEP: %[[B0B:.*]] = fsdp.view %[[B0]][1024]
// KEEP: nn.linear_grad %{{.*}}, %{{.*}}, %[[B0W]] {fsdp.micro_batch = 0 : i64
// KEEP-NOT: fsdp.reshard %[[B0]]
// KEEP-NOT: fsdp.wait %{{.*}} {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>, fsdp.unit = "fc2"}
// KEEP: fsdp.wait %{{.*}} {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>, fsdp.unit = "fc1"}
// KEEP-NOT: fsdp.reshard %[[B0]]
// KEEP: nn.linear %{{.*}}, %[[B0W]], %[[B0B]] {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>, fsdp.unit = "fc2"}
// KEEP-NEXT: fsdp.reshard %[[B0]] unit "fc2" {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>
// KEEP: %[[B1:.*]] = fsdp.wait %{{.*}} {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>, fsdp.unit = "fc2"}
// KEEP: fsdp.reshard %[[B1]] unit "fc2" {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>

// shard-grad-op keeps every unit from the first micro-batch's forward to the
// last one's backward: one gather and one free per unit and step.
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=always optimizer=sgd grad-accum-steps=2 sharding-strategy=shard-grad-op reshard-after-backward=false" | FileCheck %s --check-prefix=ZERO2
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=always optimizer=sgd grad-accum-steps=2 sharding-strategy=shard-grad-op reshard-after-backward=false" | grep -c "= fsdp.unshard" | FileCheck %s --check-prefix=ZERO2-GATHERS

// ZERO2-GATHERS: {{^}}3{{$}}
// ZERO2: %[[G:.*]] = fsdp.wait %{{.*}} {fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase forward>, fsdp.unit = "fc2"}
// ZERO2-NOT: fsdp.reshard %[[G]]
// ZERO2: nn.linear_grad {{.*}} {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>, fsdp.unit = "fc2"}
// ZERO2: fsdp.reshard %[[G]] unit "fc2" {fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>
