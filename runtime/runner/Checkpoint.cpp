//===- Checkpoint.cpp - Saving and loading training state -----------------===//
//
// Writing goes through the runtime's C ABI (fsdprt_ckpt_writer_*, which
// writes atomically, and fsdprt_all_gather). Reading uses the runtime's C++
// SafetensorsReader, the same validating parser behind fsdprt_ckpt_reader_*,
// because loading needs the whole metadata map, which the C ABI can only
// query key by key.
//
//===----------------------------------------------------------------------===//
#include "runner/Checkpoint.h"

#include "runner/Init.h"

#include "fsdp/rt/DType.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/Safetensors.h"
#include "fsdp/rt/fsdprt.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <regex>
#include <set>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char *kFullFormat = "fsdp-mlir-full";
constexpr const char *kShardedFormat = "fsdp-mlir-sharded";

[[noreturn]] void fail(const std::string &path, const std::string &what) {
  throw std::runtime_error("checkpoint '" + path + "': " + what);
}

void check(int32_t status, const std::string &what) {
  if (status != FSDPRT_OK)
    throw std::runtime_error(what + ": " + fsdprt_last_error());
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

/// The tensor of a sharded checkpoint holding a unit's flat parameter: a
/// unit may have a trainable and a frozen one.
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

/// A checkpoint writer handle that is discarded unless finished.
class Writer {
public:
  explicit Writer(const std::string &path) : path_(path) {
    check(fsdprt_ckpt_writer_create(path.c_str(), &handle_),
          "checkpoint '" + path + "'");
  }
  ~Writer() {
    if (handle_)
      fsdprt_ckpt_writer_discard(handle_);
  }
  Writer(const Writer &) = delete;
  Writer &operator=(const Writer &) = delete;

  void add(const std::string &name, const std::vector<int64_t> &shape,
           const float *data) {
    check(fsdprt_ckpt_writer_add(handle_, name.c_str(), FSDPRT_F32,
                                 static_cast<int32_t>(shape.size()),
                                 shape.data(), data),
          where(name));
  }
  /// Copies from a runtime buffer (synchronises the context first).
  void addBuffer(int64_t ctx, const std::string &name, const std::string &dtype,
                 const std::vector<int64_t> &shape, int64_t buf, int64_t off) {
    check(fsdprt_ckpt_writer_add_buffer(
              handle_, ctx, name.c_str(),
              static_cast<int32_t>(dtypeOf(dtype)),
              static_cast<int32_t>(shape.size()), shape.data(), buf, off),
          where(name));
  }
  /// The caller's keys, then ours (which win on a clash).
  void setMetadata(const Metadata &user, const Metadata &reserved) {
    for (const Metadata *m : {&user, &reserved})
      for (const auto &[key, value] : *m)
        check(fsdprt_ckpt_writer_set_metadata(handle_, key.c_str(),
                                              value.c_str()),
              where("metadata " + key));
  }
  void finish() {
    int64_t h = handle_;
    handle_ = 0;
    check(fsdprt_ckpt_writer_finish(h), "checkpoint '" + path_ + "'");
  }

private:
  std::string where(const std::string &what) const {
    return "checkpoint '" + path_ + "': " + what;
  }
  std::string path_;
  int64_t handle_ = 0;
};

/// Brings whole flat tensors (parameter or state) of replica 0's units to
/// the host: all-gathers sharded ones into one reused arena buffer, copies
/// unsharded ones directly. A shard in the host buffer (CPU offload) is
/// copied to the arena first: collectives read device memory.
class FlatGatherer {
public:
  FlatGatherer(const Program &program, int64_t ctx, int64_t stream,
               const StateBuffers &buffers, int64_t shardComm)
      : program_(program), ctx_(ctx), stream_(stream), buffers_(buffers),
        comm_(shardComm) {
    int64_t most = 0, shard = 0;
    for (const UnitInfo &u : program.units)
      if (u.shardNumel < u.paddedNumel) {
        most = std::max(most, u.paddedNumel);
        shard = std::max(shard, u.shardNumel);
      }
    if (most > 0)
      check(fsdprt_buffer_alloc(ctx, most * 4, &scratch_),
            "checkpoint: cannot allocate " + std::to_string(most * 4) +
                " bytes of arena to gather the largest unit");
    if (shard > 0 && buffers.host)
      check(fsdprt_buffer_alloc(ctx, shard * 4, &shardScratch_),
            "checkpoint: cannot allocate " + std::to_string(shard * 4) +
                " bytes of arena for the largest offloaded shard");
  }
  ~FlatGatherer() {
    fsdprt_stream_synchronize(ctx_, stream_);
    for (int64_t scratch : {scratch_, shardScratch_})
      if (scratch)
        fsdprt_buffer_free(ctx_, stream_, scratch);
  }
  FlatGatherer(const FlatGatherer &) = delete;
  FlatGatherer &operator=(const FlatGatherer &) = delete;

  /// The whole padded flat tensor whose shard is at `offset`; `toHost`
  /// false takes part in the collective only (returns nothing).
  std::vector<float> gather(const UnitInfo &unit, int64_t offset,
                            bool toHost) {
    std::vector<float> flat;
    if (unit.paddedNumel == 0)
      return flat;
    BufferRef src = locate(program_, buffers_, offset);
    if (unit.shardNumel < unit.paddedNumel) {
      if (src.buffer == buffers_.host) {
        check(fsdprt_copy(ctx_, stream_, shardScratch_, 0, src.buffer,
                          src.offset, unit.shardNumel * 4),
              "checkpoint: copy of an offloaded shard");
        src = {shardScratch_, 0};
      }
      check(fsdprt_all_gather(ctx_, stream_, comm_, FSDPRT_F32, src.buffer,
                              src.offset, scratch_, 0, unit.paddedNumel),
            "checkpoint: all-gather of unit '" + unit.name + "'");
      src = {scratch_, 0};
    }
    if (!toHost)
      return flat;
    flat.resize(unit.paddedNumel);
    check(fsdprt_copy_to_host(ctx_, stream_, flat.data(), src.buffer,
                              src.offset, unit.paddedNumel * 4),
          "checkpoint: copy of unit '" + unit.name + "'");
    check(fsdprt_stream_synchronize(ctx_, stream_),
          "checkpoint: gathering unit '" + unit.name + "'");
    return flat;
  }

  void finish() {
    check(fsdprt_stream_synchronize(ctx_, stream_), "checkpoint: gathering");
  }

private:
  const Program &program_;
  int64_t ctx_, stream_;
  StateBuffers buffers_;
  int64_t comm_;
  int64_t scratch_ = 0, shardScratch_ = 0;
};

json unitsJson(const Program &program) {
  json units = json::array();
  for (const UnitInfo &u : program.units) {
    json params = json::array(), state = json::array();
    for (const ParamInfo &p : u.params)
      params.push_back(
          {{"name", p.name}, {"shape", p.shape}, {"flat_offset", p.flatOffset}});
    for (const StateInfo &s : u.state)
      state.push_back(s.name);
    units.push_back({{"name", u.name},
                     {"flat_numel", u.flatNumel},
                     {"padded_numel", u.paddedNumel},
                     {"shard_numel", u.shardNumel},
                     {"rank_local", u.rankLocal},
                     {"frozen", u.frozen},
                     {"params", params},
                     {"state", state}});
  }
  return units;
}

//===- Loading ------------------------------------------------------------===//

using Reader = rt::SafetensorsReader;

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

/// Reads an f32 tensor of the expected shape; `what` names it in errors.
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

/// Copies the elements of parameter `p` (all of it, row-major, at `values`)
/// that fall in this rank's shard into the shard at `shardBase`.
void scatterParam(const float *values, const ParamInfo &p, int64_t shardBegin,
                  int64_t shardNumel, uint8_t *shardBase) {
  int64_t lo = std::max(shardBegin, p.flatOffset);
  int64_t hi = std::min(shardBegin + shardNumel, p.flatOffset + numelOf(p.shape));
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

/// Format and model checks shared by both formats.
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
    fail(path, "is not an " + format + " checkpoint (format '" + res.format +
                   "')");
  if (get("model") != program.model)
    fail(path, "holds model '" + get("model") + "', not '" + program.model +
                   "'");
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

LoadResult loadFull(const std::string &path, const Program &program, int rank,
                    std::vector<uint8_t> &image) {
  std::unique_ptr<Reader> r = openReader(path);
  LoadResult res = readHeader(*r, path, kFullFormat, program);
  // A checkpoint of another optimizer has none of our state: start it at 0.
  bool anyState = false;
  for (const UnitInfo &u : program.units)
    for (const StateInfo &s : u.state)
      for (const ParamInfo &p : u.params)
        anyState |= hasTensor(*r, stateTensorName(s.name, p.name));
  res.optimizerStateLoaded = anyState || !programHasState(program);

  for (const UnitInfo &u : program.units) {
    int64_t begin = shardBegin(program, u, rank);
    for (const ParamInfo &p : u.params) {
      if (!hasTensor(*r, p.name))
        fail(path, "has no parameter '" + p.name + "' of model '" +
                       program.model + "'");
      std::vector<float> v = readF32(*r, path, p.name, p.shape, "parameter");
      scatterParam(v.data(), p, begin, u.shardNumel, image.data() + u.offset);
      if (!anyState)
        continue;
      for (const StateInfo &s : u.state) {
        std::string name = stateTensorName(s.name, p.name);
        if (!hasTensor(*r, name))
          fail(path, "has no optimizer state '" + name + "'");
        v = readF32(*r, path, name, p.shape, "optimizer state");
        scatterParam(v.data(), p, begin, u.shardNumel, image.data() + s.offset);
      }
    }
  }
  readBuffers(*r, path, program, image);
  return res;
}

/// A unit as a sharded checkpoint recorded it.
struct SavedUnit {
  std::string name;
  int64_t paddedNumel = 0, shardNumel = 0;
  bool rankLocal = false; // one whole, different copy per rank file
  bool frozen = false;
  std::vector<ParamInfo> params; // name, shape, flatOffset
  std::vector<std::string> state;
};

std::vector<SavedUnit> parseSavedUnits(const Metadata &meta,
                                       const std::string &path) {
  auto it = meta.find("units");
  if (it == meta.end())
    fail(path, "metadata has no 'units'");
  std::vector<SavedUnit> units;
  try {
    for (const json &u : json::parse(it->second)) {
      SavedUnit s;
      s.name = u.at("name").get<std::string>();
      s.paddedNumel = u.at("padded_numel").get<int64_t>();
      s.shardNumel = u.at("shard_numel").get<int64_t>();
      s.rankLocal = u.value("rank_local", false);
      s.frozen = u.value("frozen", false);
      for (const json &p : u.at("params")) {
        ParamInfo info;
        info.name = p.at("name").get<std::string>();
        info.shape = p.at("shape").get<std::vector<int64_t>>();
        info.flatOffset = p.at("flat_offset").get<int64_t>();
        if (info.flatOffset < 0 ||
            info.flatOffset + numelOf(info.shape) > s.paddedNumel)
          throw std::runtime_error("parameter '" + info.name +
                                   "' lies outside its unit");
        s.params.push_back(info);
      }
      s.state = u.at("state").get<std::vector<std::string>>();
      if (s.shardNumel <= 0 ? s.paddedNumel != 0
                            : s.paddedNumel % s.shardNumel != 0)
        throw std::runtime_error("unit '" + s.name + "' has padded_numel " +
                                 std::to_string(s.paddedNumel) +
                                 " and shard_numel " +
                                 std::to_string(s.shardNumel));
      units.push_back(std::move(s));
    }
  } catch (const std::exception &e) {
    fail(path, std::string("metadata 'units' is malformed: ") + e.what());
  }
  return units;
}

/// The rank files of a sharded checkpoint directory, by rank.
std::map<int, std::string> listShardFiles(const std::string &dir,
                                          int &worldSize) {
  static const std::regex pattern(R"(rank-(\d+)-of-(\d+)\.safetensors)");
  std::map<int, std::string> files;
  worldSize = 0;
  for (const fs::directory_entry &e : fs::directory_iterator(dir)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, pattern))
      continue;
    int r = std::stoi(m[1].str()), w = std::stoi(m[2].str());
    if (worldSize != 0 && w != worldSize)
      fail(dir, "holds files of two world sizes (" +
                    std::to_string(worldSize) + " and " + std::to_string(w) +
                    ")");
    worldSize = w;
    files[r] = e.path().string();
  }
  if (files.empty())
    fail(dir, "is a directory without rank-<r>-of-<W>.safetensors files");
  return files;
}

