// What fsdp-compile refuses, each with one diagnostic and a non-zero exit.
// RUN: not fsdp-compile %examples/mlp.mlir -o %t.so 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNLOWERED
// RUN: not fsdp-compile %s -o %t.so 2>&1 | FileCheck %s --check-prefix=ENTRY
// RUN: not fsdp-compile %S/Inputs/step-wrong-signature.mlir -o %t.so 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SIGNATURE
// RUN: fsdp-opt %examples/mlp.mlir -o %t.mlir \
// RUN:   --fsdp-pipeline="world-size=1 optimizer=sgd lower=true"
// RUN: not fsdp-compile %t.mlir --mtriple=riscv64-unknown-linux-gnu \
// RUN:   -o %t.so 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not fsdp-compile %t.mlir --linker=/nonexistent/cc -o %t.so 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LINKER
// RUN: not fsdprt-run %t.mlir 2>&1 | FileCheck %s --check-prefix=RUNNER

// UNLOWERED: error: fsdp-compile needs a lowered program, found 'fsdp.model'; compile it with fsdp-opt --fsdp-pipeline="... lower=true"
// ENTRY: fsdp-compile-invalid.mlir:[[@LINE+1]]:1: error: fsdp-compile: the step 'missing_step' is not in the module
module attributes {fsdp.program = "{\22entry\22: \22missing_step\22}"} {
  llvm.func @other() {
    llvm.return
  }
}
// SIGNATURE: step-wrong-signature.mlir:{{[0-9]+}}:{{[0-9]+}}: error: fsdp-compile: the step 'train' has type '!llvm.func<i32 (i64)>', not the step ABI's i32(15 x i64)
// TARGET: fsdp-compile: error: cannot emit code for target 'riscv64-unknown-linux-gnu'
// LINKER: fsdp-compile: error: linking '{{.*}}.so' with /nonexistent/cc failed
// RUNNER: fsdprt-run: error: '{{.*}}.mlir' is not a step library (.so): fsdprt-run runs what fsdp-compile makes
