//===- ParamGroups.cpp - hyper-parameters per parameter -------------------===//

#include "ParamGroups.h"

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

using namespace mlir;
using namespace mlir::fsdp;

static InFlightDiagnostic groupError(Location loc, StringRef spec) {
  return emitError(loc, "fsdp-build-train-step: param group '") << spec << "': ";
}

FailureOr<ParamGroups::Group>
ParamGroups::parseGroup(StringRef spec, ArrayRef<StringRef> optimizerSettings,
                        StringRef optimizer, Location loc) {
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
    auto [rawKey, text] = setting.split('=');
    StringRef key = rawKey.trim();
    if (key != "weight-decay" && key != "lr-scale" &&
        !llvm::is_contained(optimizerSettings, key)) {
      InFlightDiagnostic diag = groupError(loc, spec);
      diag << "unknown setting '" << key << "' (weight-decay, lr-scale";
      for (StringRef name : optimizerSettings)
        diag << ", " << name;
      return diag << " for " << optimizer << ")", failure();
    }
    double value = 0;
    if (text.trim().getAsDouble(value) || value < 0)
      return groupError(loc, spec) << "'" << setting
                                   << "' needs a number >= 0",
             failure();
    if ((key == "beta1" || key == "beta2") && value >= 1)
      return groupError(loc, spec) << "'" << setting
                                   << "' needs a number in [0, 1)",
             failure();
    group.settings[key] = value;
  }
  return group;
}

FailureOr<ParamGroups>
ParamGroups::parse(ArrayRef<std::string> specs, bool noDecay1d,
                   ArrayRef<StringRef> optimizerSettings, StringRef optimizer,
                   Location loc) {
  ParamGroups out;
  SmallVector<std::string> all;
  if (noDecay1d)
    all.push_back("ndim<2:weight-decay=0");
  all.append(specs.begin(), specs.end());
  for (const std::string &spec : all) {
    FailureOr<Group> group =
        parseGroup(spec, optimizerSettings, optimizer, loc);
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
  for (const Group &group : groups) {
    if (!selects(group, param))
      continue;
    GroupSettings out = defaults;
    std::pair<StringRef, double *> fields[] = {
        {"lr-scale", &out.lrScale}, {"weight-decay", &out.weightDecay},
        {"beta1", &out.beta1},      {"beta2", &out.beta2},
        {"eps", &out.eps},          {"momentum", &out.momentum},
        {"dampening", &out.dampening}};
    for (auto [key, field] : fields)
      if (auto it = group.settings.find(key); it != group.settings.end())
        *field = it->second;
    return out;
  }
  return defaults;
}

SmallVector<std::pair<StringRef, double>>
ParamGroups::groupsSetting(StringRef key) const {
  SmallVector<std::pair<StringRef, double>> out;
  for (const Group &group : groups)
    if (auto it = group.settings.find(key); it != group.settings.end())
      out.push_back({group.spec, it->second});
  return out;
}
