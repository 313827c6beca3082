//===- PretrainedWeights.cpp - Loading a plain model.safetensors ----------===//
//
// `--load` of weights saved by something other than our runner: a Hugging
// Face `save_pretrained` directory (model.safetensors, or the shards its
// model.safetensors.index.json maps), either file itself, or any
// safetensors file of named tensors. Training starts at step 0 with zero
// optimizer state. Each parameter is read alone and only this rank's shard
// of it is kept, so no rank ever holds the model.
//
// Names: a parameter is found under its own name, or without its first
// component (the file of a model that our program wraps: an importer's
// loss wrapper `m.transformer.wte.weight` reading `transformer.wte.weight`,
// or a base model's checkpoint under a task head, as Hugging Face's
// base_model_prefix rule). Every parameter missing and every tensor of the
// file left unused is listed in one error, as are shape mismatches.
// 16-bit floating tensors are widened to the f32 master weights.
//
//===----------------------------------------------------------------------===//
#include "runner/CheckpointIO.h"

#include "runner/Init.h"

#include "fsdp/rt/math/Half.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace fsdp {
namespace driver {
namespace checkpoint {

namespace {

constexpr const char *kIndexFile = "model.safetensors.index.json";
constexpr const char *kSingleFile = "model.safetensors";

/// The tensors of a pretrained checkpoint: which file holds each.
class PretrainedFiles {
public:
  explicit PretrainedFiles(const std::string &path) {
    fs::path p(path);
    if (fs::is_directory(p)) {
      if (fs::exists(p / kIndexFile))
        p /= kIndexFile;
      else if (fs::exists(p / kSingleFile))
        p /= kSingleFile;
      else
        fail(path, std::string("is a directory with neither ") + kIndexFile +
                       ", " + kSingleFile + " nor rank-<r>-of-<W>.safetensors");
    }
    if (p.filename().string().size() > 5 && p.extension() == ".json")
      readIndex(p);
    else
      addFile(p.string());
  }

  const std::map<std::string, std::string> &tensors() const { return where_; }

  /// The reader of the file holding `name` (opened once, on first use).
  const Reader &reader(const std::string &name) {
    const std::string &file = where_.at(name);
    auto it = readers_.find(file);
    if (it == readers_.end())
      it = readers_.emplace(file, openReader(file)).first;
    return *it->second;
  }
  const std::string &fileOf(const std::string &name) const {
    return where_.at(name);
  }

private:
  void readIndex(const fs::path &index) {
    std::ifstream in(index);
    json j = json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object())
      fail(index.string(), "is not a safetensors index (no \"weight_map\")");
    for (const auto &[name, file] : j["weight_map"].items()) {
      if (!file.is_string())
        fail(index.string(), "maps '" + name + "' to a non-string");
      where_[name] = (index.parent_path() / file.get<std::string>()).string();
    }
    // Each shard's own header must agree with the index.
    std::set<std::string> files;
    for (const auto &entry : where_)
      files.insert(entry.second);
    for (const std::string &file : files) {
      std::unique_ptr<Reader> r = openReader(file);
      for (const auto &[name, holder] : where_)
        if (holder == file && !hasTensor(*r, name))
          fail(file, "lacks '" + name + "', which " + index.string() +
                         " places there");
      readers_.emplace(file, std::move(r));
    }
  }
  void addFile(const std::string &file) {
    std::unique_ptr<Reader> r = openReader(file);
    for (const std::string &name : r->names())
      where_[name] = file;
    readers_.emplace(file, std::move(r));
  }

