// The pre-launch report: per-rank peak memory with its breakdown, and every
// collective of a step.
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-report -o /dev/null | FileCheck %s --check-prefix=TINY
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives --fsdp-report -o /dev/null | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=shard-grad-op" --fsdp-insert-collectives --fsdp-report -o /dev/null | FileCheck %s --check-prefix=ZERO2
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=no-shard" --fsdp-insert-collectives --fsdp-report -o /dev/null | FileCheck %s --check-prefix=DDP
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" --fsdp-insert-collectives --fsdp-report=json=true -o /dev/null | %python -c "import json,sys; s=json.load(sys.stdin)['steps'][0]; c=s['collectives']; print(s['strategy'], s['world_size'], s['shard_group_size'], len(c), sum(x['kind']=='reduce_scatter' for x in c), sum(x['kind']=='all_reduce' for x in c), sorted(s['breakdown'])); print('streams', sorted({(x['kind'], x['stream']) for x in c}))" | FileCheck %s --check-prefix=JSON
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNSHARDED
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-report="memory-gbps=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADRATE
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-report="op-overhead-us=-2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADCOST
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-report="machine=h200" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADMACHINE
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none lower=true machine=tpu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADLOWERMACHINE
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-pipeline="world-size=2" --fsdp-report="machine=h100 link-gbps=100 json=true" -o /dev/null | %python -c "import json,sys; p=json.load(sys.stdin)['steps'][0]['predicted_step']; print('h100', p['gemm_gflops'], p['gemm_gflops_16bit'], p['memory_gbps'], p['link_gbps'], p['host_link_gbps'])" | FileCheck %s --check-prefix=H100
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-pipeline="world-size=2" --fsdp-report="machine=h100" -o /dev/null | FileCheck %s --check-prefix=DEVICE
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-pipeline="world-size=2" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=HOST
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-pipeline="world-size=1" --fsdp-report="machine=h100 memory-gbps=1e12 op-overhead-us=0 json=true output=%t.f32.json" -o /dev/null
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-pipeline="world-size=1 param-dtype=bf16" --fsdp-report="machine=h100 memory-gbps=1e12 op-overhead-us=0 json=true output=%t.bf16.json" -o /dev/null
// RUN: %python -c "import json; t=[json.load(open(f))['steps'][0]['predicted_step']['compute_seconds'] for f in ('%t.f32.json', '%t.bf16.json')]; print('f32/bf16', round(t[0] / t[1], 2))" | FileCheck %s --check-prefix=HALFGEMM
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-report="memory-gbps=1e-6 link-gbps=1e-6 gemm-gflops=1e-6 link-latency-us=0 op-overhead-us=0" -o /dev/null | FileCheck %s --check-prefix=TIME
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-report="op-overhead-us=1000 link-latency-us=1000 memory-gbps=1e9 link-gbps=1e9 json=true" -o /dev/null | %python -c "import json,sys; p=json.load(sys.stdin)['steps'][0]['predicted_step']; print(round(p['seconds'], 6), round(p['compute_seconds'], 6), round(p['communication_seconds'], 6))" | FileCheck %s --check-prefix=CALLS
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 backward-prefetch=pre" --fsdp-report="json=true" -o /dev/null | %python -c "import json,sys; p=json.load(sys.stdin)['steps'][0]['predicted_step']; print(p['seconds'] >= p['compute_seconds'] > 0, p['communication_seconds'] > p['exposed_communication_seconds'] >= 0)" | FileCheck %s --check-prefix=OVERLAP
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-pipeline="world-size=4 grad-accum-steps=4 auto-wrap-policy=module-kind wrap-kinds=Block" --fsdp-report="json=true" -o /dev/null | %python -c "import json,sys; s=json.load(sys.stdin)['steps'][0]; print('reduce_scatter', sum(x['kind']=='reduce_scatter' for x in s['collectives']), 'peak', s['peak_bytes'], 'gradients', s['breakdown']['gradients'])" | FileCheck %s --check-prefix=SYNC
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-pipeline="world-size=4 grad-accum-steps=4 auto-wrap-policy=module-kind wrap-kinds=Block no-sync=true" --fsdp-report="json=true" -o /dev/null | %python -c "import json,sys; s=json.load(sys.stdin)['steps'][0]; print('reduce_scatter', sum(x['kind']=='reduce_scatter' for x in s['collectives']), 'peak', s['peak_bytes'], 'gradients', s['breakdown']['gradients'])" | FileCheck %s --check-prefix=NOSYNC