/// One reader per shard index s: the file of a rank holding shard s,
/// replica 0's preferred.
std::vector<std::unique_ptr<Reader>>
openShardReaders(const std::string &dir, const std::map<int, std::string> &files,
                 int worldSize, int shard) {
  rt::Mesh mesh{worldSize / shard, shard};
  std::vector<std::unique_ptr<Reader>> readers;
  for (int s = 0; s < shard; ++s) {
    auto it = files.end();
    for (int r = 0; r < mesh.replicate && it == files.end(); ++r)
      it = files.find(mesh.rankOf(r, s));
    if (it == files.end())
      fail(dir, "is incomplete: " + shardFileName(s, worldSize) +
                    " is missing");
    readers.push_back(openReader(it->second));
  }
  return readers;
}

/// Concatenates the shards of one flat tensor of a saved unit.
std::vector<float>
readSavedFlat(const std::vector<std::unique_ptr<Reader>> &readers,
              const std::string &dir, const SavedUnit &u,
              const std::string &suffix) {
  std::vector<float> flat(u.paddedNumel);
  std::string name = unitKey(u.name) + "/" + suffix;
  size_t parts = u.shardNumel == u.paddedNumel ? 1 : readers.size();
  for (size_t s = 0; s < parts; ++s) {
    if (!hasTensor(*readers[s], name))
      fail(dir, "shard " + std::to_string(s) + " has no tensor '" + name + "'");
    std::vector<float> part =
        readF32(*readers[s], dir, name, {u.shardNumel}, "tensor");
    std::copy(part.begin(), part.end(), flat.begin() + s * u.shardNumel);
  }
  return flat;
}

