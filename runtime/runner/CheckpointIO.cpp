//===- CheckpointIO.cpp - What the two checkpoint formats share -----------===//
#include "runner/CheckpointIO.h"

#include "runner/Init.h"

#include "fsdp/rt/DType.h"
#include "fsdp/rt/Error.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <numeric>
#include <regex>
#include <set>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace checkpoint {

[[noreturn]] void fail(const std::string &path, const std::string &what) {
  throw std::runtime_error("checkpoint '" + path + "': " + what);
}

int64_t numelOf(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string unitKey(const std::string &unitName) {
  return unitName.empty() ? "_root" : unitName;
}

std::string flatParamKey(bool frozen) {
  return frozen ? "frozen_flat_param" : "flat_param";
}

std::string stateTensorName(const std::string &state,
                            const std::string &param) {
  return "optim." + state + "." + param;
}

void createDirectories(const fs::path &dir) {
  if (dir.empty())
    return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  // Several ranks may race to create it; only a missing directory is fatal.
  if (!fs::is_directory(dir))
    throw std::runtime_error("checkpoint: cannot create directory '" +
                             dir.string() + "': " + ec.message());
}

json unitsJson(const Program &program) {
  json units = json::array();
  for (const UnitInfo &u : program.units) {
    json params = json::array(), state = json::array();
    for (const ParamInfo &p : u.params)
      params.push_back({{"name", p.name},
                        {"shape", p.shape},
                        {"flat_offset", p.flatOffset}});
    for (const StateInfo &s : u.state)
      state.push_back(s.name);
    units.push_back({{"name", u.name},
                     {"flat_numel", u.flatNumel},
                     {"padded_numel", u.paddedNumel},
                     {"shard_numel", u.shardNumel},
                     {"rank_local", u.rankLocal},
                     {"frozen", u.frozen},
                     {"ignored", u.ignored},
                     {"params", params},
                     {"state", state}});
  }
  return units;
}

std::unique_ptr<Reader> openReader(const std::string &path) {
  try {
    return std::make_unique<Reader>(path);
  } catch (const std::exception &e) {
    throw std::runtime_error(std::string("checkpoint ") + e.what());
  }
}

bool hasTensor(const Reader &r, const std::string &name) {
  return std::binary_search(r.names().begin(), r.names().end(), name);
}

std::vector<float> readF32(const Reader &r, const std::string &path,
                           const std::string &name,
                           const std::vector<int64_t> &shape,
                           const std::string &what) {
  const rt::TensorInfo &info = r.info(name);
  std::vector<int64_t> got(info.shape.begin(), info.shape.end());
  if (got != shape)
    fail(path, what + " '" + name + "' has shape " + shapeString(got) +
                   ", the model expects " + shapeString(shape));
  if (info.dtype != rt::DType::F32)
    fail(path, what + " '" + name + "' is " + rt::dtypeName(info.dtype) +
                   ", expected F32");
  std::vector<float> values(numelOf(shape));
  r.read(name, values.data(), static_cast<int64_t>(values.size()) * 4);
  return values;
}

void scatterParam(const float *values, const ParamInfo &p, int64_t shardBegin,
                  int64_t shardNumel, uint8_t *shardBase) {
  int64_t lo = std::max(shardBegin, p.flatOffset);
  int64_t hi =
      std::min(shardBegin + shardNumel, p.flatOffset + numelOf(p.shape));
  if (lo < hi)
    std::memcpy(shardBase + (lo - shardBegin) * 4, values + (lo - p.flatOffset),
                (hi - lo) * 4);
}

int64_t parseCount(const Metadata &meta, const std::string &key,
                   const std::string &path) {
  auto it = meta.find(key);
  if (it == meta.end())
    fail(path, "metadata has no '" + key + "'");
  try {
    size_t used = 0;
    int64_t v = std::stoll(it->second, &used);
    if (used == it->second.size() && v >= 0)
      return v;
  } catch (const std::exception &) {
  }
  fail(path, "metadata " + key + " '" + it->second +
                 "' is not a non-negative integer");
}

LoadResult readHeader(const Reader &r, const std::string &path,
                      const std::string &format, const Program &program) {
  LoadResult res;
  res.metadata = r.metadata();
  auto get = [&](const std::string &key) {
    auto it = res.metadata.find(key);
    return it == res.metadata.end() ? std::string() : it->second;
  };
  res.format = get("format");
  if (res.format != format)
    fail(path,
         "is not an " + format + " checkpoint (format '" + res.format + "')");
  if (get("model") != program.model)
    fail(path,
         "holds model '" + get("model") + "', not '" + program.model + "'");
  res.stepCount = parseCount(res.metadata, "step_count", path);
  return res;
}

void readBuffers(const Reader &r, const std::string &path,
                 const Program &program, std::vector<uint8_t> &image) {
  for (const BufferInfo &b : program.buffers) {
    if (!hasTensor(r, b.name))
      fail(path, "has no buffer '" + b.name + "'");
    const rt::TensorInfo &info = r.info(b.name);
    std::vector<int64_t> got(info.shape.begin(), info.shape.end());
    if (got != b.shape || info.dtype != dtypeOf(b.dtype))
      fail(path, std::string("buffer '") + b.name + "' is " +
                     rt::dtypeName(info.dtype) + " " + shapeString(got) +
                     ", the model expects " + rt::dtypeName(dtypeOf(b.dtype)) +
                     " " + shapeString(b.shape));
    r.read(b.name, image.data() + b.offset, info.end - info.begin);
  }
}

bool programHasState(const Program &program) {
  for (const UnitInfo &u : program.units)
    if (!u.state.empty() && !u.params.empty())
      return true;
  return false;
}

} // namespace checkpoint
} // namespace driver
} // namespace fsdp
