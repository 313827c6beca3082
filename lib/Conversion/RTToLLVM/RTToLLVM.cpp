//===- RTToLLVM.cpp - rt ops to calls of the runtime's C ABI --------------===//
//
// Rebuilds each function of rt ops as an llvm.func returning the first
// failing fsdprt status: ops are visited in order (the steps are one block)
// and every call is followed by a branch to a shared `return status` block.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_CONVERTRTTOLLVMPASS
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;

namespace {

bool isRTType(Type type) { return type.getDialect().getNamespace() == "rt"; }

class FunctionLowering {
public:
  FunctionLowering(ModuleOp module, func::FuncOp func)
      : module(module), func(func), b(func.getContext()), loc(func.getLoc()),
        i32(b.getI32Type()), i64(b.getI64Type()),
        ptr(LLVM::LLVMPointerType::get(b.getContext())) {}

  LogicalResult run();

private:
  Type convert(Type type) {
    if (isa<rt::ArrayType, rt::StringType>(type))
      return ptr;
    return isRTType(type) ? i64 : type;
  }
  Value lookup(Value v) { return mapping.lookup(v); }
  LLVM::LLVMFuncOp declare(StringRef name, TypeRange params);
  /// Calls fsdprt_<name>(args) and continues in a new block if it succeeded.
  void callChecked(StringRef name, ArrayRef<Value> args);
  Value outSlot(Type type);
  /// The address of a private constant global of `type` holding `value`,
  /// named after the function, `kind` and a counter.
  Value constantGlobal(Type type, StringRef kind, Attribute value);
  LogicalResult lowerOp(Operation &op);
  template <typename LLVMOp> LogicalResult lowerBinary(Operation *op);

  ModuleOp module;
  func::FuncOp func;
  OpBuilder b;
  Location loc;
  Type i32, i64, ptr;
  LLVM::LLVMFuncOp out;
  Block *failBlock = nullptr, *entry = nullptr;
  llvm::DenseMap<Type, Value> slots;
  IRMapping mapping;
  unsigned constants = 0;
};

LLVM::LLVMFuncOp FunctionLowering::declare(StringRef name, TypeRange params) {
  std::string symbol = ("fsdprt_" + name).str();
  if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(symbol))
    return f;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  return LLVM::LLVMFuncOp::create(
      b, loc, symbol,
      LLVM::LLVMFunctionType::get(i32, llvm::to_vector(params)));
}

void FunctionLowering::callChecked(StringRef name, ArrayRef<Value> args) {
  SmallVector<Type> types;
  for (Value a : args)
    types.push_back(a.getType());
  LLVM::LLVMFuncOp callee = declare(name, types);
  Value status = LLVM::CallOp::create(b, loc, callee, args).getResult();
  Value zero = LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(0));
  Value ok =
      LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, status, zero);
  Block *next = b.getBlock()->splitBlock(b.getInsertionPoint());
  LLVM::CondBrOp::create(b, loc, ok, next, ValueRange(), failBlock,
                         ValueRange{status});
  b.setInsertionPointToStart(next);
}

/// One out-parameter slot of `type` (i64 for handles, i32 for
/// fsdprt_comm_rank), allocated once, in the entry block.
Value FunctionLowering::outSlot(Type type) {
  Value &slot = slots[type];
  if (!slot) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    Value one = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(1));
    slot = LLVM::AllocaOp::create(b, loc, ptr, type, one);
  }
  return slot;
}

Value FunctionLowering::constantGlobal(Type type, StringRef kind,
                                       Attribute value) {
  LLVM::GlobalOp global;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    global = LLVM::GlobalOp::create(
        b, loc, type, /*isConstant=*/true, LLVM::Linkage::Private,
        (func.getSymName() + "_" + kind + "_" + Twine(constants++)).str(),
        value);
  }
  return LLVM::AddressOfOp::create(b, loc, global);
}

template <typename LLVMOp>
LogicalResult FunctionLowering::lowerBinary(Operation *op) {
  mapping.map(op->getResult(0),
              LLVMOp::create(b, loc, lookup(op->getOperand(0)),
                             lookup(op->getOperand(1))));
  return success();
}

