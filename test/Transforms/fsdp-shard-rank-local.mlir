// A rank-local unit (PyTorch's MixtureOfExperts expert, FSDP on a process
// group of its own rank): its flat parameter is whole on every rank, never
// gathered, its gradient never reduced; the other units shard and reduce as
// usual, and the program tells fsdp-run the unit is rank-local.
// RUN: fsdp-opt %s --fsdp-build-train-step="momentum=0.9" --fsdp-shard="world-size=2" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" | FileCheck %s --check-prefix=HSDP
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" --convert-fsdp-to-rt | FileCheck %s --check-prefix=PROGRAM
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" --fsdp-report=json=true -o /dev/null | %python -c "import json,sys; s=json.load(sys.stdin)['steps'][0]; print(s['rank_local_units'], sorted({c['unit'] for c in s['collectives']}))" | FileCheck %s --check-prefix=JSON
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" | FileCheck %s --check-prefix=SCHED
// RUN: fsdp-opt %s --fsdp-model-summary -o /dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: not fsdp-opt %s --fsdp-build-train-step="clip-grad-norm=1.0" --fsdp-shard="world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not fsdp-opt %s --fsdp-build-train-step="loss-scale=dynamic" --fsdp-shard="world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCALE

// CHECK-LABEL: func.func @moe_train_step(
// CHECK-SAME: %arg1: tensor<150xf32> {{[^}]*}}fsdp.flat_param = "module.1"
// CHECK-NOT: fsdp.rank_local
// CHECK-SAME: %arg2: tensor<288xf32> {fsdp.flat_numel = 288 : i64, fsdp.flat_param = "module.2", fsdp.offsets = array<i64: 0, 276>, fsdp.params = ["module.2.weight", "module.2.bias"], fsdp.rank_local}
// CHECK-NOT: fsdp.unshard %arg2
// CHECK: fsdp.unshard %arg1 unit "module.1" mesh<shard = 2>
// CHECK: %[[W:.*]] = fsdp.view %arg2[0] {{.*}} : tensor<288xf32> -> tensor<12x23xf32>
// CHECK: nn.linear %{{.*}}, %[[W]]
// CHECK-NOT: unit "module.2"
// CHECK: %[[G:.*]] = fsdp.flatten {{.*}}fsdp.unit = "module.2"{{.*}} -> tensor<288xf32>
// CHECK-NOT: fsdp.reduce_grads %[[G]]
// CHECK: fsdp.sgd_step %arg2, %[[G]]

// Hybrid sharding: neither the shard nor the replicate group touches it.
// HSDP-COUNT-2: fsdp.reduce_grads {{.*}}mesh<replicate = 2, shard = 2>
// HSDP-NOT: fsdp.reduce_grads
// HSDP-NOT: fsdp.unshard %arg2

// PROGRAM: \22flat_numel\22:288,\22frozen\22:false,\22ignored\22:false,\22name\22:\22module.2\22,\22offset\22:{{[0-9]+}},\22padded_numel\22:288,{{.*}}\22rank_local\22:true,\22shard_numel\22:288
// PROGRAM-NOT: \22rank_local\22:true

// Scheduled, the rank-local flat gradient is built right after the unit's
// last gradient (its parameter gradients die there), before the earlier
// units' backward, like the reduced units' flat gradients.
// SCHED: fsdp.flatten {{.*}}fsdp.unit = "module.2"
// SCHED: fsdp.unshard {{.*}}unit "module.1"{{.*}}backward
// SCHED: fsdp.reduce_grads {{.*}}unit "module.1"

// SUMMARY: module.1 Linear yes 299 299 299 1196 0
// SUMMARY: module.2 Linear local 288 288 288 1152 0

// The report names the unit and lists no collective of it.
// REPORT: rank-local units (whole on every rank, different on each, never gathered or reduced): module.2 (288 elements)
// REPORT: collectives per step: 5,
// REPORT-NOT: module.2
// JSON: [{'elements': 288, 'unit': 'module.2'}] ['', 'module.1']

