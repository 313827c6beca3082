//===- FSDPAttrs.cpp - fsdp attributes: init, unit, mesh -------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/IR/FSDPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.cpp.inc"

void FSDPDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

unsigned InitAttr::getArity(InitKind kind) {
  switch (kind) {
  case InitKind::zeros:
  case InitKind::ones:
    return 0;
  case InitKind::constant:
  case InitKind::xavier_uniform:
  case InitKind::xavier_normal:
  case InitKind::kaiming_uniform:
  case InitKind::kaiming_normal:
    return 1;
  case InitKind::normal:
  case InitKind::uniform:
    return 2;
  case InitKind::trunc_normal:
    return 4;
  }
  llvm_unreachable("unknown InitKind");
}

bool InitAttr::needsFans() const {
  switch (getKind()) {
  case InitKind::xavier_uniform:
  case InitKind::xavier_normal:
  case InitKind::kaiming_uniform:
  case InitKind::kaiming_normal:
    return true;
  default:
    return false;
  }
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, DenseF64ArrayAttr argsAttr) {
  if (!argsAttr)
    return emitError() << "initializer needs an argument list";
  ArrayRef<double> args = argsAttr.asArrayRef();
  StringRef name = stringifyInitKind(kind);
  if (args.size() != getArity(kind))
    return emitError() << "initializer '" << name << "' takes "
                       << getArity(kind) << " argument(s), got " << args.size();
  switch (kind) {
  case InitKind::normal:
  case InitKind::trunc_normal:
    if (!(args[1] > 0.0))
      return emitError() << "initializer '" << name
                         << "' needs a positive std, got " << args[1];
    if (kind == InitKind::trunc_normal && !(args[2] < args[3]))
      return emitError() << "initializer 'trunc_normal' needs a < b, got ["
                         << args[2] << ", " << args[3] << "]";
    break;
  case InitKind::uniform:
    if (!(args[0] < args[1]))
      return emitError() << "initializer 'uniform' needs a < b, got ["
                         << args[0] << ", " << args[1] << "]";
    break;
  case InitKind::xavier_uniform:
  case InitKind::xavier_normal:
    if (!(args[0] > 0.0))
      return emitError() << "initializer '" << name
                         << "' needs a positive gain, got " << args[0];
    break;
  default:
    break;
  }
  for (double arg : args)
    if (!std::isfinite(arg))
      return emitError() << "initializer '" << name
                         << "' has a non-finite argument";
  return success();
}

Attribute InitAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc, "unknown initializer '")
        << keyword
        << "'; expected zeros, ones, constant, normal, uniform, trunc_normal, "
           "xavier_uniform, xavier_normal, kaiming_uniform or kaiming_normal";
    return {};
  }
  SmallVector<double> args;
  if (succeeded(parser.parseOptionalLParen())) {
    auto parseArg = [&]() -> ParseResult {
      return parser.parseFloat(args.emplace_back());
    };
    if (parser.parseCommaSeparatedList(parseArg) || parser.parseRParen())
      return {};
  }
  if (parser.parseGreater())
    return {};
  return InitAttr::getChecked([&] { return parser.emitError(loc); },
                              parser.getContext(), *kind,
                              DenseF64ArrayAttr::get(parser.getContext(), args));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyInitKind(getKind());
  if (!getArgs().empty()) {
    printer << '(';
    llvm::interleaveComma(getArgs().asArrayRef(), printer, [&](double arg) {
      printer.printFloat(llvm::APFloat(arg));
    });
    printer << ')';
  }
  printer << '>';
}

//===----------------------------------------------------------------------===//
// UnitAttr
//===----------------------------------------------------------------------===//

namespace {
/// The settings of `#fsdp.unit<...>` as the parser collects them.
struct UnitFields {
  Attribute reshard; // BoolAttr or an i64 IntegerAttr
  bool rankLocal = false;
  TypeAttr paramDtype, reduceDtype, outputDtype;
  BoolAttr castForwardInputs;
  IgnoredGradSync ignored = IgnoredGradSync::none;
  CheckpointPolicy activationCheckpointing = CheckpointPolicy::none;
  ArrayAttr forwardPrefetch, backwardPrefetch; // unit names
};
} // namespace

/// The mixed-precision dtype field `key` of `fields`, null for another key.
static TypeAttr *dtypeField(UnitFields &fields, StringRef key) {
  return llvm::StringSwitch<TypeAttr *>(key)
      .Case("param_dtype", &fields.paramDtype)
      .Case("reduce_dtype", &fields.reduceDtype)
      .Case("output_dtype", &fields.outputDtype)
      .Default(nullptr);
}

