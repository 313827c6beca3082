// Adafactor (torch.optim.Adafactor): its factored state, and how fsdp-shard
// places its sums over whole parameters on the shards.
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="optimizer=adafactor weight-decay=0.1" | FileCheck %s --check-prefix=STEP
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adafactor auto-wrap-policy=always" | FileCheck %s --check-prefix=SHARD
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=4 sharding-strategy=hybrid-shard shard-group-size=2 optimizer=adafactor auto-wrap-policy=always" | FileCheck %s --check-prefix=HYBRID
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=1 optimizer=adafactor" | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adafactor auto-wrap-policy=always report=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adafactor auto-wrap-policy=always beta2-decay=-0.5 eps1=1e-20 eps2=0.2 clip-threshold=2.0" | FileCheck %s --check-prefix=HYPER
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adafactor auto-wrap-policy=always lower=true" | FileCheck %s --check-prefix=CALLS
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adafactor cpu-offload=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFFLOAD

// The state per parameter: rows + columns of a matrix (fc1.weight
// [32, 16]: 48), the elements of a vector (fc1.bias: 32); torch's defaults
// (lr 1e-2, beta2_decay -0.8, eps (f32 epsilon, 1e-3), d 1) are the op's.
// STEP: %arg6: tensor<48xf32> {fsdp.state = "fc1.weight.second_moment"}, %arg7: tensor<32xf32> {fsdp.state = "fc1.bias.second_moment"}
// STEP: fsdp.adafactor_step %arg0, %{{.*}}, %arg6 step %arg12 {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", lr = 1.000000e-02 : f64, weight_decay = 1.000000e-01 : f64} : (tensor<32x16xf32>, tensor<32x16xf32>, tensor<48xf32>, tensor<i64>) -> (tensor<32x16xf32>, tensor<48xf32>)
// STEP: fsdp.adafactor_step %arg5, %{{.*}}, %arg11 step %arg12 {{.*}} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>)

// Unit fc1's flat parameter (544 elements, shards of 272): the state whole
// (48 + 32 = 80 on every rank), the stats Σ param² per parameter (2) then
// Σ grad² in the state's layout (80): 82, summed over the shard group;
// then Σ update² per parameter, summed; then the update.
// SHARD: %arg3: tensor<80xf32> {fsdp.flat_param = "fc1", fsdp.flat_state = "second_moment"}
// SHARD: %[[STATS:.*]] = fsdp.adafactor_stats %arg0, %[[G:.*]] {{{.*}}fsdp.unit = "fc1", layout = array<i64: 0, 512, 32, 16, 512, 32, 0, 0>} : (tensor<272xf32>, tensor<272xf32>) -> tensor<82xf32>
// SHARD-NEXT: %[[SUM:.*]] = fsdp.all_reduce %[[STATS]] mesh<shard = 2> group shard dtype f32 sum {{.*}} : tensor<82xf32>
// SHARD-NEXT: %[[STATE:.*]], %[[USQ:.*]] = fsdp.adafactor_factor %arg0, %[[G]], %arg3, %[[SUM]] step %arg6 {{.*}} -> (tensor<80xf32>, tensor<2xf32>)
// SHARD-NEXT: %[[USUM:.*]] = fsdp.all_reduce %[[USQ]] mesh<shard = 2> group shard dtype f32 sum {{.*}} : tensor<2xf32>
// SHARD-NEXT: fsdp.adafactor_apply %arg0, %[[G]], %[[STATE]], %[[SUM]], %[[USUM]] step %arg6 {{.*}} -> tensor<272xf32>

// Hybrid: over the shard group only (replicas hold the same shards).
// HYBRID: fsdp.all_reduce %{{.*}} mesh<replicate = 2, shard = 2> group shard dtype f32 sum {{.*}} : tensor<82xf32>
// HYBRID-NOT: group replicate

// One rank: nothing to sum.
// ONE-NOT: fsdp.all_reduce
// ONE: fsdp.adafactor_stats
// ONE-NOT: fsdp.all_reduce

// The report: the state is the whole factored moments (216 floats), and two
// small all-reduces per unit.
// REPORT: optimizer state                    864
// REPORT: all_reduce optimizer 6
// REPORT: all_reduce      fc1     optimizer  f32            82         328
// REPORT: all_reduce      fc1     optimizer  f32             2           8

// The hyper-parameters reach the ops.
// HYPER: fsdp.adafactor_apply {{.*}} {beta2_decay = -5.000000e-01 : f64, d = 2.000000e+00 : f64, eps1 = 9.9999999999999995E-21 : f64, eps2 = 2.000000e-01 : f64, {{.*}}lr = 1.000000e-02 : f64}

// Lowered: the three calls, the state whole in
// the program description.
// CALLS: \22optimizer\22:\22adafactor\22
// CALLS: \22state\22:[{\22name\22:\22second_moment\22,\22numel\22:80,\22offset\22:{{[0-9]+}},\22whole\22:true}]
// CALLS: llvm.call @fsdprt_adafactor_stats({{.*}}) : (i64, i64, i32, i64, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64) -> i32
// CALLS: llvm.call @fsdprt_adafactor_factor({{.*}}) : (i64, i64, i32, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, f64, f64, i64, i64) -> i32
// CALLS: llvm.call @fsdprt_adafactor_apply({{.*}}) : (i64, i64, i32, i64, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, f64, f64, f64, f64, f64, i64, i64) -> i32

// CPU offload runs the update on the host, with no all-reduce between its
// parts: refused, at the model.
// OFFLOAD: mlp.mlir:4:1: error: 'fsdp.adafactor_stats' op fsdp-cpu-offload: Adafactor's update reduces its statistics over the shard group between its parts, which an optimizer offloaded to the host does not do; use another optimizer or no offload
