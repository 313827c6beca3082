// FSDP's ignored modules (`unit<ignored = local>`: torch's ignored_modules;
// `ignored = all_reduce`: their gradients averaged as DDP would): the flat
// parameter is whole on every rank and never gathered; a local gradient is
// never reduced, an all-reduced one is summed over every rank with FSDP1's
// divide factors (the shard group, then the replicas). The program marks
// the unit rank-local and ignored (same initial weights on every rank);
// the report and the summary count its parameters and bytes.
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" | FileCheck %s
// RUN: sed 's/ignored = local/ignored = all_reduce/' %s | fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=2" | FileCheck %s --check-prefix=AR
// RUN: sed 's/ignored = local/ignored = all_reduce/' %s | fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=2 strategy=no-shard" | FileCheck %s --check-prefix=AR-DDP
// RUN: sed 's/ignored = local/ignored = all_reduce/' %s | fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" | FileCheck %s --check-prefix=AR-HSDP
// RUN: sed 's/ignored = local/ignored = all_reduce/' %s | fsdp-opt --fsdp-pipeline="world-size=2" | FileCheck %s --check-prefix=AR-SCHED
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" --convert-fsdp-to-rt | FileCheck %s --check-prefix=PROGRAM
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: sed 's/ignored = local/ignored = all_reduce/' %s | fsdp-opt --fsdp-pipeline="world-size=2" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=AR-REPORT
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" --fsdp-report=json=true -o /dev/null | %python -c "import json,sys; s=json.load(sys.stdin)['steps'][0]; print(s['ignored'], s['rank_local_units'], sorted({c['unit'] for c in s['collectives']}))" | FileCheck %s --check-prefix=JSON
// RUN: fsdp-opt %s --fsdp-model-summary -o /dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: fsdp-opt %s --fsdp-model-summary=json=true -o /dev/null | %python -c "import json,sys; m=json.load(sys.stdin)['models'][0]; print(m['ignored_params'], m['ignored_bytes'])" | FileCheck %s --check-prefix=SUMMARY-JSON
// RUN: fsdp-opt %s --fsdp-build-train-step="clip-grad-norm=1.0" --fsdp-shard="world-size=2" | FileCheck %s --check-prefix=CLIP
// RUN: fsdp-opt %s --fsdp-build-train-step="clip-grad-norm=1.0 clip-norm-type=inf" --fsdp-shard="world-size=2" | FileCheck %s --check-prefix=CLIP-INF
// RUN: fsdp-opt %s --fsdp-build-train-step="loss-scale=dynamic" --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" | FileCheck %s --check-prefix=SCALE
// RUN: sed 's/ignored = local/ignored = all_reduce/' %s | fsdp-opt --fsdp-build-train-step="loss-scale=dynamic" --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" | FileCheck %s --check-prefix=SCALE-AR
// RUN: sed 's/@fc1 kind "Linear" unit/@fc1 kind "Linear"/' %s | fsdp-opt --fsdp-auto-wrap=policy=always | FileCheck %s --check-prefix=WRAP
// RUN: sed 's/@fc1 kind "Linear" unit/@fc1 kind "Linear"/' %s | fsdp-opt --fsdp-auto-wrap="policy=size min-params=60" | FileCheck %s --check-prefix=SIZE

// Loss scaling (ShardedGradScaler): the inf check covers the ignored
// gradient too and counts every rank's: its local gradients differ between
// replicas, so the flag is summed over the shard group and then across
// replicas, and every rank skips the step together. All-reduced ignored
// gradients are the same everywhere: the shard group's sum suffices.
// SCALE: fsdp.found_nonfinite {{.*}} : tensor<3xf32>, tensor<54xf32>, tensor<78xf32> -> tensor<f32>
// SCALE: fsdp.all_reduce {{.*}} group shard dtype f32 sum
// SCALE: %[[ALL:.*]] = fsdp.all_reduce {{.*}} group replicate dtype f32 sum
// SCALE: %[[FOUND:.*]] = nn.reshape %[[ALL]]
// SCALE: fsdp.sgd_step %arg2, {{.*}} skip_if %[[FOUND]]
// SCALE-AR: fsdp.found_nonfinite {{.*}} tensor<78xf32> -> tensor<f32>
// SCALE-AR: fsdp.all_reduce {{.*}} group shard dtype f32 sum
// SCALE-AR-NOT: group replicate
// SCALE-AR: fsdp.sgd_step %arg2

