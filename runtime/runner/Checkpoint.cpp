//===- Checkpoint.cpp - Loading either checkpoint format ------------------===//
//
// A file is a full checkpoint (FullCheckpoint.cpp), a directory a sharded
// one (ShardedCheckpoint.cpp); CheckpointIO.h is what they share.
//
//===----------------------------------------------------------------------===//
#include "runner/Checkpoint.h"

#include "runner/CheckpointIO.h"

#include "fsdp/rt/Error.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <stdexcept>

namespace fsdp {
namespace driver {

using namespace checkpoint;

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
    if (isPretrained(path))
      return loadPretrained(path, program, rank, persistentImage);
    if (fs::is_directory(path))
      return loadSharded(path, program, rank, persistentImage);
    return loadFull(path, program, rank, persistentImage);
  } catch (const rt::Error &e) {
    // A read that failed after the header was validated (I/O error).
    throw std::runtime_error("checkpoint '" + path + "': " + e.what());
  }
}

namespace {
/// Whether a sharded checkpoint directory holds every rank's file.
bool completeShards(const std::filesystem::path &dir) {
  static const std::regex file(R"(rank-(\d+)-of-(\d+)\.safetensors)");
  std::vector<bool> seen;
  for (const auto &entry : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, file))
      continue;
    size_t rank = std::stoul(m[1]), world = std::stoul(m[2]);
    if (seen.empty())
      seen.assign(world, false);
    if (world != seen.size() || rank >= world)
      return false;
    seen[rank] = true;
  }
  return !seen.empty() &&
         std::find(seen.begin(), seen.end(), false) == seen.end();
}
} // namespace

std::string startingCheckpoint(const RunOptions &o) {
  return o.resume == "latest" ? latestCheckpoint(o.save) : o.load;
}

std::string latestCheckpoint(const std::string &dir) {
  namespace fs = std::filesystem;
  static const std::regex name(R"(step-(\d+)(\.safetensors)?)");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return "";
  long long best = -1;
  std::string found;
  for (const auto &entry : fs::directory_iterator(dir)) {
    std::smatch m;
    std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, name))
      continue;
    bool full = m[2].matched;
    if (full ? !entry.is_regular_file() : !completeShards(entry.path()))
      continue;
    long long step = std::stoll(m[1]);
    if (step > best) {
      best = step;
      found = entry.path().string();
    }
  }
  return found;
}

} // namespace driver
} // namespace fsdp
