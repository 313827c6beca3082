// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @unknown(%ctx: !rt.context, %s: !rt.stream) {
  // expected-error @+1 {{'launch_missiles' is not a runtime entry point rt.call may name}}
  rt.call @launch_missiles(%ctx, %s) : (!rt.context, !rt.stream) -> ()
  return
}

// -----

func.func @arity(%ctx: !rt.context, %s: !rt.stream) {
  // expected-error @+1 {{fsdprt_all_gather takes 9 operands, got 2}}
  rt.call @all_gather(%ctx, %s) : (!rt.context, !rt.stream) -> ()
  return
}

// -----

func.func @kind(%ctx: !rt.context, %s: !rt.stream, %b: !rt.buffer, %t: i32, %n: i64) {
  // expected-error @+1 {{operand #2 of fsdprt_all_gather must be !rt.comm, got '!rt.buffer'}}
  rt.call @all_gather(%ctx, %s, %b, %t, %b, %n, %b, %n, %n) : (!rt.context, !rt.stream, !rt.buffer, i32, !rt.buffer, i64, !rt.buffer, i64, i64) -> ()
  return
}

// -----

func.func @name_not_string(%ctx: !rt.context, %s: !rt.stream, %b: !rt.buffer, %t: i32, %n: i64) {
  // expected-error @+1 {{operand #9 of fsdprt_index_check must be !rt.string, got 'i64'}}
  rt.call @index_check(%ctx, %s, %t, %b, %n, %n, %n, %t, %n, %n) : (!rt.context, !rt.stream, i32, !rt.buffer, i64, i64, i64, i32, i64, i64) -> ()
  return
}

// -----

func.func @unaligned(%ctx: !rt.context) {
  // expected-error @+1 {{offset 100 is not a non-negative multiple of 64 bytes}}
  %b = rt.alloc_at %ctx offset 100 bytes 64 : !rt.buffer
  return
}

// -----

// A C entry point compiled steps do not call (the runner's barrier) is not
// in RTEntryPoints.def.
func.func @runner_only(%ctx: !rt.context, %s: !rt.stream, %comm: !rt.comm) {
  // expected-error @+1 {{'barrier' is not a runtime entry point rt.call may name}}
  rt.call @barrier(%ctx, %s, %comm) : (!rt.context, !rt.stream, !rt.comm) -> ()
  return
}