LoadResult loadSharded(const std::string &dir, const Program &program,
                       int rank, std::vector<uint8_t> &image) {
  int worldSize = 0;
  std::map<int, std::string> files = listShardFiles(dir, worldSize);
  std::unique_ptr<Reader> first = openReader(files.begin()->second);
  LoadResult res = readHeader(*first, dir, kShardedFormat, program);
  int64_t shard = parseCount(res.metadata, "shard", dir);
  if (shard < 1 || worldSize % shard != 0)
    fail(dir, "metadata shard " + std::to_string(shard) +
                  " does not divide the world size " +
                  std::to_string(worldSize));
  std::vector<SavedUnit> saved = parseSavedUnits(res.metadata, dir);
  std::vector<std::unique_ptr<Reader>> readers =
      openShardReaders(dir, files, worldSize, static_cast<int>(shard));

  // Where each of our parameters lives: (unit, param).
  std::map<std::string, std::pair<const UnitInfo *, const ParamInfo *>> ours;
  std::set<std::string> stateNames;
  for (const UnitInfo &u : program.units) {
    for (const ParamInfo &p : u.params)
      ours[p.name] = {&u, &p};
    for (const StateInfo &s : u.state)
      stateNames.insert(s.name);
  }
  bool anyState = false;
  for (const SavedUnit &su : saved)
    for (const std::string &s : su.state)
      anyState |= stateNames.count(s) > 0;
  res.optimizerStateLoaded = anyState || !programHasState(program);

  std::set<std::string> loaded; // parameter and "optim.<s>.<p>" names
  for (const SavedUnit &su : saved) {
    std::vector<std::pair<const ParamInfo *, const ParamInfo *>> matches;
    for (const ParamInfo &sp : su.params) {
      auto it = ours.find(sp.name);
      if (it == ours.end())
        continue;
      if (sp.shape != it->second.second->shape)
        fail(dir, "parameter '" + sp.name + "' has shape " +
                      shapeString(sp.shape) + ", the model expects " +
                      shapeString(it->second.second->shape));
      matches.push_back({&sp, it->second.second});
    }
    if (matches.empty())
      continue;
    auto scatter = [&](const std::vector<float> &flat, const ParamInfo &sp,
                       const std::string &key, int64_t shardOffset) {
      const UnitInfo &u = *ours[sp.name].first;
      scatterParam(flat.data() + sp.flatOffset, *ours[sp.name].second,
                   shardBegin(program, u, rank), u.shardNumel,
                   image.data() + shardOffset);
      loaded.insert(key);
    };
    // A rank-local unit is whole in every rank's file and differs between
    // them: each rank of a rank-local program reads its own, which a larger
    // world does not have. (Saved sharded, it is assembled from the shards;
    // saved rank-local into a program where it is not, rank 0's copy.)
    std::vector<std::unique_ptr<Reader>> ownFile;
    const UnitInfo &unit = *ours[matches.front().second->name].first;
    if (su.rankLocal && unit.rankLocal) {
      if (rank >= worldSize)
        fail(dir, "was saved by " + std::to_string(worldSize) +
                      " ranks: rank-local unit '" + unit.name +
                      "' has no copy for rank " + std::to_string(rank));
      auto it = files.find(rank);
      if (it == files.end())
        fail(dir, "is incomplete: " + shardFileName(rank, worldSize) +
                      " is missing");
      ownFile.push_back(openReader(it->second));
    }
    const auto &from = ownFile.empty() ? readers : ownFile;
    std::vector<float> flat = readSavedFlat(from, dir, su, flatParamKey(su.frozen));
    for (const auto &[sp, p] : matches)
      scatter(flat, *sp, p->name, ours[p->name].first->offset);
    for (const std::string &s : su.state) {
      if (!anyState || !stateNames.count(s))
        continue;
      flat = readSavedFlat(from, dir, su, s);
      for (const auto &[sp, p] : matches)
        for (const StateInfo &st : ours[p->name].first->state)
          if (st.name == s)
            scatter(flat, *sp, stateTensorName(s, p->name), st.offset);
    }
  }

  for (const UnitInfo &u : program.units)
    for (const ParamInfo &p : u.params) {
      if (!loaded.count(p.name))
        fail(dir, "has no parameter '" + p.name + "' of model '" +
                      program.model + "'");
      for (const StateInfo &s : u.state)
        if (anyState && !loaded.count(stateTensorName(s.name, p.name)))
          fail(dir, "has no optimizer state '" + s.name + "' of '" + p.name +
                        "'");
    }
  readBuffers(*first, dir, program, image);
  return res;
}

} // namespace

