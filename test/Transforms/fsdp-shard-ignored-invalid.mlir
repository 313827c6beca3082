// Ignored units (`unit<ignored = ...>`): a bad value, another setting on the
// same unit and a unit inside an ignored one are errors naming the setting.
// RUN: split-file %s %t
// RUN: not fsdp-opt %t/value.mlir 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: not fsdp-opt %t/conflict.mlir 2>&1 | FileCheck %s --check-prefix=CONFLICT
// RUN: sed 's/@act kind "ReLU"/@act kind "ReLU" unit/' %S/fsdp-shard-ignored.mlir | not fsdp-opt --fsdp-build-train-step --fsdp-shard="world-size=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NESTED

// VALUE: value.mlir:2:47: error: custom op 'fsdp.module' expected ignored = none, local or all_reduce, got 'yes'
// CONFLICT: conflict.mlir:2:36: error: custom op 'fsdp.module' an ignored unit (ignored = all_reduce) takes no other setting: its parameters are whole on every rank, never gathered nor cast, and start identical (not rank_local)
// NESTED: error: 'fsdp.module' op is an FSDP unit inside the ignored unit 'fc2': FSDP does not wrap inside ignored modules (unmark one of them)

//--- value.mlir
fsdp.model @m {
  fsdp.module @root kind "Net" unit<ignored = yes> {
  }
}

//--- conflict.mlir
fsdp.model @m {
  fsdp.module @root kind "Net" unit<rank_local = true, ignored = all_reduce> {
  }
}
