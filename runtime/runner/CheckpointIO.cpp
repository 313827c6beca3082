//===- CheckpointIO.cpp - What the two checkpoint formats share -----------===//
#include "runner/CheckpointIO.h"

#include "fsdp/rt/AdafactorLayout.h"

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

std::vector<WholeStateTensor> wholeStateTensors(const UnitInfo &unit) {
  std::vector<WholeStateTensor> tensors;
  int64_t offset = 0;
  for (const ParamInfo &p : unit.params) {
    int64_t rank = static_cast<int64_t>(p.shape.size());
    rt::AdafactorParam a =
        rt::adafactorParamOf(p.shape.data(), rank, p.flatOffset);
    if (!a.factored()) {
      tensors.push_back({stateTensorName("variance", p.name), p.shape, offset});
    } else {
      std::vector<int64_t> rows = p.shape, cols = p.shape;
      rows[rank - 1] = 1;
      cols[rank - 2] = 1;
      tensors.push_back({stateTensorName("row_var", p.name), rows, offset});
      tensors.push_back({stateTensorName("col_var", p.name), cols,
                         offset + a.batch() * a.rows});
    }
    offset += a.stateSize();
  }
  return tensors;
}

std::vector<float> wholeStateToHost(const Program &program, int64_t ctx,
                                    int64_t stream, const StateBuffers &buffers,
                                    const StateInfo &state) {
  std::vector<float> host(state.numel);
  BufferRef src = locate(program, buffers, state.offset);
  check(fsdprt_copy_to_host(ctx, stream, host.data(), src.buffer, src.offset,
                            state.numel * 4),
        "checkpoint: state '" + state.name + "'");
  check(fsdprt_stream_synchronize(ctx, stream),
        "checkpoint: state '" + state.name + "'");
  return host;
}

void readWholeState(const Reader &r, const std::string &path,
                    const UnitInfo &unit, const StateInfo &state,
                    std::vector<uint8_t> &image) {
  for (const WholeStateTensor &t : wholeStateTensors(unit)) {
    if (!hasTensor(r, t.name))
      fail(path, "has no optimizer state '" + t.name + "'");
    std::vector<float> v = readF32(r, path, t.name, t.shape, "optimizer state");
    std::copy(v.begin(), v.end(),
              reinterpret_cast<float *>(image.data() + state.offset) +
                  t.offset);
  }
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
    json params = json::array(), state = json::array(),
         wholeState = json::array();
    for (const ParamInfo &p : u.params)
      params.push_back({{"name", p.name},
                        {"shape", p.shape},
                        {"flat_offset", p.flatOffset}});
    // "state": flat tensors sharded as the parameters; "whole_state": the
    // same on every rank, saved per parameter (wholeStateTensors).
    for (const StateInfo &s : u.state)
      (s.whole ? wholeState : state).push_back(s.name);
    units.push_back({{"name", u.name},
                     {"flat_numel", u.flatNumel},
                     {"padded_numel", u.paddedNumel},
                     {"shard_numel", u.shardNumel},
                     {"rank_local", u.rankLocal},
                     {"frozen", u.frozen},
                     {"ignored", u.ignored},
                     {"params", params},
                     {"state", state},
                     {"whole_state", wholeState}});
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