// CLIP: fsdp-shard-rank-local.mlir:{{[0-9]+}}:7: error: 'fsdp.module' op is a rank-local unit: its gradient differs between ranks, so there is no single norm for clip-grad-norm to clip to
// SCALE: fsdp-shard-rank-local.mlir:{{[0-9]+}}:7: error: 'fsdp.module' op is a rank-local unit: loss scaling skips a step on every rank together, from the shard group's gradients, which do not cover a rank-local unit's
// SCALE-NOT: func.func

fsdp.model @moe {
  fsdp.module @root kind "MixtureOfExperts" unit {
    fsdp.module @module kind "Sequential" {
      fsdp.module @"0" kind "Linear" {
        fsdp.param @weight : tensor<12x8xf32> init <kaiming_uniform(2.23606797749979)>
        fsdp.param @bias : tensor<12xf32> init <uniform(-0.35355339059327373, 0.35355339059327373)>
        fsdp.forward (%x: tensor<4x8xf32>) -> tensor<4x12xf32> {
          %w = fsdp.get_param @weight : tensor<12x8xf32>
          %b = fsdp.get_param @bias : tensor<12xf32>
          %y = nn.linear %x, %w, %b : (tensor<4x8xf32>, tensor<12x8xf32>, tensor<12xf32>) -> tensor<4x12xf32>
          fsdp.return %y : tensor<4x12xf32>
        }
      }
      fsdp.module @"1" kind "Linear" unit {
        fsdp.param @weight : tensor<23x12xf32> init <kaiming_uniform(2.23606797749979)>
        fsdp.param @bias : tensor<23xf32> init <uniform(-0.2886751345948129, 0.2886751345948129)>
        fsdp.forward (%x: tensor<4x12xf32>) -> tensor<4x23xf32> {
          %w = fsdp.get_param @weight : tensor<23x12xf32>
          %b = fsdp.get_param @bias : tensor<23xf32>
          %y = nn.linear %x, %w, %b : (tensor<4x12xf32>, tensor<23x12xf32>, tensor<23xf32>) -> tensor<4x23xf32>
          fsdp.return %y : tensor<4x23xf32>
        }
      }
      fsdp.module @"2" kind "Linear" unit<rank_local = true> {
        fsdp.param @weight : tensor<12x23xf32> init <kaiming_uniform(2.23606797749979)>
        fsdp.param @bias : tensor<12xf32> init <uniform(-0.20851441405707477, 0.20851441405707477)>
        fsdp.forward (%x: tensor<4x23xf32>) -> tensor<4x12xf32> {
          %w = fsdp.get_param @weight : tensor<12x23xf32>
          %b = fsdp.get_param @bias : tensor<12xf32>
          %y = nn.linear %x, %w, %b : (tensor<4x23xf32>, tensor<12x23xf32>, tensor<12xf32>) -> tensor<4x12xf32>
          fsdp.return %y : tensor<4x12xf32>
        }
      }
      fsdp.module @"3" kind "Linear" {
        fsdp.param @weight : tensor<8x12xf32> init <kaiming_uniform(2.23606797749979)>
        fsdp.param @bias : tensor<8xf32> init <uniform(-0.2886751345948129, 0.2886751345948129)>
        fsdp.forward (%x: tensor<4x12xf32>) -> tensor<4x8xf32> {
          %w = fsdp.get_param @weight : tensor<8x12xf32>
          %b = fsdp.get_param @bias : tensor<8xf32>
          %y = nn.linear %x, %w, %b : (tensor<4x12xf32>, tensor<8x12xf32>, tensor<8xf32>) -> tensor<4x8xf32>
          fsdp.return %y : tensor<4x8xf32>
        }
      }
      fsdp.forward (%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
        %0 = fsdp.call @"0"(%x) : (tensor<4x8xf32>) -> tensor<4x12xf32>
        %1 = fsdp.call @"1"(%0) : (tensor<4x12xf32>) -> tensor<4x23xf32>
        %2 = fsdp.call @"2"(%1) : (tensor<4x23xf32>) -> tensor<4x12xf32>
        %3 = fsdp.call @"3"(%2) : (tensor<4x12xf32>) -> tensor<4x8xf32>
        fsdp.return %3 : tensor<4x8xf32>
      }
    }
    fsdp.forward (%x: tensor<4x8xf32>) -> tensor<f32> {
      %y = fsdp.call @module(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
