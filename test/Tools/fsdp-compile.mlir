// fsdp-compile makes a step library of a model in one command (any
// fsdp-opt pass flag first) or of a lowered module, exporting the step, the
// program description and the ABI stamp; fsdprt-run trains it.
// RUN: fsdp-compile %examples/mlp.mlir -o %t.so \
// RUN:   --fsdp-pipeline="world-size=1 optimizer=sgd lower=true"
// RUN: llvm-nm -D --defined-only %t.so | FileCheck %s --check-prefix=SYMBOLS
// RUN: fsdprt-run %t.so --steps 2 --metrics %t.jsonl --quiet
// RUN: FileCheck %s --check-prefix=METRICS < %t.jsonl
// RUN: fsdp-opt %examples/mlp.mlir -o %t.mlir \
// RUN:   --fsdp-pipeline="world-size=1 optimizer=sgd lower=true"
// RUN: fsdp-compile %t.mlir -O2 -o %t.O2.so
// RUN: llvm-nm -D --defined-only %t.O2.so | FileCheck %s --check-prefix=SYMBOLS
// RUN: fsdp-compile --help | FileCheck %s --check-prefix=HELP

// SYMBOLS-DAG: R fsdp_abi_stamp
// SYMBOLS-DAG: R fsdp_program
// SYMBOLS-DAG: T mlp_train_step

// METRICS: {"step":1,"loss":
// METRICS-NEXT: {"step":2,"loss":
// METRICS-NOT: "step":3

// --help: this tool's options and the pass flags, not every LLVM backend's.
// HELP-DAG: -o <file>
// HELP-DAG: --mtriple=<string>
// HELP-DAG: --linker=<string>
// HELP-DAG: --fsdp-pipeline
// HELP-DAG: --convert-rt-to-llvm
// HELP-NOT: amdgpu
