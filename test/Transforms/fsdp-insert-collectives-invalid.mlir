// fsdp-insert-collectives' errors for reshard_after_forward = N, naming the
// unit: N must divide the shard group (FSDP2: "a factor of" it), and a step
// reshards to one group size (the runner makes one set of groups).
// RUN: sed -e 's/fsdp.module @"2" kind "Linear" unit {/fsdp.module @"2" kind "Linear" unit<reshard_after_forward = 3> {/' %examples/nested_wrapped.mlir | not fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4" --fsdp-insert-collectives 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: sed -e 's/fsdp.module @"2" kind "Linear" unit {/fsdp.module @"2" kind "Linear" unit<reshard_after_forward = 3> {/' %examples/nested_wrapped.mlir | not fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" --fsdp-insert-collectives 2>&1 | FileCheck %s --check-prefix=HYBRID
// RUN: sed -e 's/fsdp.module @"2" kind "Linear" unit {/fsdp.module @"2" kind "Linear" unit<reshard_after_forward = 2> {/' -e 's/fsdp.module @"0" kind "Linear" unit {/fsdp.module @"0" kind "Linear" unit<reshard_after_forward = 4> {/' %examples/nested_wrapped.mlir | not fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=8" --fsdp-insert-collectives 2>&1 | FileCheck %s --check-prefix=TWO

// DIVIDE: <stdin>:54:7: error: 'fsdp.module' op unit 'module.2': reshard_after_forward = 3 must divide the shard group's 4 ranks
// HYBRID: error: 'fsdp.module' op unit 'module.2': reshard_after_forward = 3 must divide the shard group's 2 ranks
// TWO: error: 'fsdp.module' op unit 'module.2': reshard_after_forward = 2 differs from unit 'module.1.0''s 4; a step reshards to one group size
