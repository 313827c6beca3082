// RUN: fsdp-opt %s --convert-rt-to-llvm | FileCheck %s

// CHECK-DAG: llvm.func @fsdprt_buffer_alloc_at(i64, i64, i64, !llvm.ptr) -> i32
// CHECK-DAG: llvm.func @fsdprt_scale_forward(i64, i64, i32, i64, i64, i64, i64, i64, f64) -> i32
// CHECK-DAG: llvm.func @fsdprt_reduce_forward(i64, i64, i32, i32, i64, i64, i32, !llvm.ptr, i32, !llvm.ptr, i64, i64) -> i32
// CHECK-DAG: llvm.mlir.global private constant @step_constant_0(dense<[0, 1, 2, 3]> : tensor<4xi64>) {{.*}} : !llvm.array<4 x i64>
// CHECK-DAG: llvm.mlir.global private constant @checked_string_0("net.py:12: nn.id_range\00")
// CHECK-DAG: llvm.func @fsdprt_index_check(i64, i64, i32, i64, i64, i64, i64, i32, i64, !llvm.ptr) -> i32

// CHECK-LABEL: llvm.func @step(%arg0: i64, %arg1: i64, %arg2: i64, %arg3: i64) -> i32
// The out-parameter of alloc_at, then every call checked.
// CHECK: %[[SLOT:.*]] = llvm.alloca
// CHECK: %[[S0:.*]] = llvm.call @fsdprt_buffer_alloc_at(%arg0, %{{.*}}, %{{.*}}, %[[SLOT]])
// CHECK: %[[OK0:.*]] = llvm.icmp "eq" %[[S0]], %{{.*}} : i32
// CHECK: llvm.cond_br %[[OK0]], ^bb1, ^[[FAIL:bb[0-9]+]](%[[S0]] : i32)
// CHECK: ^bb1:
// CHECK: %[[BUF:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> i64
// CHECK: llvm.call @fsdprt_copy_from_host(%arg0, %arg2, %arg1, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64, i64, !llvm.ptr, i64) -> i32
// CHECK: llvm.call @fsdprt_scale_forward(%arg0, %arg2, %{{.*}}, %arg1, %{{.*}}, %[[BUF]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: llvm.store
// CHECK: llvm.call @fsdprt_reduce_forward(
// CHECK: llvm.call @fsdprt_buffer_free(%arg0, %arg2, %[[BUF]])
// CHECK: llvm.return %{{.*}} : i32
// CHECK: ^[[FAIL]](%[[STATUS:.*]]: i32):
// CHECK-NEXT: llvm.return %[[STATUS]] : i32
func.func @step(%ctx: !rt.context, %p: !rt.buffer, %s: !rt.stream, %n: i64) {
  %b = rt.alloc_at %ctx offset 128 bytes 64 : !rt.buffer
  rt.copy_constant dense<[0, 1, 2, 3]> : tensor<4xi64> to %p[64] on %ctx, %s
  %f32 = arith.constant 0 : i32
  %c0 = arith.constant 0 : i64
  %c4 = arith.constant 4 : i64
  %half = arith.constant 0.5 : f64
  rt.call @scale_forward(%ctx, %s, %f32, %p, %c0, %b, %c0, %c4, %half) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, !rt.buffer, i64, i64, f64) -> ()
  %shape = rt.array %c4 : i64
  %dims = rt.array %c0 : i64
  %r1 = arith.constant 1 : i32
  rt.call @reduce_forward(%ctx, %s, %f32, %f32, %b, %c0, %r1, %shape, %r1, %dims, %p, %c0) : (!rt.context, !rt.stream, i32, i32, !rt.buffer, i64, i32, !rt.array, i32, !rt.array, !rt.buffer, i64) -> ()
  rt.free %ctx, %s, %b
  return
}