std::string shardFileName(int rank, int worldSize) {
  return "rank-" + std::to_string(rank) + "-of-" + std::to_string(worldSize) +
         ".safetensors";
}

void saveFull(const std::string &path, const Program &program, int64_t ctx,
              int64_t stream, const StateBuffers &buffers, int64_t shardComm,
              int rank, int64_t stepCount, const Metadata &meta) {
  check(fsdprt_context_synchronize(ctx), "checkpoint: synchronize");
  // Replicas hold identical shards: only replica 0 gathers, rank 0 writes.
  if (program.mesh().replicaIndex(rank) != 0)
    return;
  bool writes = rank == 0;
  std::unique_ptr<Writer> writer;
  if (writes) {
    createDirectories(fs::path(path).parent_path());
    writer = std::make_unique<Writer>(path);
  }
  FlatGatherer gatherer(program, ctx, stream, buffers, shardComm);
  for (const UnitInfo &u : program.units) {
    std::vector<float> flat = gatherer.gather(u, u.offset, writes);
    if (writes)
      for (const ParamInfo &p : u.params)
        writer->add(p.name, p.shape, flat.data() + p.flatOffset);
    for (const StateInfo &s : u.state) {
      flat = gatherer.gather(u, s.offset, writes);
      if (writes)
        for (const ParamInfo &p : u.params)
          writer->add(stateTensorName(s.name, p.name), p.shape,
                      flat.data() + p.flatOffset);
    }
  }
  gatherer.finish();
  if (!writes)
    return;
  for (const BufferInfo &b : program.buffers)
    writer->addBuffer(ctx, b.name, b.dtype, b.shape, buffers.persistent,
                      b.offset);
  writer->setMetadata(meta, {{"format", kFullFormat},
                             {"model", program.model},
                             {"step_count", std::to_string(stepCount)},
                             {"optimizer", program.optimizer}});
  writer->finish();
}

