//===- ParamGroups.cpp - weight decay and lr scale per parameter ----------===//

#include "ParamGroups.h"

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

using namespace mlir;
using namespace mlir::fsdp;

static InFlightDiagnostic groupError(Location loc, StringRef spec) {
  return emitError(loc, "fsdp-build-train-step: param group '") << spec << "': ";
}

FailureOr<ParamGroups::Group> ParamGroups::parseGroup(StringRef spec,
                                                      Location loc) {
  Group group;
  group.spec = spec.str();
  SmallVector<StringRef> parts;
  spec.split(parts, ':');
  StringRef selector = parts.front().trim();
  int64_t ndim = 0;
  if (selector.consume_front("ndim<")) {
    if (selector.getAsInteger(10, ndim))
      return groupError(loc, spec) << "expected ndim<K with an integer K",
             failure();
    group.ndimBelow = ndim;
  } else if (selector.consume_front("ndim>=")) {
    if (selector.getAsInteger(10, ndim))
      return groupError(loc, spec) << "expected ndim>=K with an integer K",
             failure();
    group.ndimAtLeast = ndim;
  } else if (selector.consume_front("kind=")) {
    group.kind = selector.str();
  } else {
    auto pattern = llvm::GlobPattern::create(selector);
    if (!pattern || selector.empty()) {
      llvm::consumeError(pattern.takeError());
      return groupError(loc, spec) << "the selector is not ndim<K, ndim>=K, "
                                      "kind=CLASS or a name pattern",
             failure();
    }
    group.name = selector.str();
  }
  if (parts.size() < 2)
    return groupError(loc, spec) << "sets nothing; add :weight-decay=X or "
                                    ":lr-scale=X",
           failure();
  for (StringRef setting : llvm::drop_begin(parts)) {
    auto [key, text] = setting.split('=');
    double value = 0;
    if (text.trim().getAsDouble(value) || value < 0)
      return groupError(loc, spec) << "'" << setting
                                   << "' needs a number >= 0",
             failure();
    if (key.trim() == "weight-decay")
      group.weightDecay = value;
    else if (key.trim() == "lr-scale")
      group.lrScale = value;
    else
      return groupError(loc, spec) << "unknown setting '" << key
                                   << "' (weight-decay or lr-scale)",
             failure();
  }
  return group;
}

FailureOr<ParamGroups> ParamGroups::parse(ArrayRef<std::string> specs,
                                          bool noDecay1d, Location loc) {
  ParamGroups out;
  SmallVector<std::string> all;
  if (noDecay1d)
    all.push_back("ndim<2:weight-decay=0");
  all.append(specs.begin(), specs.end());
  for (const std::string &spec : all) {
    FailureOr<Group> group = parseGroup(spec, loc);
    if (failed(group))
      return failure();
    out.groups.push_back(std::move(*group));
  }
  return out;
}

bool ParamGroups::selects(const Group &group, ParamOp param) const {
  int64_t ndim = cast<RankedTensorType>(param.getType()).getRank();
  if (group.ndimBelow)
    return ndim < *group.ndimBelow;
  if (group.ndimAtLeast)
    return ndim >= *group.ndimAtLeast;
  if (group.kind)
    return param->getParentOfType<NNModuleOp>().getKind() == *group.kind;
  // Compiled here: a GlobPattern points into its pattern's characters.
  return cantFail(llvm::GlobPattern::create(*group.name))
      .match(qualifiedName(param));
}

GroupSettings ParamGroups::settingsOf(ParamOp param,
                                      GroupSettings defaults) const {
  for (const Group &group : groups)
    if (selects(group, param))
      return {group.lrScale.value_or(defaults.lrScale),
              group.weightDecay.value_or(defaults.weightDecay)};
  return defaults;
}
