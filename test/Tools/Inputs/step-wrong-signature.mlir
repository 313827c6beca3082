// A step whose function does not have the step ABI's signature.
module attributes {fsdp.program = "{\22entry\22: \22train\22}"} {
  llvm.func @train(%arg0: i64) -> i32 {
    %0 = llvm.mlir.constant(0 : i32) : i32
    llvm.return %0 : i32
  }
}
