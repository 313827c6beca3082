//===- Checkpoint.cpp - Loading either checkpoint format ------------------===//
//
// A file is a full checkpoint (FullCheckpoint.cpp), a directory a sharded
// one (ShardedCheckpoint.cpp); CheckpointIO.h is what they share.
//
//===----------------------------------------------------------------------===//
#include "runner/Checkpoint.h"

#include "runner/CheckpointIO.h"

#include "fsdp/rt/Error.h"

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