// Events, waits, synchronisation and the null buffer: each op one call with
// its operands in the C order.
// CHECK-LABEL: llvm.func @schedule(%arg0: i64, %arg1: i64, %arg2: i64) -> i32
// CHECK: llvm.call @fsdprt_event_create(%arg0, %{{.*}}) : (i64, !llvm.ptr) -> i32
// CHECK: %[[E:.*]] = llvm.load
// CHECK: llvm.call @fsdprt_event_record(%arg0, %[[E]], %arg1) : (i64, i64, i64) -> i32
// CHECK: llvm.call @fsdprt_stream_wait_event(%arg0, %arg2, %[[E]]) : (i64, i64, i64) -> i32
// CHECK: %[[NULL:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK: llvm.call @fsdprt_fill(%arg0, %arg2, %{{.*}}, %[[NULL]],
// CHECK: llvm.call @fsdprt_context_synchronize(%arg0) : (i64) -> i32
// CHECK: llvm.call @fsdprt_event_destroy(%arg0, %[[E]]) : (i64, i64) -> i32
func.func @schedule(%ctx: !rt.context, %s1: !rt.stream, %s2: !rt.stream) {
  %e = rt.event_create %ctx : !rt.event
  rt.event_record %ctx, %e on %s1
  rt.stream_wait %ctx, %s2 waits %e
  %null = rt.null : !rt.buffer
  %f32 = arith.constant 0 : i32
  %c0 = arith.constant 0 : i64
  %zero = arith.constant 0.0 : f64
  rt.call @fill(%ctx, %s2, %f32, %null, %c0, %c0, %zero) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, i64, f64) -> ()
  rt.synchronize %ctx
  rt.event_destroy %ctx, %e
  return
}

// A rank in a communicator: an i32 out-parameter, checked, widened to i64.
// CHECK-LABEL: llvm.func @shard_index(%arg0: i64, %arg1: i64, %arg2: i64) -> i32
// CHECK: %[[SLOT32:.*]] = llvm.alloca %{{.*}} x i32
// CHECK: %[[S:.*]] = llvm.call @fsdprt_comm_rank(%arg0, %arg1, %[[SLOT32]]) : (i64, i64, !llvm.ptr) -> i32
// CHECK: llvm.cond_br
// CHECK: %[[R32:.*]] = llvm.load %[[SLOT32]] : !llvm.ptr -> i32
// CHECK: %[[R:.*]] = llvm.sext %[[R32]] : i32 to i64
// CHECK: llvm.call @fsdprt_fill(%arg0, %arg2, %{{.*}}, %{{.*}}, %[[R]],
func.func @shard_index(%ctx: !rt.context, %comm: !rt.comm, %s: !rt.stream) {
  %r = rt.comm_rank %ctx, %comm : i64
  %null = rt.null : !rt.buffer
  %f32 = arith.constant 0 : i32
  %c0 = arith.constant 0 : i64
  %zero = arith.constant 0.0 : f64
  rt.call @fill(%ctx, %s, %f32, %null, %r, %c0, %zero) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, i64, f64) -> ()
  return
}

// An rt.string is a private NUL-terminated global (checked_string_0, above)
// passed by its address: it lives as long as the step, so a device's check
// may name it after the call.
// CHECK-LABEL: llvm.func @checked(
// CHECK: %[[WHAT:.*]] = llvm.mlir.addressof @checked_string_0 : !llvm.ptr
// CHECK: llvm.call @fsdprt_index_check(%arg0, %arg2, %{{.*}}, %arg1, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[WHAT]])
func.func @checked(%ctx: !rt.context, %ids: !rt.buffer, %s: !rt.stream) {
  %i64 = arith.constant 4 : i32
  %c0 = arith.constant 0 : i64
  %c8 = arith.constant 8 : i64
  %c3 = arith.constant 3 : i64
  %yes = arith.constant 1 : i32
  %ignore = arith.constant -100 : i64
  %what = rt.string "net.py:12: nn.id_range"
  rt.call @index_check(%ctx, %s, %i64, %ids, %c0, %c8, %c3, %yes, %ignore, %what) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, i64, i64, i32, i64, !rt.string) -> ()
  return
}