LogicalResult FunctionLowering::lowerOp(Operation &op) {
  auto operands = [&] {
    SmallVector<Value> values;
    for (Value v : op.getOperands())
      values.push_back(lookup(v));
    return values;
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case([&](arith::ConstantOp c) -> LogicalResult {
        if (!isa<IntegerType, FloatType>(c.getType()))
          return c.emitOpError("convert-rt-to-llvm: only scalar constants");
        mapping.map(c.getResult(), LLVM::ConstantOp::create(b, loc, c.getType(),
                                                            c.getValue()));
        return success();
      })
      // Scalar integer arithmetic: the step count, the dropout keys, the
      // elements of a parameter group's segment on this rank's shard.
      .Case([&](arith::AddIOp o) { return lowerBinary<LLVM::AddOp>(o); })
      .Case([&](arith::SubIOp o) { return lowerBinary<LLVM::SubOp>(o); })
      .Case([&](arith::MulIOp o) { return lowerBinary<LLVM::MulOp>(o); })
      .Case([&](arith::MaxSIOp o) { return lowerBinary<LLVM::SMaxOp>(o); })
      .Case([&](arith::MinSIOp o) { return lowerBinary<LLVM::SMinOp>(o); })
      .Case([&](rt::NullOp n) {
        mapping.map(n.getResult(), LLVM::ConstantOp::create(
                                       b, loc, i64, b.getI64IntegerAttr(0)));
        return success();
      })
      .Case([&](rt::AllocAtOp a) {
        Value off = LLVM::ConstantOp::create(b, loc, i64, a.getOffsetAttr());
        Value bytes = LLVM::ConstantOp::create(b, loc, i64, a.getBytesAttr());
        callChecked("buffer_alloc_at",
                    {lookup(a.getCtx()), off, bytes, outSlot(i64)});
        mapping.map(a.getResult(),
                    LLVM::LoadOp::create(b, loc, i64, outSlot(i64)));
        return success();
      })
      .Case([&](rt::CommRankOp c) {
        callChecked("comm_rank",
                    {lookup(c.getCtx()), lookup(c.getComm()), outSlot(i32)});
        Value rank = LLVM::LoadOp::create(b, loc, i32, outSlot(i32));
        mapping.map(c.getResult(), LLVM::SExtOp::create(b, loc, i64, rank));
        return success();
      })
      .Case([&](rt::EventCreateOp e) {
        callChecked("event_create", {lookup(e.getCtx()), outSlot(i64)});
        mapping.map(e.getResult(),
                    LLVM::LoadOp::create(b, loc, i64, outSlot(i64)));
        return success();
      })
      .Case<rt::FreeOp, rt::EventDestroyOp, rt::EventRecordOp, rt::StreamWaitOp,
            rt::SynchronizeOp>([&](auto direct) {
        callChecked(decltype(direct)::kEntryPoint, operands());
        return success();
      })
      .Case([&](rt::ArrayOp a) {
        Value n = LLVM::ConstantOp::create(
            b, loc, i64, b.getI64IntegerAttr(a.getElements().size()));
        Value base = LLVM::AllocaOp::create(b, loc, ptr, i64, n);
        for (auto [i, element] : llvm::enumerate(a.getElements())) {
          Value at = LLVM::GEPOp::create(b, loc, ptr, i64, base,
                                         ArrayRef<LLVM::GEPArg>{int32_t(i)});
          LLVM::StoreOp::create(b, loc, lookup(element), at);
        }
        mapping.map(a.getResult(), base);
        return success();
      })
      .Case([&](rt::StringOp s) {
        // NUL-terminated: the runtime reads a C string.
        std::string text = (s.getValue() + Twine('\0')).str();
        mapping.map(
            s.getResult(),
            constantGlobal(LLVM::LLVMArrayType::get(b.getI8Type(), text.size()),
                           "string", b.getStringAttr(text)));
        return success();
      })
      .Case([&](rt::CopyConstantOp c) -> LogicalResult {
        auto value = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!value)
          return c.emitOpError("convert-rt-to-llvm: needs dense elements");
        auto flat = value.reshape(RankedTensorType::get(
            {value.getNumElements()}, value.getElementType()));
        Value address =
            constantGlobal(LLVM::LLVMArrayType::get(value.getElementType(),
                                                    value.getNumElements()),
                           "constant", flat);
        int64_t bytes =
            value.getNumElements() *
            llvm::divideCeil(value.getElementType().getIntOrFloatBitWidth(), 8);
        Value off = LLVM::ConstantOp::create(b, loc, i64, c.getOffsetAttr());
        Value size =
            LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(bytes));
        callChecked("copy_from_host",
                    {lookup(c.getCtx()), lookup(c.getStream()),
                     lookup(c.getBuffer()), off, address, size});
        return success();
      })
      .Case([&](rt::CallOp c) {
        callChecked(c.getCallee(), operands());
        return success();
      })
      .Case([&](func::ReturnOp) {
        LLVM::ReturnOp::create(
            b, loc,
            LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(0))
                .getResult());
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("convert-rt-to-llvm: cannot lower this op");
      });
}

LogicalResult FunctionLowering::run() {
  if (!func.getBody().hasOneBlock() || func.getNumResults() != 0)
    return emitError(func.getLoc(), // without printing the whole step
                     "convert-rt-to-llvm: a step must be one block without "
                     "results");
  SmallVector<Type> params;
  for (Type t : func.getArgumentTypes())
    params.push_back(convert(t));
  b.setInsertionPoint(func);
  out = LLVM::LLVMFuncOp::create(b, loc, (func.getSymName() + ".lowered").str(),
                                 LLVM::LLVMFunctionType::get(i32, params));
  entry = out.addEntryBlock(b);
  failBlock = b.createBlock(&out.getBody(), out.getBody().end(), {i32}, {loc});
  LLVM::ReturnOp::create(b, loc, failBlock->getArgument(0));
  for (auto [from, to] : llvm::zip(func.getArguments(), entry->getArguments()))
    mapping.map(from, to);
  b.setInsertionPointToEnd(entry);
  for (Operation &op : func.getBody().front())
    if (failed(lowerOp(op)))
      return failure();
  // The failure block last, for readability of the output.
  failBlock->moveBefore(&out.getBody(), out.getBody().end());
  StringRef name = func.getSymName();
  func.erase();
  out.setSymName(name);
  return success();
}

struct ConvertRTToLLVMPass
    : public fsdp::impl::ConvertRTToLLVMPassBase<ConvertRTToLLVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (llvm::any_of(func.getArgumentTypes(), isRTType))
        funcs.push_back(func);
    for (func::FuncOp func : funcs)
      if (failed(FunctionLowering(module, func).run()))
        return signalPassFailure();
  }
};

} // namespace
