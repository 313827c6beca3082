//===- AutoWrap.cpp - choose FSDP units as PyTorch's auto_wrap_policy -----===//
//
// Follows torch/distributed/fsdp/wrap.py: the size policy is
// size_based_auto_wrap_policy run through _recursive_wrap, module-kind is
// ModuleWrapPolicy, always is always_wrap_policy. Which unit then holds which
// parameter is UnitOwnership's business, not this pass's. Ignored units
// (FSDP's ignored_modules) and their subtrees are never wrapped, and their
// parameters do not count towards a module's size, as in _recursive_wrap.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitOwnership.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPAUTOWRAPPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

/// sum(p.numel() for p in module.parameters() if p not in ignored_params):
/// every parameter declared in the subtree outside ignored units, once;
/// reads of tied weights declare nothing.
static int64_t countSubtreeParams(NNModuleOp module) {
  int64_t count = 0;
  module.walk([&](ParamOp param) {
    if (!getIgnoredAncestor(param->getParentOfType<NNModuleOp>()))
      count += param.getTensorType().getNumElements();
  });
  return count;
}

/// The children _recursive_wrap visits: those that are not ignored.
static SmallVector<NNModuleOp> getChildren(NNModuleOp module) {
  SmallVector<NNModuleOp> children;
  for (NNModuleOp child : module.getBody().front().getOps<NNModuleOp>())
    if (getIgnored(child) == IgnoredGradSync::none)
      children.push_back(child);
  return children;
}

/// Builds a set from a list option, or from `defaults` when it is empty
/// (PyTorch's `None` means the class defaults).
static llvm::StringSet<> kindSet(ArrayRef<std::string> kinds,
                                 std::initializer_list<StringRef> defaults) {
  if (kinds.empty())
    return llvm::StringSet<>(defaults);
  return llvm::StringSet<>(llvm::from_range, kinds);
}

namespace {

/// size_based_auto_wrap_policy under _recursive_wrap.
struct SizePolicy {
  int64_t minParams;
  llvm::StringSet<> forceLeafKinds, excludeKinds;
  SmallVector<NNModuleOp> wrapped;

  /// _recursive_wrap: returns the parameters of `module`'s subtree that are
  /// now held by wrapped modules (all of them if `module` itself is wrapped).
  int64_t recursiveWrap(NNModuleOp module, bool onlyWrapChildren) {
    int64_t nonwrapped = countSubtreeParams(module);
    // policy(recurse=True) looks at the whole subtree.
    if (nonwrapped < minParams || forceLeafKinds.contains(module.getKind()))
      return 0;
    int64_t totalWrapped = 0;
    for (NNModuleOp child : getChildren(module))
      totalWrapped += recursiveWrap(child, /*onlyWrapChildren=*/false);
    // policy(recurse=False) looks at what the children left over.
    int64_t remainder = nonwrapped - totalWrapped;
    if (!onlyWrapChildren && remainder >= minParams &&
        !excludeKinds.contains(module.getKind())) {
      wrapped.push_back(module);
      return nonwrapped;
    }
    return totalWrapped;
  }
};

struct AutoWrapPass : public fsdp::impl::FSDPAutoWrapPassBase<AutoWrapPass> {
  using FSDPAutoWrapPassBase::FSDPAutoWrapPassBase;

  void runOnOperation() override {
    if (failed(checkOptions()))
      return signalPassFailure();
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(wrap(model)))
        return signalPassFailure();
  }

  LogicalResult checkOptions() {
    Location loc = getOperation().getLoc();
    if (!llvm::is_contained({"size", "module-kind", "always", "none"},
                            StringRef(policy)))
      return emitError(loc, "fsdp-auto-wrap: unknown policy '")
             << policy << "' (expected size, module-kind, always or none)";
    if (minParams < 0)
      return emitError(loc, "fsdp-auto-wrap: min-params must be >= 0, got ")
             << static_cast<int64_t>(minParams);
    if (policy == "module-kind" && kinds.empty())
      return emitError(loc, "fsdp-auto-wrap: policy=module-kind needs at "
                            "least one kind in 'kinds'");
    if (policy != "module-kind" && !kinds.empty())
      return emitError(loc, "fsdp-auto-wrap: 'kinds' (fsdp-pipeline's "
                            "wrap-kinds) is used only by policy=module-kind, "
                            "got policy=")
             << policy;
    return success();
  }

  LogicalResult wrap(ModelOp model) {
    NNModuleOp root = model.getRoot();
    SmallVector<NNModuleOp> modules;
    root.walk<WalkOrder::PreOrder>([&](NNModuleOp module) {
      if (getIgnored(module) != IgnoredGradSync::none)
        return WalkResult::skip(); // FSDP wraps nothing in ignored modules
      if (module != root)
        modules.push_back(module);
      return WalkResult::advance();
    });
    // _check_nested_wrapping: auto-wrapping a tree that already holds FSDP
    // instances is a ValueError. Diagnostics name the model's location only:
    // attached to the op, they would print the whole model.
    if (policy != "none")
      for (NNModuleOp module : modules)
        if (module.isUnit())
          return emitError(model.getLoc(), "fsdp-auto-wrap: module '")
                 << module.getQualifiedName()
                 << "' is already an FSDP unit; policy=" << policy
                 << " cannot wrap a wrapped model (use policy=none to keep "
                    "the units marked in the IR)";

    // The root is the outer FullyShardedDataParallel; a
    // reshard_after_forward set on it by hand is kept.
    auto unit =
        fsdp::UnitAttr::get(&getContext(), /*reshard_after_forward=*/{},
                            /*rank_local=*/false, /*param_dtype=*/{},
                            /*reduce_dtype=*/{}, /*output_dtype=*/{},
                            /*cast_forward_inputs=*/{},
                            /*ignored=*/IgnoredGradSync::none,
                            /*activation_checkpointing=*/CheckpointPolicy::none,
                            /*forward_prefetch=*/{}, /*backward_prefetch=*/{});
    if (!root.isUnit())
      root.setUnitAttr(unit);

    SmallVector<NNModuleOp> toWrap;
    if (policy == "always") {
      toWrap = modules;
    } else if (policy == "module-kind") {
      llvm::StringSet<> wanted(llvm::from_range, kinds);
      llvm::StringSet<> seen;
      root.walk([&](NNModuleOp module) { seen.insert(module.getKind()); });
      for (const std::string &kind : kinds)
        if (!seen.contains(kind))
          emitWarning(model.getLoc(), "fsdp-auto-wrap: no module of kind '")
              << kind << "' in the model";
      llvm::copy_if(modules, std::back_inserter(toWrap),
                    [&](NNModuleOp m) { return wanted.contains(m.getKind()); });
    } else if (policy == "size") {
      SizePolicy size{minParams,
                      kindSet(forceLeafKinds, {"MultiheadAttention"}),
                      kindSet(excludeKinds, {"ModuleList", "ModuleDict"}),
                      {}};
      size.recursiveWrap(root, /*onlyWrapChildren=*/true);
      toWrap = std::move(size.wrapped);
    }
    for (NNModuleOp module : toWrap)
      module.setUnitAttr(unit);
    return success();
  }
};

} // namespace
