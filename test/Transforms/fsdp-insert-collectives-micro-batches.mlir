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

