//===- ModelOps.cpp - model, module, param, buffer, forward, call ----------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::fsdp;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The printable name of a module for diagnostics: its dotted path, or
/// "(root)".
static std::string describeModule(NNModuleOp module) {
  std::string name = module.getQualifiedName();
  return name.empty() ? "(root)" : name;
}

/// Resolves `ref` from the subtree of `scope` (the module whose forward
/// holds `user`). On failure, explains whether the symbol exists elsewhere in
/// the model (outside the subtree) or not at all.
static FailureOr<Operation *> resolveInSubtree(Operation *user,
                                               SymbolRefAttr ref,
                                               SymbolTableCollection &tables,
                                               StringRef what) {
  auto scope = user->getParentOfType<NNModuleOp>();
  if (!scope)
    return user->emitOpError("must be inside the forward of an fsdp.module");
  if (Operation *found = tables.lookupSymbolIn(scope, ref))
    return found;
  for (auto ancestor = scope->getParentOfType<NNModuleOp>(); ancestor;
       ancestor = ancestor->getParentOfType<NNModuleOp>()) {
    if (tables.lookupSymbolIn(ancestor, ref))
      return user->emitOpError()
             << what << " " << ref << " is outside the subtree of module '"
             << describeModule(scope) << "' (found from '"
             << describeModule(ancestor)
             << "'); read it in a common ancestor and pass it as an argument";
  }
  return user->emitOpError()
         << "unknown " << what << " " << ref << " in module '"
         << describeModule(scope) << "'";
}

/// `unit` or `unit<reshard_after_forward = ...>` after a module's kind:
/// the attribute without its `#fsdp.unit` prefix, even when it is empty.
static ParseResult parseUnitMark(OpAsmParser &parser, fsdp::UnitAttr &unit) {
  if (failed(parser.parseOptionalKeyword("unit")))
    return success();
  unit = dyn_cast_or_null<fsdp::UnitAttr>(fsdp::UnitAttr::parse(parser, {}));
  return success(unit != nullptr);
}

static void printUnitMark(OpAsmPrinter &printer, Operation *,
                          fsdp::UnitAttr unit) {
  if (!unit)
    return;
  printer << " unit";
  unit.print(printer);
}

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

NNModuleOp ModelOp::getRoot() {
  Block &body = getBody().front();
  return body.empty() ? NNModuleOp() : dyn_cast<NNModuleOp>(body.front());
}

LogicalResult ModelOp::verifyRegions() {
  Block &body = getBody().front();
  if (!llvm::hasSingleElement(body) || !isa<NNModuleOp>(body.front()))
    return emitOpError("must hold exactly one fsdp.module, the root");
  ForwardOp forward = getRoot().getForward();
  if (!forward)
    return emitOpError("root module '")
           << getRoot().getSymName() << "' needs a forward returning the loss";
  ArrayRef<Type> results = forward.getFunctionType().getResults();
  auto loss = results.empty() ? RankedTensorType()
                              : dyn_cast<RankedTensorType>(results.front());
  if (!loss || loss.getRank() != 0 || !isa<FloatType>(loss.getElementType()))
    return forward.emitOpError(
        "of the root module must return the loss (a 0-d float tensor) first");
  return success();
}

//===----------------------------------------------------------------------===//
// NNModuleOp
//===----------------------------------------------------------------------===//

ForwardOp NNModuleOp::getForward() {
  for (Operation &op : getBody().front())
    if (auto forward = dyn_cast<ForwardOp>(op))
      return forward;
  return {};
}

ForwardOp NNModuleOp::lookupForward(TypeRange inputs) {
  for (auto forward : getBody().front().getOps<ForwardOp>())
    if (TypeRange(forward.getFunctionType().getInputs()) == inputs)
      return forward;
  return {};
}

std::string NNModuleOp::getQualifiedName() {
  SmallVector<StringRef> names;
  for (NNModuleOp module = *this; module && !module.isRoot();
       module = module->getParentOfType<NNModuleOp>())
    names.push_back(module.getSymName());
  return llvm::join(llvm::reverse(names), ".");
}

