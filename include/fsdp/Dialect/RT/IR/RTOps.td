//===- RTOps.td - the rt dialect: the runtime's C ABI as ops -*- tablegen -*-===//

#ifndef FSDP_DIALECT_RT_IR_RTOPS_TD
#define FSDP_DIALECT_RT_IR_RTOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def RT_Dialect : Dialect {
  let name = "rt";
  let cppNamespace = "::mlir::rt";
  let summary = "The fsdp runtime's C ABI (fsdprt_*) as operations";
  let description = [{
    What `convert-fsdp-to-rt` produces and `convert-rt-to-llvm` turns into
    calls: one op per entry point of `runtime/include/fsdp/rt/fsdprt.h` that
    generated code uses. Handles (context, stream, event, communicator,
    buffer) are typed values; tensors are (buffer, byte offset) pairs whose
    offsets come from the compiler's static memory plan. Every runtime call
    returns a status; the LLVM lowering returns the first failing status from
    the step, and the runner reports `fsdprt_last_error()`.

    Buffer and event management, stream synchronisation and constants have
    their own ops; kernels, collectives and optimizer steps go through
    `rt.call`, whose callee and operand kinds are checked against the C
    declarations (`RTEntryPoints.def`).
  }];
  let useDefaultTypePrinterParser = 1;
  // On the lowered step: each argument's name in the step ABI
  // (the runtime's StepAbi.def) and the arena the memory plan needs.
  let discardableAttrs = (ins
    "::mlir::StringAttr":$name,
    "::mlir::IntegerAttr":$arena_bytes,
    "::mlir::IntegerAttr":$persistent_bytes,
    "::mlir::IntegerAttr":$host_bytes
  );
}

class RT_Type<string name, string typeMnemonic, string doc>
    : TypeDef<RT_Dialect, name> {
  let mnemonic = typeMnemonic;
  let summary = doc;
}
def RT_Context : RT_Type<"Context", "context", "a runtime context (fsdprt_context_create)">;
def RT_Stream : RT_Type<"Stream", "stream", "a runtime stream">;
def RT_Event : RT_Type<"Event", "event", "a runtime event">;
def RT_Comm : RT_Type<"Comm", "comm", "a communicator (one mesh dimension)">;
def RT_Buffer : RT_Type<"Buffer", "buffer", "a buffer in the per-rank arena">;
def RT_Array : RT_Type<"Array", "array",
    "a host array of int64 (shapes, dims, buffer lists) passed by pointer">;
def RT_String : RT_Type<"String", "string",
    "a constant C string (what a runtime error names) passed by pointer">;

def RT_Handle : AnyTypeOf<[RT_Context, RT_Stream, RT_Event, RT_Comm, RT_Buffer]>;

class RT_Op<string mnemonic, list<Trait> traits = []>
    : Op<RT_Dialect, mnemonic, traits>;

/// An op that is exactly one call of fsdprt_<entry>, its operands in the C
/// parameter order: convert-rt-to-llvm lowers them all the same way.
class RT_DirectCallOp<string mnemonic, string entry> : RT_Op<mnemonic> {
  let extraClassDeclaration = "static constexpr ::llvm::StringLiteral "
                              "kEntryPoint = \"" # entry # "\";";
}

