//===- ModelSummary.cpp - print a model's module tree and sizes ------------===//

#include "fsdp/Dialect/FSDP/Analysis/UnitOwnership.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMODELSUMMARYPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Element counts and bytes of a set of tensors.
struct Size {
  int64_t elements = 0;
  int64_t bytes = 0;

  void add(RankedTensorType type) {
    elements += type.getNumElements();
    bytes += tensorBytes(type);
  }
  Size &operator+=(const Size &other) {
    elements += other.elements;
    bytes += other.bytes;
    return *this;
  }
};

/// One row of the summary.
struct ModuleRow {
  std::string name;
  std::string kind;
  bool unit = false;
  bool rankLocal = false; // unit<rank_local = true>
  bool ignored = false;   // unit<ignored = ...>: FSDP's ignored_modules
  Size ownParams, subtreeParams, subtreeTrainable, subtreeBuffers;
  /// The unit's flat parameter (unpadded), for units only.
  Size flatParams;
};

/// Appends the rows of `module`'s subtree in pre-order; returns the index
/// of `module`'s row.
size_t collectRows(NNModuleOp module, const UnitOwnership &ownership,
                   std::vector<ModuleRow> &rows) {
  size_t index = rows.size();
  ModuleRow self;
  self.name = module.isRoot() ? "(root)" : module.getQualifiedName();
  self.kind = module.getKind().str();
  self.unit = ownership.isUnit(module);
  self.rankLocal = module.isUnit() && module.getUnitAttr().getRankLocal();
  self.ignored = getIgnored(module) != IgnoredGradSync::none;
  rows.push_back(std::move(self));
  for (ParamOp param : ownership.getParams(module))
    rows[index].flatParams.add(param.getTensorType());
  Size own, trainable, buffers;
  for (Operation &op : module.getBody().front()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      own.add(param.getTensorType());
      if (param.getRequiresGrad())
        trainable.add(param.getTensorType());
    } else if (auto buffer = dyn_cast<BufferOp>(op)) {
      buffers.add(cast<RankedTensorType>(buffer.getType()));
    }
  }
  Size subtree = own;
  for (auto child : module.getBody().front().getOps<NNModuleOp>()) {
    size_t childIndex = collectRows(child, ownership, rows);
    subtree += rows[childIndex].subtreeParams;
    trainable += rows[childIndex].subtreeTrainable;
    buffers += rows[childIndex].subtreeBuffers;
  }
  ModuleRow &row = rows[index];
  row.ownParams = own;
  row.subtreeParams = subtree;
  row.subtreeTrainable = trainable;
  row.subtreeBuffers = buffers;
  return index;
}

/// The parameters FSDP ignores: those of the ignored units' flat parameters.
Size ignoredParams(ArrayRef<ModuleRow> rows) {
  Size size;
  for (const ModuleRow &row : rows)
    if (row.ignored)
      size += row.flatParams;
  return size;
}

void printText(raw_ostream &os, StringRef model,
               ArrayRef<ModuleRow> rows) {
  const ModuleRow &root = rows.front();
  // An ignored unit is FSDP's ignored module, not an FSDP instance.
  int64_t units = llvm::count_if(
      rows, [](const ModuleRow &r) { return r.unit && !r.ignored; });
  os << "model " << model << ": " << root.subtreeParams.elements
     << " parameters (" << root.subtreeTrainable.elements << " trainable), "
     << root.subtreeParams.bytes << " bytes; "
     << root.subtreeBuffers.elements << " buffer elements ("
     << root.subtreeBuffers.bytes << " bytes); " << units << " FSDP units";
  if (Size ignored = ignoredParams(rows); ignored.elements)
    os << "; " << ignored.elements << " ignored parameters (" << ignored.bytes
       << " bytes: whole on every rank, never gathered)";
  os << "\n";
  size_t nameWidth = strlen("module"), kindWidth = strlen("kind");
  for (const ModuleRow &row : rows) {
    nameWidth = std::max(nameWidth, row.name.size());
    kindWidth = std::max(kindWidth, row.kind.size());
  }
  auto line = [&](StringRef name, StringRef kind, StringRef unit,
                  const Twine &flat, const Twine &own, const Twine &subtree,
                  const Twine &bytes, const Twine &buffers) {
    os << llvm::left_justify(name, nameWidth) << "  "
       << llvm::left_justify(kind, kindWidth) << "  "
       << llvm::left_justify(unit, 5) << "  "
       << llvm::right_justify(flat.str(), 10) << "  "
       << llvm::right_justify(own.str(), 10) << "  "
       << llvm::right_justify(subtree.str(), 10) << "  "
       << llvm::right_justify(bytes.str(), 12) << "  "
       << llvm::right_justify(buffers.str(), 8) << "\n";
  };
  line("module", "kind", "unit", "flat", "own", "subtree", "bytes", "buffers");
  for (const ModuleRow &row : rows)
    line(row.name, row.kind,
         row.ignored     ? "ign"
         : row.rankLocal ? "local"
         : row.unit      ? "yes"
                         : "",
         row.unit ? Twine(row.flatParams.elements) : Twine(),
         Twine(row.ownParams.elements),
         Twine(row.subtreeParams.elements), Twine(row.subtreeParams.bytes),
         Twine(row.subtreeBuffers.elements));
}

llvm::json::Object toJson(StringRef model, ArrayRef<ModuleRow> rows) {
  llvm::json::Array modules;
  for (const ModuleRow &row : rows)
    modules.push_back(llvm::json::Object{
        {"name", row.name == "(root)" ? "" : row.name},
        {"kind", row.kind},
        {"unit", row.unit},
        {"rank_local", row.rankLocal},
        {"flat_params", row.flatParams.elements},
        {"own_params", row.ownParams.elements},
        {"own_bytes", row.ownParams.bytes},
        {"subtree_params", row.subtreeParams.elements},
        {"subtree_bytes", row.subtreeParams.bytes},
        {"trainable_params", row.subtreeTrainable.elements},
        {"buffers", row.subtreeBuffers.elements},
        {"buffer_bytes", row.subtreeBuffers.bytes}});
  const ModuleRow &root = rows.front();
  Size ignored = ignoredParams(rows);
  return llvm::json::Object{
      {"model", model},
      {"ignored_params", ignored.elements},
      {"ignored_bytes", ignored.bytes},
      {"params", root.subtreeParams.elements},
      {"trainable_params", root.subtreeTrainable.elements},
      {"param_bytes", root.subtreeParams.bytes},
      {"modules", std::move(modules)}};
}

struct ModelSummaryPass
    : public fsdp::impl::FSDPModelSummaryPassBase<ModelSummaryPass> {
  using FSDPModelSummaryPassBase::FSDPModelSummaryPassBase;

  void runOnOperation() override {
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file =
        openOutputFile(output, &error);
    if (!file) {
      mlir::emitError(getOperation().getLoc(), "fsdp-model-summary: ") << error;
      return signalPassFailure();
    }
    llvm::json::Array models;
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      std::vector<ModuleRow> rows;
      collectRows(model.getRoot(), UnitOwnership(model), rows);
      if (json)
        models.push_back(toJson(model.getSymName(), rows));
      else
        printText(file->os(), model.getSymName(), rows);
    }
    if (json)
      file->os() << llvm::formatv(
                        "{0:2}", llvm::json::Value(llvm::json::Object{
                                     {"models", std::move(models)}}))
                 << "\n";
    file->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace
