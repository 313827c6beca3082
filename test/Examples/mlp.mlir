// The MLP example: round trip and summary (16*32+32 + 32*32+32 + 32*4+4).
// RUN: fsdp-opt %examples/mlp.mlir | fsdp-opt | FileCheck %s --check-prefix=IR
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-model-summary -o /dev/null | FileCheck %s

// IR: fsdp.model @mlp
// IR: nn.mse_loss

// CHECK:      model mlp: 1732 parameters (1732 trainable), 6928 bytes; 0 buffer elements (0 bytes); 1 FSDP units
// Without wrapping, the root unit holds every parameter.
// CHECK-NEXT: module kind unit flat own subtree bytes buffers
// CHECK-NEXT: (root) MLP    yes 1732 0 1732 6928 0
// CHECK-NEXT: fc1    Linear  544  544 2176 0
// CHECK-NEXT: fc2    Linear 1056 1056 4224 0
// CHECK-NEXT: fc3    Linear  132  132  528 0