Attribute fsdp::UnitAttr::parse(AsmParser &parser, Type) {
  SMLoc start = parser.getCurrentLocation();
  UnitFields fields;
  if (succeeded(parser.parseOptionalLess())) {
    do {
      SMLoc loc = parser.getCurrentLocation();
      StringRef key, value;
      if (parser.parseKeyword(&key) || parser.parseEqual())
        return {};
      if (TypeAttr *dtype = dtypeField(fields, key)) {
        Type type;
        if (parser.parseType(type))
          return {};
        *dtype = TypeAttr::get(type);
        continue;
      }
      if (key == "reshard_after_forward") { // true, false or an integer N
        SMLoc valueLoc = parser.getCurrentLocation();
        if (succeeded(parser.parseOptionalKeyword(&value))) {
          if (value != "true" && value != "false") {
            parser.emitError(valueLoc, "expected true, false or an integer, "
                                       "got '")
                << value << "'";
            return {};
          }
          fields.reshard = BoolAttr::get(parser.getContext(), value == "true");
          continue;
        }
        int64_t ways;
        if (parser.parseInteger(ways))
          return {};
        fields.reshard = parser.getBuilder().getI64IntegerAttr(ways);
        continue;
      }
      if (key == "ignored") {
        SMLoc valueLoc = parser.getCurrentLocation();
        if (parser.parseKeyword(&value))
          return {};
        std::optional<IgnoredGradSync> ignored = symbolizeIgnoredGradSync(value);
        if (!ignored) {
          parser.emitError(valueLoc, "expected ignored = none, local or "
                                     "all_reduce, got '")
              << value << "'";
          return {};
        }
        fields.ignored = *ignored;
        continue;
      }
      if (key == "activation_checkpointing") { // true, false or selective
        SMLoc valueLoc = parser.getCurrentLocation();
        if (parser.parseKeyword(&value))
          return {};
        std::optional<CheckpointPolicy> policy =
            llvm::StringSwitch<std::optional<CheckpointPolicy>>(value)
                .Case("true", CheckpointPolicy::unit)
                .Case("false", CheckpointPolicy::none)
                .Case("selective", CheckpointPolicy::selective)
                .Default(std::nullopt);
        if (!policy) {
          parser.emitError(valueLoc, "expected activation_checkpointing = "
                                     "true, false or selective, got '")
              << value << "'";
          return {};
        }
        fields.activationCheckpointing = *policy;
        continue;
      }
      if (key == "forward_prefetch" || key == "backward_prefetch") {
        ArrayAttr units;
        if (parser.parseAttribute(units))
          return {};
        (key == "forward_prefetch" ? fields.forwardPrefetch
                                   : fields.backwardPrefetch) = units;
        continue;
      }
      if (key != "rank_local" && key != "cast_forward_inputs") {
        parser.emitError(loc, "expected reshard_after_forward, rank_local, "
                              "param_dtype, reduce_dtype, output_dtype, "
                              "cast_forward_inputs, ignored, "
                              "activation_checkpointing, forward_prefetch or "
                              "backward_prefetch, got '")
            << key << "'";
        return {};
      }
      loc = parser.getCurrentLocation();
      if (parser.parseKeyword(&value))
        return {};
      if (value != "true" && value != "false") {
        parser.emitError(loc, "expected true or false, got '") << value << "'";
        return {};
      }
      BoolAttr flag = BoolAttr::get(parser.getContext(), value == "true");
      if (key == "rank_local")
        fields.rankLocal = flag.getValue();
      else
        fields.castForwardInputs = flag;
    } while (succeeded(parser.parseOptionalComma()));
    if (parser.parseGreater())
      return {};
  }
  return fsdp::UnitAttr::getChecked(
      [&] { return parser.emitError(start); }, parser.getContext(),
      fields.reshard, fields.rankLocal, fields.paramDtype, fields.reduceDtype,
      fields.outputDtype, fields.castForwardInputs, fields.ignored,
      fields.activationCheckpointing, fields.forwardPrefetch,
      fields.backwardPrefetch);
}

void fsdp::UnitAttr::print(AsmPrinter &printer) const {
  SmallVector<std::string> fields;
  auto flag = [&](StringRef key, bool value) {
    fields.push_back((key + " = " + (value ? "true" : "false")).str());
  };
  if (auto reshard = dyn_cast_or_null<BoolAttr>(getReshardAfterForward()))
    flag("reshard_after_forward", reshard.getValue());
  else if (auto ways =
               dyn_cast_or_null<IntegerAttr>(getReshardAfterForward()))
    fields.push_back("reshard_after_forward = " +
                     std::to_string(ways.getInt()));
  if (getRankLocal())
    flag("rank_local", true);
  for (auto [key, dtype] : {std::pair<StringRef, TypeAttr>{"param_dtype",
                                                           getParamDtype()},
                            {"reduce_dtype", getReduceDtype()},
                            {"output_dtype", getOutputDtype()}}) {
    if (!dtype)
      continue;
    std::string text;
    llvm::raw_string_ostream os(text);
    dtype.getValue().print(os);
    fields.push_back((key + " = " + text).str());
  }
  if (BoolAttr cast = getCastForwardInputs())
    flag("cast_forward_inputs", cast.getValue());
  if (getIgnored() != IgnoredGradSync::none)
    fields.push_back(("ignored = " + stringifyIgnoredGradSync(getIgnored())).str());
  if (getActivationCheckpointing() == CheckpointPolicy::unit)
    flag("activation_checkpointing", true);
  else if (getActivationCheckpointing() == CheckpointPolicy::selective)
    fields.push_back("activation_checkpointing = selective");
  for (auto [key, units] : {std::pair<StringRef, ArrayAttr>{
                                "forward_prefetch", getForwardPrefetch()},
                            {"backward_prefetch", getBackwardPrefetch()}}) {
    if (!units)
      continue;
    std::string text;
    llvm::raw_string_ostream os(text);
    units.print(os);
    fields.push_back((key + " = " + text).str());
  }
  if (!fields.empty())
    printer << '<' << llvm::join(fields, ", ") << '>';
}