// Hand-computed for this model at 2 ranks (bytes): always live: the shard
// (2 x f32 = 8), the step count (8) and the input (16). The peak is at the
// gradient w.r.t. w (op #9): the loss (4), the broadcast cotangent (16) and
// the gradient (16, waiting to be flattened) are live; w's gathered 16 bytes
// were freed after its last use, in the forward. 8 + 16 + 20 + 24 = 68.
// TINY: peak memory per rank: 68 bytes at op #9 (nn.mul, backward, unit (root))
// TINY-NEXT: sharded parameters 8
// TINY-NEXT: optimizer state 0
// TINY-NEXT: gradients 16
// TINY-NEXT: unsharded parameters 0
// TINY-NEXT: activations for backward 0
// TINY-NEXT: transient 20
// TINY-NEXT: inputs and buffers 24
// TINY-NEXT: predicted step time:
// TINY-NEXT: collectives per step: 2, 32 bytes; all_gather forward 1; reduce_scatter backward 1
// TINY: 0 all_gather (root) forward f32 4 16 all-gather
// TINY-NEXT: 1 reduce_scatter (root) backward f32 4 16 reduce-scatter

// NestedWrappedModule at 4 ranks, as PyTorch's tests count them.
// FULL: fsdp-report: model nested_wrapped, full-shard on #fsdp.mesh<shard = 4> (4 ranks)
// Bytes: the 4 gathers move 76+80+272+68 = 496 f32 = 1984, the 3 backward
// ones 1680, the 4 reductions 1984.
// FULL: collectives per step: 11, 5648 bytes; all_gather backward 3; all_gather forward 4; reduce_scatter backward 4
// FULL: 0 all_gather (root) forward f32 76 304 all-gather
// ZERO2: collectives per step: 8, {{[0-9]+}} bytes; all_gather forward 4; reduce_scatter backward 4
// DDP: collectives per step: 4, 1984 bytes; all_reduce backward 4
// DDP-NOT: all_gather

// Hybrid 2 x 2: 7 all-gathers, and each reduction is a reduce-scatter plus
// an all-reduce.
// JSON: hybrid-shard 4 2 15 4 4 ['activations', 'gradients', 'inputs_and_buffers', 'optimizer_state', 'sharded_params', 'transient', 'unsharded_params']
// The hybrid all-reduce runs where the lowering puts it: on the reduce-scatter
// stream (the runtime has three streams, none named all-reduce).
// JSON-NEXT: streams [('all_gather', 'all-gather'), ('all_reduce', 'reduce-scatter'), ('reduce_scatter', 'reduce-scatter')]

// The predicted step time, by hand at 1 byte (or FLOP) per millisecond and
// no latency or per-call cost: the unshard moves half of 16 bytes (8 ms);
// the compute stream then runs mul 48, reduce_sum 20, the cotangent
// constant 4, broadcast 20, mul 48 and flatten 32 bytes (8 to 180 ms); the
// reduction (8 ms) ends at 188, sgd_step reads and writes 32 bytes (188 to
// 220). Compute is busy 204 ms, the communication streams 16, all of which
// the compute stream waits for.
// TIME: predicted step time: 220.0 ms = compute 204.0 ms + exposed communication 16.0 ms (communication streams busy 16.0 ms); model: 1e-06 GFLOP/s GEMM, 1e-06 GB/s memory, 1e-06 GB/s link, 0 us per ring step, 0 us per call
// Only the fixed costs (1 ms per call and per ring step): 7 kernels, the
// gather and the reduction (a call and a ring step each).
// CALLS: 0.011 0.007 0.004
// With prefetching, NestedWrappedModule's communication overlaps compute.
// OVERLAP: True True

// A machine profile that is not one is an error, not inf / NaN in the JSON.
// BADRATE: error: fsdp-report: memory-gbps must be a positive number (or -1: the machine's), got 0.000000e+00
// BADCOST: error: fsdp-report: op-overhead-us must be a non-negative number (or -1: the machine's), got -2.000000e+00
// BADMACHINE: error: fsdp-report: unknown machine 'h200' (known: ci-cpu, h100)
// BADLOWERMACHINE: error: convert-fsdp-to-rt: unknown machine 'tpu' (known: ci-cpu, h100)
// A named machine's rates, one of them replaced.
// H100: h100 50000 600000 1800 100 50
// On a GPU machine the report names what the device holds beside the arena.
// DEVICE: peak memory per rank
// DEVICE: on the device beside the arena, each counted once: a 33554432-byte GEMM workspace per stream running GEMMs (the compute stream's), and a per-call scratch reserve per stream, sized by its largest call at the first step
// HOST: peak memory per rank
// HOST-NOT: beside the arena
// HOST: predicted step time
// GEMMs priced alone (memory free, no per-call cost): bf16 operands at the
// 16-bit rate, 12x the f32 rate (the compiled step's GEMMs are all bf16).
// HALFGEMM: f32/bf16 12.0
// UNSHARDED: error: 'fsdp.model' op has no sharded train step to report on; run fsdp-shard first
fsdp.model @tiny {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <ones>
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4xf32>
      %y = nn.mul %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// Four micro-batches of the char GPT on 4 ranks (5 units). By default each
// micro-batch reduce-scatters its gradients (4 x 5) and the step holds
// gradient shards; no_sync holds the unsharded gradients summed over the
// micro-batches and reduces them once (5): 2.45 MB more at the peak.
// SYNC: reduce_scatter 20 peak 21705232 gradients 1081600
// NOSYNC: reduce_scatter 5 peak 24158992 gradients 3535360
