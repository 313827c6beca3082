// Every rt op and type parses, verifies and prints back, in the custom and
// the generic form: the runtime's C ABI as ops, as convert-fsdp-to-rt
// emits them and convert-rt-to-llvm reads them.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

// Buffers placed in the arena, filled, copied and freed on a stream.
// CHECK-LABEL: func.func @buffers
// CHECK-SAME: (%[[CTX:.*]]: !rt.context, %[[S:.*]]: !rt.stream)
func.func @buffers(%ctx: !rt.context, %s: !rt.stream) {
  // CHECK: %[[A:.*]] = rt.alloc_at %[[CTX]] offset 0 bytes 4096 : !rt.buffer
  %a = rt.alloc_at %ctx offset 0 bytes 4096 : !rt.buffer
  // CHECK: %[[B:.*]] = rt.alloc_at %[[CTX]] offset 4096 bytes 64 : !rt.buffer
  %b = rt.alloc_at %ctx offset 4096 bytes 64 : !rt.buffer
  // CHECK: rt.copy_constant dense<[0, 1, 2, 3]> : tensor<4xi64> to %[[B]][0] on %[[CTX]], %[[S]]
  rt.copy_constant dense<[0, 1, 2, 3]> : tensor<4xi64> to %b[0] on %ctx, %s
  %f32 = arith.constant 0 : i32
  %c0 = arith.constant 0 : i64
  %n = arith.constant 1024 : i64
  %zero = arith.constant 0.0 : f64
  // CHECK: rt.call @fill(%[[CTX]], %[[S]], %{{.*}}, %[[A]], %{{.*}}, %{{.*}}, %{{.*}}) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, i64, f64) -> ()
  rt.call @fill(%ctx, %s, %f32, %a, %c0, %n, %zero) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, i64, f64) -> ()
  // CHECK: rt.call @copy(%[[CTX]], %[[S]], %[[A]], %{{.*}}, %[[B]], %{{.*}}, %{{.*}}) : (!rt.context, !rt.stream, !rt.buffer, i64, !rt.buffer, i64, i64) -> ()
  rt.call @copy(%ctx, %s, %a, %c0, %b, %c0, %n) : (!rt.context, !rt.stream, !rt.buffer, i64, !rt.buffer, i64, i64) -> ()
  // CHECK: rt.free %[[CTX]], %[[S]], %[[A]]
  rt.free %ctx, %s, %a
  // CHECK: rt.free %[[CTX]], %[[S]], %[[B]]
  rt.free %ctx, %s, %b
  return
}

// Ordering between streams: an event recorded on one, waited for on the
// other, then the host waits for every stream.
// CHECK-LABEL: func.func @ordering
func.func @ordering(%ctx: !rt.context, %compute: !rt.stream, %gather: !rt.stream) {
  // CHECK: %[[E:.*]] = rt.event_create %{{.*}} : !rt.event
  %e = rt.event_create %ctx : !rt.event
  // CHECK: rt.event_record %{{.*}}, %[[E]] on %{{.*}}
  rt.event_record %ctx, %e on %gather
  // CHECK: rt.stream_wait %{{.*}}, %{{.*}} waits %[[E]]
  rt.stream_wait %ctx, %compute waits %e
  // CHECK: rt.synchronize %{{.*}}
  rt.synchronize %ctx
  // CHECK: rt.event_destroy %{{.*}}, %[[E]]
  rt.event_destroy %ctx, %e
  return
}

// Host arrays (shapes, buffer lists), the null buffer of an absent
// optional operand, and calls with every operand kind: handles, a
// communicator, i32, i64, f64 and arrays.
// CHECK-LABEL: func.func @calls
func.func @calls(%ctx: !rt.context, %s: !rt.stream, %comm: !rt.comm, %x: !rt.buffer, %w: !rt.buffer, %y: !rt.buffer) {
  %f32 = arith.constant 0 : i32
  %add = arith.constant 0 : i32
  %rank = arith.constant 2 : i32
  %c0 = arith.constant 0 : i64
  %c8 = arith.constant 8 : i64
  %c16 = arith.constant 16 : i64
  // CHECK: %[[SHAPE:.*]] = rt.array %{{.*}}, %{{.*}} : i64, i64
  %shape = rt.array %c8, %c16 : i64, i64
  // CHECK: rt.array %{{.*}}, %{{.*}} : !rt.buffer, !rt.buffer
  %buffers = rt.array %x, %w : !rt.buffer, !rt.buffer
  // CHECK: rt.string "net.py:12: nn.id_range \22quoted\22"
  %what = rt.string "net.py:12: nn.id_range \"quoted\""
  // CHECK: %[[NULL:.*]] = rt.null : !rt.buffer
  %none = rt.null : !rt.buffer
  // CHECK: rt.call @linear_forward(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NULL]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, !rt.buffer, i64, !rt.buffer, i64, !rt.buffer, i64, i64, i64, i64) -> ()
  rt.call @linear_forward(%ctx, %s, %f32, %x, %c0, %w, %c0, %none, %c0, %y, %c0, %c8, %c16, %c16) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, !rt.buffer, i64, !rt.buffer, i64, !rt.buffer, i64, i64, i64, i64) -> ()
  // CHECK: rt.call @binary_forward(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[SHAPE]], %{{.*}}, %{{.*}}, %{{.*}}, %[[SHAPE]], %{{.*}}, %{{.*}}) : (!rt.context, !rt.stream, i32, i32, !rt.buffer, i64, i32, !rt.array, !rt.buffer, i64, i32, !rt.array, !rt.buffer, i64) -> ()
  rt.call @binary_forward(%ctx, %s, %f32, %add, %x, %c0, %rank, %shape, %w, %c0, %rank, %shape, %y, %c0) : (!rt.context, !rt.stream, i32, i32, !rt.buffer, i64, i32, !rt.array, !rt.buffer, i64, i32, !rt.array, !rt.buffer, i64) -> ()
  // CHECK: rt.call @all_gather(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!rt.context, !rt.stream, !rt.comm, i32, !rt.buffer, i64, !rt.buffer, i64, i64) -> ()
  rt.call @all_gather(%ctx, %s, %comm, %f32, %x, %c0, %y, %c0, %c8) : (!rt.context, !rt.stream, !rt.comm, i32, !rt.buffer, i64, !rt.buffer, i64, i64) -> ()
  // CHECK: %{{.*}} = rt.comm_rank %{{.*}}, %{{.*}} : i64
  %shard_index = rt.comm_rank %ctx, %comm : i64
  return
}
