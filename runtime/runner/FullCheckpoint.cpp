//===- FullCheckpoint.cpp - One file of whole tensors ---------------------===//
//
// The full format: rank 0 writes every unit's parameters (and optimizer
// state) whole, gathered over the shard group, as PyTorch's full state dict;
// any world size and mesh loads it, each rank keeping its shard.
//
//===----------------------------------------------------------------------===//
#include "runner/CheckpointIO.h"

#include "runner/Init.h"

#include <set>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace checkpoint {

LoadResult loadFull(const std::string &path, const Program &program, int rank,
                    std::vector<uint8_t> &image) {
  std::unique_ptr<Reader> r = openReader(path);
  LoadResult res = readHeader(*r, path, kFullFormat, program);
  // A checkpoint of another optimizer has none of our state: start it at 0.
  bool anyState = false;
  for (const UnitInfo &u : program.units)
    for (const StateInfo &s : u.state) {
      if (s.whole) {
        for (const WholeStateTensor &t : wholeStateTensors(u))
          anyState |= hasTensor(*r, t.name);
        continue;
      }
      for (const ParamInfo &p : u.params)
        anyState |= hasTensor(*r, stateTensorName(s.name, p.name));
    }
  res.optimizerStateLoaded = anyState || !programHasState(program);

  for (const UnitInfo &u : program.units) {
    int64_t begin = shardBegin(program, u, rank);
    for (const StateInfo &s : u.state)
      if (anyState && s.whole)
        readWholeState(*r, path, u, s, image);
    for (const ParamInfo &p : u.params) {
      if (!hasTensor(*r, p.name))
        fail(path, "has no parameter '" + p.name + "' of model '" +
                       program.model + "'");
      std::vector<float> v = readF32(*r, path, p.name, p.shape, "parameter");
      scatterParam(v.data(), p, begin, u.shardNumel, image.data() + u.offset);
      if (!anyState)
        continue;
      for (const StateInfo &s : u.state) {
        if (s.whole)
          continue; // read above
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

} // namespace checkpoint

using namespace checkpoint;

namespace {
/// Every tensor of the full format, declared before any is gathered.
std::vector<rt::SafetensorsFileWriter::Tensor>
fullLayout(const Program &program) {
  std::vector<rt::SafetensorsFileWriter::Tensor> layout;
  for (const UnitInfo &u : program.units) {
    for (const ParamInfo &p : u.params)
      layout.push_back({p.name, rt::DType::F32, p.shape});
    for (const StateInfo &s : u.state) {
      if (s.whole) {
        for (const WholeStateTensor &t : wholeStateTensors(u))
          layout.push_back({t.name, rt::DType::F32, t.shape});
        continue;
      }
      for (const ParamInfo &p : u.params)
        layout.push_back(
            {stateTensorName(s.name, p.name), rt::DType::F32, p.shape});
    }
  }
  for (const BufferInfo &b : program.buffers)
    layout.push_back({b.name, dtypeOf(b.dtype), b.shape});
  return layout;
}
} // namespace

void saveFull(const std::string &path, const Program &program, int64_t ctx,
              int64_t stream, const StateBuffers &buffers, int64_t shardComm,
              int rank, int64_t stepCount, const Metadata &meta) {
  check(fsdprt_context_synchronize(ctx), "checkpoint: synchronize");
  // Replicas hold identical shards: only replica 0 gathers, rank 0 writes.
  if (program.mesh().replicaIndex(rank) != 0)
    return;
  bool writes = rank == 0;
  // Streamed: rank 0 holds one gathered unit at a time, never the model.
  std::unique_ptr<rt::SafetensorsFileWriter> out;
  if (writes) {
    createDirectories(fs::path(path).parent_path());
    Metadata all = meta; // the caller's keys, then ours (which win)
    for (const auto &[key, value] :
         Metadata{{"format", kFullFormat},
                  {"model", program.model},
                  {"step_count", std::to_string(stepCount)},
                  {"optimizer", program.optimizer}})
      all[key] = value;
    out = std::make_unique<rt::SafetensorsFileWriter>(
        path, fullLayout(program), all);
  }
  FlatGatherer gatherer(program, ctx, stream, buffers, shardComm);
  for (const UnitInfo &u : program.units) {
    std::vector<float> flat = gatherer.gather(u, u.offset, writes);
    if (writes)
      for (const ParamInfo &p : u.params)
        out->put(p.name, flat.data() + p.flatOffset);
    for (const StateInfo &s : u.state) {
      if (s.whole) { // the same on every rank: rank 0's copy
        if (!writes)
          continue;
        std::vector<float> host =
            wholeStateToHost(program, ctx, stream, buffers, s);
        for (const WholeStateTensor &t : wholeStateTensors(u))
          out->put(t.name, host.data() + t.offset);
        continue;
      }
      flat = gatherer.gather(u, s.offset, writes);
      if (writes)
        for (const ParamInfo &p : u.params)
          out->put(stateTensorName(s.name, p.name), flat.data() + p.flatOffset);
    }
  }
  gatherer.finish();
  if (!writes)
    return;
  for (const BufferInfo &b : program.buffers) {
    std::vector<char> host(size_t(numelOf(b.shape) *
                                  rt::dtypeSize(dtypeOf(b.dtype))));
    check(fsdprt_copy_to_host(ctx, stream, host.data(), buffers.persistent,
                              b.offset, int64_t(host.size())),
          "checkpoint: buffer '" + b.name + "'");
    check(fsdprt_stream_synchronize(ctx, stream),
          "checkpoint: buffer '" + b.name + "'");
    out->put(b.name, host.data());
  }
  out->commit();
}

} // namespace driver
} // namespace fsdp