  std::map<std::string, std::string> where_;
  std::map<std::string, std::unique_ptr<Reader>> readers_;
};

/// `name`, or it without its first component, if the file has it.
std::string fileName(const PretrainedFiles &files, const std::string &name) {
  if (files.tensors().count(name))
    return name;
  size_t dot = name.find('.');
  if (dot != std::string::npos && files.tensors().count(name.substr(dot + 1)))
    return name.substr(dot + 1);
  return "";
}

/// A float tensor of the file as f32.
std::vector<float> readAsF32(const Reader &r, const std::string &file,
                             const std::string &name) {
  const rt::TensorInfo &info = r.info(name);
  int64_t n = 1;
  for (int64_t d : info.shape)
    n *= d;
  std::vector<float> values(n);
  if (info.dtype == rt::DType::F32) {
    r.read(name, values.data(), n * 4);
    return values;
  }
  if (info.dtype != rt::DType::BF16 && info.dtype != rt::DType::F16)
    fail(file, "tensor '" + name + "' is " + rt::dtypeName(info.dtype) +
                   ": only F32, BF16 and F16 weights load");
  std::vector<uint16_t> half(n);
  r.read(name, half.data(), n * 2);
  bool bf16 = info.dtype == rt::DType::BF16;
  for (int64_t i = 0; i < n; ++i)
    values[i] = bf16 ? rt::bf16ToFloat(half[i]) : rt::f16ToFloat(half[i]);
  return values;
}

/// The first names, and how many more (a wrong model lists hundreds).
std::string list(const std::vector<std::string> &names) {
  constexpr size_t kShown = 8;
  std::ostringstream os;
  for (size_t i = 0; i < names.size() && i < kShown; ++i)
    os << (i ? ", " : "") << names[i];
  if (names.size() > kShown)
    os << " and " << names.size() - kShown << " more";
  return os.str();
}

} // namespace

bool isPretrained(const std::string &path) {
  fs::path p(path);
  if (fs::is_directory(p))
    return fs::exists(p / kIndexFile) || fs::exists(p / kSingleFile);
  if (p.extension() == ".json")
    return true;
  std::unique_ptr<Reader> r = openReader(path);
  auto format = r->metadata().find("format");
  return format == r->metadata().end() ||
         (format->second != kFullFormat && format->second != kShardedFormat);
}

LoadResult loadPretrained(const std::string &path, const Program &program,
                          int rank, std::vector<uint8_t> &image) {
  PretrainedFiles files(path);
  std::vector<std::string> missing, mismatched;
  std::set<std::string> used;
  for (const UnitInfo &u : program.units) {
    int64_t begin = shardBegin(program, u, rank);
    for (const ParamInfo &p : u.params) {
      std::string name = fileName(files, p.name);
      if (name.empty()) {
        missing.push_back(p.name);
        continue;
      }
      used.insert(name);
      const rt::TensorInfo &info = files.reader(name).info(name);
      std::vector<int64_t> got(info.shape.begin(), info.shape.end());
      if (got != p.shape) {
        mismatched.push_back(name + " " + shapeString(got) + " (the model's " +
                             p.name + " is " + shapeString(p.shape) + ")");
        continue;
      }
      if (!missing.empty() || !mismatched.empty())
        continue; // only checking names now: the load fails anyway
      std::vector<float> v =
          readAsF32(files.reader(name), files.fileOf(name), name);
      scatterParam(v.data(), p, begin, u.shardNumel, image.data() + u.offset);
    }
  }
  // Persistent buffers (running statistics), in the model's dtype.
  for (const BufferInfo &b : program.buffers) {
    std::string name = fileName(files, b.name);
    if (name.empty()) {
      missing.push_back(b.name);
      continue;
    }
    used.insert(name);
    const Reader &r = files.reader(name);
    const rt::TensorInfo &info = r.info(name);
    std::vector<int64_t> got(info.shape.begin(), info.shape.end());
    if (got != b.shape || info.dtype != dtypeOf(b.dtype))
      mismatched.push_back(name + " " + rt::dtypeName(info.dtype) + " " +
                           shapeString(got) + " (the model's buffer " +
                           b.name + " is " + b.dtype + " " +
                           shapeString(b.shape) + ")");
    else if (missing.empty())
      r.read(name, image.data() + b.offset, info.end - info.begin);
  }
  std::vector<std::string> unexpected;
  for (const auto &entry : files.tensors())
    if (!used.count(entry.first))
      unexpected.push_back(entry.first);
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::string why = "does not hold model '" + program.model + "':";
    if (!missing.empty())
      why += " missing " + list(missing) + ";";
    if (!unexpected.empty())
      why += " unexpected " + list(unexpected) + ";";
    if (!mismatched.empty())
      why += " other shapes " + list(mismatched) + ";";
    why.pop_back();
    fail(path, why);
  }
  LoadResult res;
  res.format = "pretrained";
  res.stepCount = 0;
  res.optimizerStateLoaded = !programHasState(program);
  return res;
}

} // namespace checkpoint
} // namespace driver
} // namespace fsdp