// The attribute round-trips; fc2's flat parameter is whole (78 elements).
// CHECK: fsdp.module @fc2 kind "Linear" unit<ignored = local>
// CHECK-LABEL: func.func @net_train_step(
// CHECK-SAME: %arg2: tensor<78xf32> {fsdp.flat_numel = 78 : i64, fsdp.flat_param = "fc2", fsdp.ignored, fsdp.offsets = array<i64: 0, 72>, fsdp.params = ["fc2.weight", "fc2.bias"], fsdp.rank_local}
// CHECK-NOT: fsdp.unshard %arg2
// CHECK: fsdp.unshard %arg1 unit "fc1" mesh<shard = 2>
// CHECK: %[[W:.*]] = fsdp.view %arg2[0] {{.*}} : tensor<78xf32> -> tensor<6x12xf32>
// CHECK: %[[G:.*]] = fsdp.flatten {{.*}}fsdp.unit = "fc2"{{.*}} -> tensor<78xf32>
// CHECK-NOT: fsdp.reduce_grads %[[G]]
// CHECK-NOT: fsdp.all_reduce
// CHECK: fsdp.sgd_step %arg2, %[[G]]

// AR: %[[G:.*]] = fsdp.flatten {{.*}}fsdp.unit = "fc2"{{.*}} -> tensor<78xf32>
// AR-NEXT: %[[S:.*]] = fsdp.all_reduce %[[G]] mesh<shard = 2> group shard dtype f32 sum {{{.*}}fsdp.unit = "fc2", pre_divide = 2.000000e+00 : f64} : tensor<78xf32>
// AR: fsdp.sgd_step %arg2, %[[S]]

// No-shard's world is its replicate group.
// AR-DDP: %[[G:.*]] = fsdp.flatten {{.*}}fsdp.unit = "fc2"
// AR-DDP-NEXT: fsdp.all_reduce %[[G]] mesh<replicate = 2, shard = 1> group replicate dtype f32 sum {{{.*}}pre_divide = 2.000000e+00 : f64}

// Hybrid: the shard group, then the replicas; /4 in all.
// AR-HSDP: %[[G:.*]] = fsdp.flatten {{.*}}fsdp.unit = "fc2"
// AR-HSDP-NEXT: %[[S:.*]] = fsdp.all_reduce %[[G]] mesh<replicate = 2, shard = 2> group shard dtype f32 sum {{{.*}}post_divide = 2.000000e+00 : f64, pre_divide = 2.000000e+00 : f64}
// AR-HSDP-NEXT: fsdp.all_reduce %[[S]] mesh<replicate = 2, shard = 2> group replicate dtype f32 sum {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "fc2"}

// Scheduled, the all-reduce follows fc2's flat gradient, before fc1's
// backward.
// AR-SCHED: fsdp.flatten {{.*}}fsdp.unit = "fc2"
// AR-SCHED-NEXT: fsdp.all_reduce
// AR-SCHED-NEXT: nn.matmul {{.*}}fsdp.unit = "fc1"
// AR-SCHED: fsdp.reduce_grads {{.*}}unit "fc1"

// Clipping, as FSDP1's clip_grad_norm_: the sharded gradients' Σg² is
// all-reduced over the shard group, fc2's local one added after; the inf
// norm's max takes fc2's gradient before the all-reduce.
// CLIP: %[[OWN:.*]] = nn.reduce_sum %{{.*}} fsdp.unit = "fc2"
// CLIP: %[[SUM:.*]] = fsdp.all_reduce %{{.*}} group shard dtype f32 sum
// CLIP: %[[S:.*]] = nn.reshape %[[SUM]]
// CLIP: %[[TOTAL:.*]] = nn.add %[[S]], %[[OWN]]
// CLIP: fsdp.clip_grad_norm %[[TOTAL]]
// CLIP-INF: %[[M:.*]] = fsdp.max_abs %{{.*}}, %{{.*}}, %{{.*}} {{.*}}: tensor<3xf32>, tensor<54xf32>, tensor<78xf32> -> tensor<f32>
// CLIP-INF: fsdp.all_reduce %{{.*}} group shard dtype f32 max

