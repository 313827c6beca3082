//===- RTDialect.cpp - the rt dialect --------------------------------------===//

#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "fsdp/rt/StepAbi.h"
#include "fsdp/rt/fsdprt.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::rt;

#include "fsdp/Dialect/RT/IR/RTDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/RT/IR/RTTypes.cpp.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/RT/IR/RTOps.cpp.inc"

void RTDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "fsdp/Dialect/RT/IR/RTTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/RT/IR/RTOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Entry points: the table, checked against the C declarations.
//===----------------------------------------------------------------------===//

namespace {
// C type of each parameter kind, to compare the table with fsdprt.h.
#define CTX int64_t
#define STREAM int64_t
#define EVENT int64_t
#define COMM int64_t
#define BUF int64_t
#define I32 int32_t
#define I64 int64_t
#define F64 double
#define ARRAY const int64_t *
#define STRING const char *
#define UNPAREN(...) __VA_ARGS__
#define RT_ENTRY(name, params)                                                 \
  static_assert(std::is_same_v<decltype(&fsdprt_##name),                      \
                               int32_t (*)(UNPAREN params)>,                   \
                "RTEntryPoints.def: fsdprt_" #name                             \
                " does not match fsdprt.h");
#include "fsdp/Dialect/RT/IR/RTEntryPoints.def"
#undef RT_ENTRY

// The dedicated ops' entry points whose C signature their lowering assumes.
static_assert(std::is_same_v<decltype(&fsdprt_comm_rank),
                             int32_t (*)(int64_t, int64_t, int32_t *)>,
              "rt.comm_rank's lowering does not match fsdprt_comm_rank");

// The step: int32_t(*)(kinds of StepAbi.def...) must be fsdprt_step_fn.
template <typename Leading, typename... Params> struct StepFnOf {
  using type = int32_t (*)(Params...);
};
static_assert(std::is_same_v<fsdprt_step_fn, StepFnOf<void
#define FSDPRT_STEP_ARG(name, kind) , kind
#include "fsdp/rt/StepAbi.def"
                                                      >::type>,
              "StepAbi.def does not match fsdprt_step_fn in StepAbi.h");
#undef CTX
#undef STREAM
#undef EVENT
#undef COMM
#undef BUF
#undef I32
#undef I64
#undef F64
#undef ARRAY
#undef STRING

const llvm::StringMap<llvm::SmallVector<ParamKind>> &entryPoints() {
  static const auto *table = [] {
    auto *map = new llvm::StringMap<llvm::SmallVector<ParamKind>>();
    constexpr ParamKind CTX = ParamKind::Ctx, STREAM = ParamKind::Stream,
                        EVENT = ParamKind::Event, COMM = ParamKind::Comm,
                        BUF = ParamKind::Buf, I32 = ParamKind::I32,
                        I64 = ParamKind::I64, F64 = ParamKind::F64,
                        ARRAY = ParamKind::Array, STRING = ParamKind::String;
    (void)EVENT;
#define RT_ENTRY(name, params)                                                 \
  (*map)[#name] = llvm::SmallVector<ParamKind>{UNPAREN params};
#include "fsdp/Dialect/RT/IR/RTEntryPoints.def"
#undef RT_ENTRY
    return map;
  }();
  return *table;
}
} // namespace

const llvm::SmallVector<ParamKind> *rt::lookupEntryPoint(StringRef name) {
  auto it = entryPoints().find(name);
  return it == entryPoints().end() ? nullptr : &it->second;
}

ArrayRef<StringLiteral> rt::stepArgNames() {
  static constexpr StringLiteral names[] = {
#define FSDPRT_STEP_ARG(name, kind) #name,
#include "fsdp/rt/StepAbi.def"
  };
  return names;
}

SmallVector<Type> rt::stepArgTypes(MLIRContext *context) {
  Type CTX = ContextType::get(context), BUF = BufferType::get(context),
       STREAM = StreamType::get(context), COMM = CommType::get(context),
       I64 = IntegerType::get(context, 64);
  return {
#define FSDPRT_STEP_ARG(name, kind) kind,
#include "fsdp/rt/StepAbi.def"
  };
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult AllocAtOp::verify() {
  if (getOffset() < 0 || getOffset() % FSDPRT_ARENA_ALIGNMENT != 0)
    return emitOpError("offset ")
           << getOffset() << " is not a non-negative multiple of "
           << FSDPRT_ARENA_ALIGNMENT << " bytes";
  if (getBytes() < 0)
    return emitOpError("size ") << getBytes() << " is negative";
  return success();
}

static bool matches(ParamKind kind, Type type) {
  switch (kind) {
  case ParamKind::Ctx:
    return isa<ContextType>(type);
  case ParamKind::Stream:
    return isa<StreamType>(type);
  case ParamKind::Event:
    return isa<EventType>(type);
  case ParamKind::Comm:
    return isa<CommType>(type);
  case ParamKind::Buf:
    return isa<BufferType>(type);
  case ParamKind::I32:
    return type.isInteger(32);
  case ParamKind::I64:
    return type.isInteger(64);
  case ParamKind::F64:
    return type.isF64();
  case ParamKind::Array:
    return isa<ArrayType>(type);
  case ParamKind::String:
    return isa<StringType>(type);
  }
  llvm_unreachable("unknown parameter kind");
}

static StringRef kindName(ParamKind kind) {
  static const char *names[] = {
      "!rt.context", "!rt.stream", "!rt.event", "!rt.comm",  "!rt.buffer",
      "i32",         "i64",        "f64",       "!rt.array", "!rt.string"};
  return names[size_t(kind)];
}

LogicalResult CallOp::verify() {
  const auto *params = lookupEntryPoint(getCallee());
  if (!params)
    return emitOpError("'") << getCallee()
                            << "' is not a runtime entry point rt.call may name";
  if (getArgs().size() != params->size())
    return emitOpError("fsdprt_")
           << getCallee() << " takes " << params->size() << " operands, got "
           << getArgs().size();
  for (auto [i, kind, arg] : llvm::enumerate(*params, getArgs()))
    if (!matches(kind, arg.getType()))
      return emitOpError("operand #")
             << i << " of fsdprt_" << getCallee() << " must be "
             << kindName(kind) << ", got " << arg.getType();
  return success();
}
