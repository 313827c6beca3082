// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @unknown(%ctx: !rt.context, %s: !rt.stream) {
  // expected-error @+1 {{'launch_missiles' is not a runtime entry point rt.call may name}}
  rt.call @launch_missiles(%ctx, %s) : (!rt.context, !rt.stream) -> ()
  return
}

// -----

func.func @arity(%ctx: !rt.context, %s: !rt.stream) {
  // expected-error @+1 {{fsdprt_barrier takes 3 operands, got 2}}
  rt.call @barrier(%ctx, %s) : (!rt.context, !rt.stream) -> ()
  return
}

// -----

func.func @kind(%ctx: !rt.context, %s: !rt.stream, %b: !rt.buffer) {
  // expected-error @+1 {{operand #2 of fsdprt_barrier must be !rt.comm, got '!rt.buffer'}}
  rt.call @barrier(%ctx, %s, %b) : (!rt.context, !rt.stream, !rt.buffer) -> ()
  return
}

// -----

func.func @unaligned(%ctx: !rt.context) {
  // expected-error @+1 {{offset 100 is not a non-negative multiple of 64 bytes}}
  %b = rt.alloc_at %ctx offset 100 bytes 64 : !rt.buffer
  return
}