LogicalResult
fsdp::UnitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       Attribute reshard, bool rankLocal, TypeAttr paramDtype,
                       TypeAttr reduceDtype, TypeAttr outputDtype,
                       BoolAttr castForwardInputs, IgnoredGradSync ignored,
                       CheckpointPolicy /*activationCheckpointing*/,
                       ArrayAttr forwardPrefetch, ArrayAttr backwardPrefetch) {
  for (auto [key, units] : {std::pair<StringRef, ArrayAttr>{
                                "forward_prefetch", forwardPrefetch},
                            {"backward_prefetch", backwardPrefetch}})
    if (units && !llvm::all_of(units, [](Attribute name) {
          auto text = dyn_cast<StringAttr>(name);
          return text && !text.getValue().empty();
        }))
      return emitError() << key << " must list unit names (non-empty "
                                   "strings), got "
                         << units;
  // (A BoolAttr is an i1 IntegerAttr.)
  if (auto ways = dyn_cast_or_null<IntegerAttr>(reshard);
      ways && !isa<BoolAttr>(ways) && ways.getInt() < 1)
    return emitError() << "reshard_after_forward = " << ways.getInt()
                       << ": the ranks to reshard to after the forward must "
                          "be >= 1";
  if (reshard && !isa<BoolAttr, IntegerAttr>(reshard))
    return emitError() << "reshard_after_forward must be a bool or an "
                          "integer, got "
                       << reshard;
  // An ignored unit's parameters are whole, never gathered and start
  // identical: nothing to reshard, no own process group, no cast.
  if (ignored != IgnoredGradSync::none &&
      (reshard || rankLocal || paramDtype || reduceDtype || outputDtype ||
       castForwardInputs || forwardPrefetch || backwardPrefetch))
    return emitError() << "an ignored unit (ignored = "
                       << stringifyIgnoredGradSync(ignored)
                       << ") takes no other setting: its parameters are "
                          "whole on every rank, never gathered nor cast, and "
                          "start identical (not rank_local)";
  for (auto [key, dtype] :
       {std::pair<StringRef, TypeAttr>{"param_dtype", paramDtype},
        {"reduce_dtype", reduceDtype},
        {"output_dtype", outputDtype}})
    if (dtype && !isa<Float32Type, BFloat16Type, Float16Type>(dtype.getValue()))
      return emitError() << "unit " << key << " must be f32, bf16 or f16, got "
                         << dtype.getValue();
  return success();
}

//===----------------------------------------------------------------------===//
// MeshAttr
//===----------------------------------------------------------------------===//

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t replicate, int64_t shard) {
  if (shard < 1)
    return emitError() << "mesh shard size must be >= 1, got " << shard;
  if (replicate < 0)
    return emitError() << "mesh replicate size must be >= 1, got "
                       << replicate;
  return success();
}

FailureOr<int64_t> MeshAttr::getGroupSize(MeshGroup group) const {
  switch (group) {
  case MeshGroup::world:
    return getWorldSize();
  case MeshGroup::shard:
    return getShard();
  case MeshGroup::replicate:
    if (getRank() == 1)
      return failure();
    return getReplicate();
  }
  llvm_unreachable("unknown MeshGroup");
}

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t replicate = 0, shard = 0;
  if (parser.parseLess())
    return {};
  if (succeeded(parser.parseOptionalKeyword("replicate"))) {
    SMLoc valueLoc = parser.getCurrentLocation();
    if (parser.parseEqual() || parser.parseInteger(replicate) ||
        parser.parseComma())
      return {};
    if (replicate < 1) {
      parser.emitError(valueLoc, "mesh replicate size must be >= 1, got ")
          << replicate;
      return {};
    }
  }
  if (parser.parseKeyword("shard") || parser.parseEqual() ||
      parser.parseInteger(shard) || parser.parseGreater())
    return {};
  return MeshAttr::getChecked([&] { return parser.emitError(loc); },
                              parser.getContext(), replicate, shard);
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << '<';
  if (getRank() == 2)
    printer << "replicate = " << getReplicate() << ", ";
  printer << "shard = " << getShard() << '>';
}