def RT_AllocAtOp : RT_Op<"alloc_at"> {
  let summary = "place a buffer at a planned arena offset (fsdprt_buffer_alloc_at)";
  let description = [{
    Host-side: blocks while a stream-ordered free of an overlapping buffer is
    still pending, so reusing planned memory never races a stream.

    ```mlir
    %b = rt.alloc_at %ctx offset 4096 bytes 1024 : !rt.buffer
    ```
  }];
  let arguments = (ins RT_Context:$ctx, I64Attr:$offset, I64Attr:$bytes);
  let results = (outs RT_Buffer:$buffer);
  let assemblyFormat = "$ctx `offset` $offset `bytes` $bytes attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def RT_CommRankOp : RT_Op<"comm_rank"> {
  let summary = "this rank's index in a communicator's group (fsdprt_comm_rank)";
  let description = [{
    The compiled step asks its shard communicator which shard it holds,
    instead of deriving it from its global rank (the mesh layout is the
    runtime's, fsdp/rt/Mesh.h).

    ```mlir
    %s = rt.comm_rank %ctx, %shard : i64
    ```
  }];
  let arguments = (ins RT_Context:$ctx, RT_Comm:$comm);
  let results = (outs I64:$rank);
  let assemblyFormat = "$ctx `,` $comm attr-dict `:` type($rank)";
}

def RT_FreeOp : RT_DirectCallOp<"free", "buffer_free"> {
  let summary = "stream-ordered free (fsdprt_buffer_free)";
  let arguments = (ins RT_Context:$ctx, RT_Stream:$stream, RT_Buffer:$buffer);
  let assemblyFormat = "$ctx `,` $stream `,` $buffer attr-dict";
}

def RT_EventCreateOp : RT_Op<"event_create"> {
  let summary = "fsdprt_event_create";
  let arguments = (ins RT_Context:$ctx);
  let results = (outs RT_Event:$event);
  let assemblyFormat = "$ctx attr-dict `:` type($event)";
}

def RT_EventDestroyOp : RT_DirectCallOp<"event_destroy", "event_destroy"> {
  let summary = "fsdprt_event_destroy";
  let arguments = (ins RT_Context:$ctx, RT_Event:$event);
  let assemblyFormat = "$ctx `,` $event attr-dict";
}

def RT_EventRecordOp : RT_DirectCallOp<"event_record", "event_record"> {
  let summary = "capture the work enqueued on a stream (fsdprt_event_record)";
  let arguments = (ins RT_Context:$ctx, RT_Event:$event, RT_Stream:$stream);
  let assemblyFormat = "$ctx `,` $event `on` $stream attr-dict";
}

def RT_StreamWaitOp : RT_DirectCallOp<"stream_wait", "stream_wait_event"> {
  let summary = "later work on a stream waits for an event (fsdprt_stream_wait_event)";
  let arguments = (ins RT_Context:$ctx, RT_Stream:$stream, RT_Event:$event);
  let assemblyFormat = "$ctx `,` $stream `waits` $event attr-dict";
}

def RT_SynchronizeOp : RT_DirectCallOp<"synchronize", "context_synchronize"> {
  let summary = "wait for every stream (fsdprt_context_synchronize)";
  let arguments = (ins RT_Context:$ctx);
  let assemblyFormat = "$ctx attr-dict";
}

def RT_NullOp : RT_Op<"null", [Pure]> {
  let summary = "the null buffer handle (an optional operand that is absent)";
  let results = (outs RT_Buffer:$buffer);
  let assemblyFormat = "attr-dict `:` type($buffer)";
}

def RT_ArrayOp : RT_Op<"array", [Pure]> {
  let summary = "a host int64 array of values (shapes, dims, buffer handles)";
  let description = [{
    ```mlir
    %shape = rt.array %c8, %c16 : i64, i64
    ```
  }];
  let arguments = (ins Variadic<AnyTypeOf<[I64, RT_Buffer]>>:$elements);
  let results = (outs RT_Array:$array);
  let assemblyFormat = "$elements attr-dict `:` type($elements)";
}

def RT_StringOp : RT_Op<"string", [Pure]> {
  let summary = "a constant C string: the name a runtime check's error gives";
  let description = [{
    Lowered to a private global, so it lives as long as the step (a
    device's check reads it when the stream is next synchronised).

    ```mlir
    %what = rt.string "net.py:12: nn.id_range"
    ```
  }];
  let arguments = (ins StrAttr:$value);
  let results = (outs RT_String:$string);
  let assemblyFormat = "$value attr-dict";
}

def RT_CopyConstantOp : RT_Op<"copy_constant"> {
  let summary = "copy a compile-time constant into a buffer (fsdprt_copy_from_host)";
  let description = [{
    ```mlir
    rt.copy_constant dense<[0, 1, 2, 3]> : tensor<4xi64> to %buf[0] on %ctx, %stream
    ```
  }];
  let arguments = (ins RT_Context:$ctx, RT_Stream:$stream, RT_Buffer:$buffer,
                       I64Attr:$offset, ElementsAttr:$value);
  let assemblyFormat = [{
    $value `to` $buffer `[` $offset `]` `on` $ctx `,` $stream attr-dict
  }];
}

def RT_CallOp : RT_Op<"call"> {
  let summary = "call a runtime entry point fsdprt_<callee>";
  let description = [{
    Kernels, collectives, optimizer steps: `callee` names an entry of
    `RTEntryPoints.def` (the C function is `fsdprt_<callee>`), and the
    operands must match its parameters one for one (handles by type, i32,
    i64, f64, `!rt.array` for `const int64_t *`, `!rt.string` for
    `const char *`).

    ```mlir
    rt.call @linear_forward(%ctx, %s, %f32, %x, %c0, %w, %c0, %b, %c0, %y, %c0, %m, %k, %n)
        : (!rt.context, !rt.stream, i32, !rt.buffer, i64, !rt.buffer, i64, !rt.buffer, i64, !rt.buffer, i64, i64, i64, i64)
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee,
                       Variadic<AnyTypeOf<[RT_Handle, RT_Array, RT_String, I32, I64, F64]>>:$args);
  let assemblyFormat = "$callee `(` $args `)` attr-dict `:` functional-type($args, results)";
  let hasVerifier = 1;
}

#endif // FSDP_DIALECT_RT_IR_RTOPS_TD