// PROGRAM: \22flat_numel\22:78,\22frozen\22:false,\22ignored\22:true,\22name\22:\22fc2\22,\22offset\22:{{[0-9]+}},\22padded_numel\22:78,{{.*}}\22rank_local\22:true,\22shard_numel\22:78
// PROGRAM-NOT: \22ignored\22:true

// REPORT: ignored parameters: 78 elements, 312 bytes per rank (whole on every rank, never gathered nor sharded): fc2 (78 elements, gradient local)
// REPORT: collectives per step: 4,
// REPORT-NOT: fc2
// AR-REPORT: ignored parameters: 78 elements, 312 bytes per rank (whole on every rank, never gathered nor sharded): fc2 (78 elements, gradient all-reduced)
// AR-REPORT: collectives per step: 5, {{.*}}all_reduce backward 1
// AR-REPORT: all_reduce fc2 backward f32 78 312
// JSON: [{'all_reduced': False, 'bytes': 312, 'elements': 78, 'unit': 'fc2'}] [] ['', 'fc1']

// An ignored module is not an FSDP unit.
// SUMMARY: model net: 192 parameters (192 trainable), 768 bytes; 0 buffer elements (0 bytes); 2 FSDP units; 78 ignored parameters (312 bytes: whole on every rank, never gathered)
// SUMMARY: fc2 Linear ign 78 78 78 312 0
// SUMMARY-JSON: 78 312

// Auto-wrapping leaves the ignored module as it is (no "already a unit"
// error) and wraps nothing inside it; its parameters do not count.
// WRAP: fsdp.module @fc1 kind "Linear" unit {
// WRAP: fsdp.module @fc2 kind "Linear" unit<ignored = local> {
// WRAP: fsdp.module @act kind "ReLU" {
// SIZE: fsdp.module @root kind "Net" unit {
// SIZE: fsdp.module @fc1 kind "Linear" unit {
// SIZE: fsdp.module @fc2 kind "Linear" unit<ignored = local> {

fsdp.model @net {
  fsdp.module @root kind "Net" unit {
    fsdp.module @fc1 kind "Linear" unit {
      fsdp.param @weight : tensor<12x8xf32> init <kaiming_uniform(2.23606797749979)>
      fsdp.param @bias : tensor<12xf32> init <uniform(-0.35355339059327373, 0.35355339059327373)>
      fsdp.forward (%x: tensor<4x8xf32>) -> tensor<4x12xf32> {
        %w = fsdp.get_param @weight : tensor<12x8xf32>
        %b = fsdp.get_param @bias : tensor<12xf32>
        %y = nn.linear %x, %w, %b : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<4x12xf32>
        fsdp.return %y : tensor<4x12xf32>
      }
    }
    fsdp.module @fc2 kind "Linear" unit<ignored = local> {
      fsdp.module @act kind "ReLU" {
        fsdp.forward (%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
          %y = nn.relu %x : tensor<4x6xf32>
          fsdp.return %y : tensor<4x6xf32>
        }
      }
      fsdp.param @weight : tensor<6x12xf32> init <kaiming_uniform(2.23606797749979)>
      fsdp.param @bias : tensor<6xf32> init <uniform(-0.2886751345948129, 0.2886751345948129)>
      fsdp.forward (%x: tensor<4x12xf32>) -> tensor<4x6xf32> {
        %w = fsdp.get_param @weight : tensor<6x12xf32>
        %b = fsdp.get_param @bias : tensor<6xf32>
        %y = nn.linear %x, %w, %b : (tensor<4x12xf32>, tensor<6x12xf32>, tensor<6xf32>) -> tensor<4x6xf32>
        %r = fsdp.call @act(%y) : (tensor<4x6xf32>) -> tensor<4x6xf32>
        fsdp.return %r : tensor<4x6xf32>
      }
    }
    fsdp.param @scale : tensor<6xf32> init <ones>
    fsdp.forward (%x: tensor<4x8xf32>) -> tensor<f32> {
      %h = fsdp.call @fc1(%x) : (tensor<4x8xf32>) -> tensor<4x12xf32>
      %y = fsdp.call @fc2(%h) : (tensor<4x12xf32>) -> tensor<4x6xf32>
      %s = fsdp.get_param @scale : tensor<6xf32>
      %z = nn.mul %y, %s : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
      %loss = nn.reduce_sum %z {dims = array<i64: 0, 1>} : (tensor<4x6xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
