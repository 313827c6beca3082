// NestedWrappedModule: round trip, and the summary that PyTorch's
// size_based_auto_wrap_policy sees: 496 parameters split 36/80/272/68/40
// over the five Linears, 4 units (root, module.1, module.1.0, module.2).
// RUN: fsdp-opt %examples/nested_wrapped.mlir | fsdp-opt | FileCheck %s --check-prefix=IR
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-model-summary -o /dev/null | FileCheck %s

// IR: fsdp.model @nested_wrapped
// IR: fsdp.module @root kind "NestedWrappedModule" unit

// CHECK:      model nested_wrapped: 496 parameters (496 trainable), 1984 bytes; 0 buffer elements (0 bytes); 4 FSDP units
// The root's flat parameter holds module.0 and module.3 (36 + 40), as in
// PyTorch's test; module.1's holds module.1.1.
// CHECK-NEXT: module kind unit flat own subtree bytes buffers
// CHECK-NEXT: (root)     NestedWrappedModule yes 76   0  496 1984 0
// CHECK-NEXT: module     Sequential                 0  496 1984 0
// CHECK-NEXT: module.0   Linear                    36   36  144 0
// CHECK-NEXT: module.1   Sequential          yes 272  0  352 1408 0
// CHECK-NEXT: module.1.0 Linear              yes 80  80   80  320 0
// CHECK-NEXT: module.1.1 Linear                   272  272 1088 0
// CHECK-NEXT: module.2   Linear              yes 68  68   68  272 0
// CHECK-NEXT: module.3   Linear                    40   40  160 0
