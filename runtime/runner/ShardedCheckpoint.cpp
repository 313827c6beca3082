//===- ShardedCheckpoint.cpp - A directory of rank files ------------------===//
//
// The sharded format: every rank writes its own shards (no collective), as
// FSDP's SHARDED_STATE_DICT; loading reassembles each flat tensor from the
// shard files, so another world size or mesh can read it.
//
//===----------------------------------------------------------------------===//
#include "runner/CheckpointIO.h"

#include "runner/Init.h"

#include <map>
#include <regex>
#include <set>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace checkpoint {

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
      fail(dir, "holds files of two world sizes (" + std::to_string(worldSize) +
                    " and " + std::to_string(w) + ")");
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
openShardReaders(const std::string &dir,
                 const std::map<int, std::string> &files, int worldSize,
                 int shard) {
  rt::Mesh mesh{worldSize / shard, shard};
  std::vector<std::unique_ptr<Reader>> readers;
  for (int s = 0; s < shard; ++s) {
    auto it = files.end();
    for (int r = 0; r < mesh.replicate && it == files.end(); ++r)
      it = files.find(mesh.rankOf(r, s));
    if (it == files.end())
      fail(dir,
           "is incomplete: " + shardFileName(s, worldSize) + " is missing");
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

LoadResult loadSharded(const std::string &dir, const Program &program, int rank,
                       std::vector<uint8_t> &image) {
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
  // Whole states (the same in every rank file, as torch names them per
  // parameter) need no reassembly: the first file's.
  for (const UnitInfo &u : program.units)
    for (const StateInfo &s : u.state)
      if (s.whole)
        for (const WholeStateTensor &t : wholeStateTensors(u))
          anyState |= hasTensor(*first, t.name);
  for (const UnitInfo &u : program.units)
    for (const StateInfo &s : u.state)
      if (anyState && s.whole)
        readWholeState(*first, dir, u, s, image);
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
    std::vector<float> flat =
        readSavedFlat(from, dir, su, flatParamKey(su.frozen));
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
        if (anyState && !s.whole &&
            !loaded.count(stateTensorName(s.name, p.name)))
          fail(dir,
               "has no optimizer state '" + s.name + "' of '" + p.name + "'");
    }
  readBuffers(*first, dir, program, image);
  return res;
}

} // namespace checkpoint

using namespace checkpoint;

std::string shardFileName(int rank, int worldSize) {
  return "rank-" + std::to_string(rank) + "-of-" + std::to_string(worldSize) +
         ".safetensors";
}

void saveSharded(const std::string &dir, const Program &program, int64_t ctx,
                 const StateBuffers &buffers, int rank, int64_t stepCount,
                 const Metadata &meta) {
  createDirectories(dir);
  Writer writer(
      (fs::path(dir) / shardFileName(rank, program.worldSize)).string());
  for (const UnitInfo &u : program.units) {
    std::string key = unitKey(u.name);
    BufferRef shard = locate(program, buffers, u.offset);
    writer.addBuffer(ctx, key + "/" + flatParamKey(u.frozen), "f32",
                     {u.shardNumel}, shard.buffer, shard.offset);
    for (const StateInfo &s : u.state) {
      BufferRef state = locate(program, buffers, s.offset);
      if (!s.whole) {
        writer.addBuffer(ctx, key + "/" + s.name, "f32", {u.shardNumel},
                         state.buffer, state.offset);
        continue;
      }
      for (const WholeStateTensor &t : wholeStateTensors(u))
        writer.addBuffer(ctx, t.name, "f32", t.shape, state.buffer,
                         state.offset + t.offset * 4);
    }
  }
  for (const BufferInfo &b : program.buffers)
    writer.addBuffer(ctx, b.name, b.dtype, b.shape, buffers.persistent,
                     b.offset);
  writer.setMetadata(meta, {{"format", kShardedFormat},
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

} // namespace driver
} // namespace fsdp
