//===- CheckpointIO.h - What the two checkpoint formats share ---*- C++ -*-===//
//
// The full format (FullCheckpoint.cpp: one file, whole tensors, any world
// size, streamed through the runtime's SafetensorsFileWriter) and the
// sharded one (ShardedCheckpoint.cpp: a directory of rank files, written
// through the C ABI's fsdprt_ckpt_writer_*) write atomically and read with
// the runtime's validating SafetensorsReader, which gives the whole
// metadata map the C ABI can only query key by key. This is what they
// share: names, the writer handle, the gather of whole flat tensors, the
// header and buffer checks; and weights saved elsewhere
// (PretrainedWeights.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNNER_CHECKPOINTIO_H
#define FSDP_RUNNER_CHECKPOINTIO_H

#include "runner/Checkpoint.h"
#include "runner/Program.h"
#include "runner/RankRuntime.h"
#include "runner/UnitGather.h"

#include "fsdp/rt/Safetensors.h"
#include "fsdp/rt/fsdprt.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {
namespace checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::json;
constexpr const char *kFullFormat = "fsdp-mlir-full";
constexpr const char *kShardedFormat = "fsdp-mlir-sharded";
using Reader = rt::SafetensorsReader;

[[noreturn]] void fail(const std::string &path, const std::string &what);

int64_t numelOf(const std::vector<int64_t> &shape);

std::string shapeString(const std::vector<int64_t> &shape);

std::string unitKey(const std::string &unitName);

/// The tensor of a sharded checkpoint holding a unit's flat parameter: a
/// unit may have a trainable and a frozen one.
std::string flatParamKey(bool frozen);

std::string stateTensorName(const std::string &state, const std::string &param);

/// One tensor of a unit's whole state (Adafactor's second moment,
/// AdafactorLayout.h), as torch's state dict holds it: per parameter its
/// row_var [..., rows, 1] and col_var [..., 1, cols] when factored, else
/// its variance (the parameter's shape); `offset` is in elements of the
/// state.
struct WholeStateTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
};
std::vector<WholeStateTensor> wholeStateTensors(const UnitInfo &unit);

/// Copies a whole state from the rank's buffers to the host.
std::vector<float> wholeStateToHost(const Program &program, int64_t ctx,
                                    int64_t stream, const StateBuffers &buffers,
                                    const StateInfo &state);

/// Reads a unit's whole state `state` (every tensor present) into `image`.
void readWholeState(const Reader &r, const std::string &path,
                    const UnitInfo &unit, const StateInfo &state,
                    std::vector<uint8_t> &image);

void createDirectories(const fs::path &dir);

json unitsJson(const Program &program);

std::unique_ptr<Reader> openReader(const std::string &path);

bool hasTensor(const Reader &r, const std::string &name);

/// Reads an f32 tensor of the expected shape; `what` names it in errors.
std::vector<float> readF32(const Reader &r, const std::string &path,
                           const std::string &name,
                           const std::vector<int64_t> &shape,
                           const std::string &what);

/// Copies the elements of parameter `p` (all of it, row-major, at `values`)
/// that fall in this rank's shard into the shard at `shardBase`.
void scatterParam(const float *values, const ParamInfo &p, int64_t shardBegin,
                  int64_t shardNumel, uint8_t *shardBase);

int64_t parseCount(const Metadata &meta, const std::string &key,
                   const std::string &path);

/// Format and model checks shared by both formats.
LoadResult readHeader(const Reader &r, const std::string &path,
                      const std::string &format, const Program &program);

void readBuffers(const Reader &r, const std::string &path,
                 const Program &program, std::vector<uint8_t> &image);

bool programHasState(const Program &program);

/// Whether `path` holds weights saved by something else than our runner (a
/// save_pretrained directory, its index or a file without our format key):
/// PretrainedWeights.cpp.
bool isPretrained(const std::string &path);
LoadResult loadPretrained(const std::string &path, const Program &program,
                          int rank, std::vector<uint8_t> &image);

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
              handle_, ctx, name.c_str(), static_cast<int32_t>(dtypeOf(dtype)),
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
/// the host: all-gathers sharded ones (UnitGatherer), copies unsharded ones
/// directly.
class FlatGatherer {
public:
  FlatGatherer(const Program &program, int64_t ctx, int64_t stream,
               const StateBuffers &buffers, int64_t shardComm)
      : ctx_(ctx), stream_(stream),
        device_(program, ctx, stream, buffers, shardComm, allUnits(program),
                "checkpoint") {}

  /// The whole padded flat tensor whose shard is at `offset`; `toHost`
  /// false takes part in the collective only (returns nothing).
  std::vector<float> gather(const UnitInfo &unit, int64_t offset, bool toHost) {
    std::vector<float> flat;
    if (unit.paddedNumel == 0)
      return flat;
    BufferRef src = device_.gather(unit, offset);
    if (!toHost)
      return flat;
    flat.resize(unit.paddedNumel); // units are f32 (Program.cpp checks)
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
  static std::vector<const UnitInfo *> allUnits(const Program &program) {
    std::vector<const UnitInfo *> units;
    for (const UnitInfo &u : program.units)
      units.push_back(&u);
    return units;
  }
  int64_t ctx_, stream_;
  UnitGatherer device_;
};

/// The formats' readers (Checkpoint.cpp's load() picks one).
LoadResult loadFull(const std::string &path, const Program &program, int rank,
                    std::vector<uint8_t> &image);
LoadResult loadSharded(const std::string &dir, const Program &program, int rank,
                       std::vector<uint8_t> &image);

} // namespace checkpoint
} // namespace driver
} // namespace fsdp

#endif // FSDP_RUNNER_CHECKPOINTIO_H