LogicalResult NNModuleOp::verifyRegions() {
  SmallVector<ForwardOp> forwards;
  for (Operation &op : getBody().front()) {
    if (!isa<ParamOp, BufferOp, NNModuleOp, ForwardOp>(op))
      return op.emitOpError("is not allowed in the body of an fsdp.module; "
                            "expected fsdp.param, fsdp.buffer, fsdp.module or "
                            "fsdp.forward");
    auto next = dyn_cast<ForwardOp>(op);
    if (!next)
      continue;
    // A call picks its forward by its operand types: one forward a signature.
    ArrayRef<Type> inputs = next.getFunctionType().getInputs();
    for (ForwardOp earlier : forwards)
      if (earlier.getFunctionType().getInputs() == inputs) {
        InFlightDiagnostic diag =
            next.emitOpError("takes the input types of an earlier forward of "
                             "module '")
            << describeModule(*this)
            << "' (a call picks its forward by its operand types)";
        diag.attachNote(earlier.getLoc()) << "the earlier forward";
        return diag;
      }
    forwards.push_back(next);
  }
  if (isRoot() && forwards.size() > 1)
    return forwards[1].emitOpError("is a second forward of the root module '")
           << getSymName() << "' (the root has one forward, the train step's)";
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp / BufferOp
//===----------------------------------------------------------------------===//

/// Checks that `init` can initialize a tensor of `type`.
static LogicalResult verifyInit(Operation *op, InitAttr init,
                                RankedTensorType type) {
  if (init.needsFans() && type.getRank() < 2)
    return op->emitOpError("initializer '")
           << stringifyInitKind(init.getKind())
           << "' needs fan-in/fan-out, which a tensor of rank "
           << type.getRank() << " does not have (rank >= 2 required)";
  bool isInteger = isa<IntegerType>(type.getElementType());
  bool integerSafe = init.getKind() == InitKind::zeros ||
                     init.getKind() == InitKind::ones ||
                     init.getKind() == InitKind::constant;
  if (isInteger && !integerSafe)
    return op->emitOpError("integer tensor cannot use random initializer '")
           << stringifyInitKind(init.getKind()) << "'";
  return success();
}

LogicalResult ParamOp::verify() {
  return verifyInit(*this, getInit(), getTensorType());
}

LogicalResult BufferOp::verify() {
  return verifyInit(*this, getInit(), cast<RankedTensorType>(getType()));
}

//===----------------------------------------------------------------------===//
// ForwardOp / ReturnOp
//===----------------------------------------------------------------------===//

ParseResult ForwardOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::Argument> args;
  SmallVector<Type> resultTypes;
  if (parser.parseArgumentList(args, OpAsmParser::Delimiter::Paren,
                               /*allowType=*/true) ||
      parser.parseOptionalArrowTypeList(resultTypes) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  SmallVector<Type> argTypes;
  for (OpAsmParser::Argument &arg : args)
    argTypes.push_back(arg.type);
  result.addAttribute(
      getFunctionTypeAttrName(result.name),
      TypeAttr::get(
          FunctionType::get(parser.getContext(), argTypes, resultTypes)));
  return parser.parseRegion(*result.addRegion(), args);
}

void ForwardOp::print(OpAsmPrinter &printer) {
  printer << " (";
  if (!getBody().empty())
    llvm::interleaveComma(getBody().getArguments(), printer,
                          [&](BlockArgument arg) {
                            printer.printRegionArgument(arg);
                          });
  printer << ')';
  ArrayRef<Type> results = getFunctionType().getResults();
  if (!results.empty()) {
    printer << " -> ";
    if (results.size() == 1 && !isa<FunctionType>(results.front()))
      printer << results.front();
    else
      printer << '(' << results << ')';
  }
  printer.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                           {getFunctionTypeAttrName()});
  printer << ' ';
  printer.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

LogicalResult ForwardOp::verifyRegions() {
  if (getBody().empty())
    return emitOpError("needs a body");
  TypeRange argTypes = getBody().getArgumentTypes();
  if (argTypes != TypeRange(getFunctionType().getInputs()))
    return emitOpError("block arguments do not match the signature");
  return success();
}

LogicalResult ReturnOp::verify() {
  auto forward = (*this)->getParentOfType<ForwardOp>();
  ArrayRef<Type> expected = forward.getFunctionType().getResults();
  if (getNumOperands() != expected.size())
    return emitOpError("returns ")
           << getNumOperands() << " value(s) but the forward declares "
           << expected.size();
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(getOperandTypes(), expected)))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError("result #")
             << index << " has type " << std::get<0>(pair)
             << " but the forward declares " << std::get<1>(pair);
  std::optional<ArrayAttr> names = getNames();
  if (!names)
    return success();
  if (!forward->getParentOfType<NNModuleOp>().isRoot())
    return emitOpError("names outputs only in the root module's forward");
  if (names->size() != getNumOperands())
    return emitOpError("names ")
           << names->size() << " output(s) but returns " << getNumOperands();
  llvm::StringSet<> seen;
  for (Attribute name : *names) {
    StringRef text = cast<StringAttr>(name).getValue();
    if (text.empty() || !seen.insert(text).second)
      return emitOpError("output names must be non-empty and distinct, got '")
             << text << "' twice or empty";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CallOp
//===----------------------------------------------------------------------===//

/// Reports the first difference between `actual` and `expected` types.
static LogicalResult matchTypes(Operation *op, StringRef what,
                                TypeRange actual, ArrayRef<Type> expected,
                                StringRef callee) {
  if (actual.size() != expected.size())
    return op->emitOpError("passes ")
           << actual.size() << " " << what << "(s) but the forward of '"
           << callee << "' has " << expected.size();
  for (auto [index, pair] : llvm::enumerate(llvm::zip(actual, expected)))
    if (std::get<0>(pair) != std::get<1>(pair))
      return op->emitOpError()
             << what << " #" << index << " has type " << std::get<0>(pair)
             << " but the forward of '" << callee << "' expects "
             << std::get<1>(pair);
  return success();
}

LogicalResult CallOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<Operation *> found =
      resolveInSubtree(*this, getCallee(), tables, "module");
  if (failed(found))
    return failure();
  auto callee = dyn_cast<NNModuleOp>(*found);
  if (!callee)
    return emitOpError("callee ")
           << getCallee() << " is a '" << (*found)->getName()
           << "', not an fsdp.module";
  std::string name = describeModule(callee);
  ForwardOp forward = callee.getForward();
  if (!forward)
    return emitOpError("module '")
           << name << "' of kind '" << callee.getKind()
           << "' has no forward and cannot be called";
  // The forward taking the operands' types; with one forward, the
  // mismatch is reported against it below.
  auto forwards = callee.getBody().front().getOps<ForwardOp>();
  if (ForwardOp taking = callee.lookupForward(getOperandTypes()))
    forward = taking;
  else if (!llvm::hasSingleElement(forwards))
    return emitOpError("passes operand types (")
           << getOperandTypes() << ") that none of the "
           << llvm::range_size(forwards) << " forwards of '" << name
           << "' takes";
  FunctionType type = forward.getFunctionType();
  if (failed(matchTypes(*this, "operand", getOperandTypes(), type.getInputs(),
                        name)) ||
      failed(matchTypes(*this, "result", getResultTypes(), type.getResults(),
                        name)))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// GetParamOp / GetBufferOp / SetBufferOp
//===----------------------------------------------------------------------===//

/// Resolves a state access to a declaration of type `DeclOp` whose tensor
/// type must be `type`.
template <typename DeclOp>
static LogicalResult verifyStateAccess(Operation *op, SymbolRefAttr ref,
                                       Type type,
                                       SymbolTableCollection &tables,
                                       StringRef what, StringRef hint) {
  FailureOr<Operation *> found = resolveInSubtree(op, ref, tables, what);
  if (failed(found))
    return failure();
  auto decl = dyn_cast<DeclOp>(*found);
  if (!decl)
    return op->emitOpError()
           << ref << " is a '" << (*found)->getName() << "', not a " << what
           << hint;
  if (decl.getType() != type)
    return op->emitOpError()
           << what << " " << ref << " has type " << decl.getType()
           << ", not " << type;
  return success();
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyStateAccess<ParamOp>(*this, getParam(), getType(), tables,
                                    "parameter",
                                    " (buffers are read with fsdp.get_buffer)");
}

LogicalResult GetBufferOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyStateAccess<BufferOp>(*this, getBuffer(), getType(), tables,
                                     "buffer",
                                     " (parameters are read with fsdp.get_param)");
}

LogicalResult SetBufferOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyStateAccess<BufferOp>(*this, getBuffer(),
                                     getValue().getType(), tables, "buffer",
                                     " (parameters change only through the "
                                     "optimizer)");
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