void saveSharded(const std::string &dir, const Program &program, int64_t ctx,
                 const StateBuffers &buffers, int rank, int64_t stepCount,
                 const Metadata &meta) {
  createDirectories(dir);
  Writer writer((fs::path(dir) / shardFileName(rank, program.worldSize))
                    .string());
  for (const UnitInfo &u : program.units) {
    std::string key = unitKey(u.name);
    BufferRef shard = locate(program, buffers, u.offset);
    writer.addBuffer(ctx, key + "/" + flatParamKey(u.frozen), "f32",
                     {u.shardNumel}, shard.buffer, shard.offset);
    for (const StateInfo &s : u.state) {
      BufferRef state = locate(program, buffers, s.offset);
      writer.addBuffer(ctx, key + "/" + s.name, "f32", {u.shardNumel},
                       state.buffer, state.offset);
    }
  }
  for (const BufferInfo &b : program.buffers)
    writer.addBuffer(ctx, b.name, b.dtype, b.shape, buffers.persistent,
                     b.offset);
  writer.setMetadata(meta,
                     {{"format", kShardedFormat},
                      {"model", program.model},
                      {"world_size", std::to_string(program.worldSize)},
                      {"replicate", std::to_string(program.replicate)},
                      {"shard", std::to_string(program.shard)},
                      {"rank", std::to_string(rank)},
                      {"step_count", std::to_string(stepCount)},
                      {"optimizer", program.optimizer},
                      {"units", unitsJson(program).dump()}});
  writer.finish();
}

LoadResult load(const std::string &path, const Program &program, int rank,
                std::vector<uint8_t> &persistentImage) {
  if (rank < 0 || rank >= program.worldSize)
    throw std::runtime_error("checkpoint: rank " + std::to_string(rank) +
                             " is not in a world of " +
                             std::to_string(program.worldSize));
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw std::runtime_error("checkpoint '" + path + "' does not exist");
  persistentImage.assign(program.imageBytes(), 0);
  try {
    if (fs::is_directory(path))
      return loadSharded(path, program, rank, persistentImage);
    return loadFull(path, program, rank, persistentImage);
  } catch (const rt::Error &e) {
    // A read that failed after the header was validated (I/O error).
    throw std::runtime_error("checkpoint '" + path + "': " + e.what());
  }
}

} // namespace driver
} // namespace fsdp
