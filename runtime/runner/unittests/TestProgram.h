//===- TestProgram.h - A small program description for tests ----*- C++ -*-===//
//
// What convert-fsdp-to-rt would emit for a tiny model at a given mesh: two
// units (the root and "h.0") whose flat parameters are padded to a multiple
// of the shard size, optimizer state per unit, BatchNorm-like buffers and a
// language-model pair of inputs, laid out back to back in the persistent
// buffer; optionally "h.0" rank-local (whole on every rank, never sharded).
// Also the JSON spelling of a Program, for parser tests.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_UNITTESTS_TESTPROGRAM_H
#define FSDP_DRIVER_UNITTESTS_TESTPROGRAM_H

#include "runner/Program.h"

#include "fsdp/rt/ProgramKeys.h"
#include "fsdp/rt/fsdprt.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {
namespace test {

inline int64_t testNumel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Appends `bytes` at the 64-byte aligned end of the persistent buffer.
inline int64_t place(Program &p, int64_t bytes) {
  constexpr int64_t kAlign = FSDPRT_ARENA_ALIGNMENT;
  int64_t offset = (p.persistentBytes + kAlign - 1) / kAlign * kAlign;
  p.persistentBytes = offset + bytes;
  return offset;
}

inline UnitInfo makeUnit(Program &p, const std::string &name,
                         std::vector<ParamInfo> params,
                         const std::vector<std::string> &state,
                         bool rankLocal = false) {
  UnitInfo u;
  u.name = name;
  u.dtype = "f32";
  u.rankLocal = rankLocal;
  int64_t shard = rankLocal ? 1 : p.shard;
  for (ParamInfo &param : params) {
    param.flatOffset = u.flatNumel;
    u.flatNumel += testNumel(param.shape);
  }
  u.params = std::move(params);
  u.paddedNumel = (u.flatNumel + shard - 1) / shard * shard;
  u.shardNumel = u.paddedNumel / shard;
  u.offset = place(p, u.shardNumel * 4);
  for (const std::string &s : state)
    u.state.push_back(StateInfo{s, place(p, u.shardNumel * 4), u.shardNumel});
  return u;
}

inline ParamInfo param(const std::string &name, std::vector<int64_t> shape,
                       const std::string &kind, std::vector<double> args) {
  ParamInfo p;
  p.name = name;
  p.shape = std::move(shape);
  p.init = InitSpec{kind, std::move(args)};
  return p;
}

/// The tiny model on a [replicate, shard] mesh.
inline Program testProgram(int replicate, int shard,
                           const std::string &optimizer = "adamw",
                           const std::string &model = "tiny",
                           bool rankLocalBlock = false) {
  Program p;
  p.model = model;
  p.entry = "tiny_step";
  p.replicate = replicate;
  p.shard = shard;
  p.worldSize = replicate * shard;
  p.optimizer = optimizer;
  std::vector<std::string> state;
  if (optimizer == "adamw")
    state = {"exp_avg", "exp_avg_sq"};
  else if (optimizer == "sgd")
    state = {"momentum_buffer"};
  p.units.push_back(
      makeUnit(p, "",
               {param("wte.weight", {11, 6}, "normal", {0.0, 0.02}),
                param("ln_f.weight", {6}, "ones", {}),
                param("ln_f.bias", {6}, "zeros", {})},
               state));
  p.units.push_back(makeUnit(
      p, "h.0",
      {param("h.0.fc.weight", {5, 6}, "kaiming_uniform", {std::sqrt(5.0)}),
       param("h.0.fc.bias", {5}, "uniform", {-0.4, 0.4}),
       param("h.0.conv.weight", {3, 2, 2, 2}, "xavier_normal", {1.0})},
      state, rankLocalBlock));
  auto buffer = [&](const std::string &name, std::vector<int64_t> shape,
                    const std::string &dtype, const std::string &kind) {
    BufferInfo b;
    b.name = name;
    b.shape = std::move(shape);
    b.dtype = dtype;
    b.init = InitSpec{kind, {}};
    b.offset = place(p, testNumel(b.shape) * (dtype == "i64" ? 8 : 4));
    p.buffers.push_back(b);
  };
  buffer("bn.running_mean", {3}, "f32", "zeros");
  buffer("bn.running_var", {3}, "f32", "ones");
  buffer("bn.num_batches_tracked", {}, "i64", "zeros");
  for (int64_t index = 0; index < 2; ++index) {
    InputInfo in;
    in.index = index;
    in.shape = {2, 4};
    in.dtype = "i64";
    in.maxId = 11;
    in.offset = place(p, 2 * 4 * 8);
    p.inputs.push_back(in);
  }
  p.lossOffset = place(p, 4);
  p.arenaBytes = p.persistentBytes + 4096;
  p.estimateBytes = p.arenaBytes;
  p.report = "tiny: " + std::to_string(p.worldSize) + " ranks";
  return p;
}

namespace keys = fsdprt::program_keys;

inline nlohmann::json initJson(const InitSpec &init) {
  return {{keys::init_kind, init.kind}, {keys::init_args, init.args}};
}

/// The program as convert-fsdp-to-rt spells it (keys from ProgramKeys.def).
inline nlohmann::json programJson(const Program &p) {
  using nlohmann::json;
  json units = json::array(), buffers = json::array(), inputs = json::array();
  for (const UnitInfo &u : p.units) {
    json params = json::array(), state = json::array();
    for (const ParamInfo &q : u.params)
      params.push_back({{keys::param_name, q.name},
                        {keys::param_shape, q.shape},
                        {keys::param_flat_offset, q.flatOffset},
                        {keys::param_init, initJson(q.init)}});
    for (const StateInfo &s : u.state) {
      json entry = {{keys::state_name, s.name}, {keys::state_offset, s.offset}};
      if (s.whole)
        entry[keys::state_numel] = s.numel, entry[keys::state_whole] = true;
      state.push_back(entry);
    }
    units.push_back({{keys::unit_name, u.name},
                     {keys::unit_dtype, u.dtype},
                     {keys::unit_offset, u.offset},
                     {keys::unit_flat_numel, u.flatNumel},
                     {keys::unit_padded_numel, u.paddedNumel},
                     {keys::unit_shard_numel, u.shardNumel},
                     {keys::unit_rank_local, u.rankLocal},
                     {keys::unit_frozen, u.frozen},
                     {keys::unit_ignored, u.ignored},
                     {keys::unit_params, params},
                     {keys::unit_state, state}});
  }
  for (const BufferInfo &b : p.buffers)
    buffers.push_back({{keys::buffer_name, b.name},
                       {keys::buffer_shape, b.shape},
                       {keys::buffer_dtype, b.dtype},
                       {keys::buffer_offset, b.offset},
                       {keys::buffer_init, initJson(b.init)}});
  for (const InputInfo &in : p.inputs)
    inputs.push_back({{keys::input_index, in.index},
                      {keys::input_micro_batch, in.microBatch},
                      {keys::input_shape, in.shape},
                      {keys::input_dtype, in.dtype},
                      {keys::input_offset, in.offset},
                      {keys::input_max_id, in.maxId}});
  return {
      {keys::program_model, p.model},
      {keys::program_entry, p.entry},
      {keys::program_world_size, p.worldSize},
      {keys::program_replicate, p.replicate},
      {keys::program_shard, p.shard},
      {keys::program_micro_batches, p.microBatches},
      {keys::program_optimizer, p.optimizer},
      {keys::program_persistent_bytes, p.persistentBytes},
      {keys::program_arena_bytes, p.arenaBytes},
      {keys::program_estimate_bytes, p.estimateBytes},
      {keys::program_report, p.report},
      {keys::program_units, units},
      {keys::program_buffers, buffers},
      {keys::program_inputs, inputs},
      {keys::program_loss,
       {{keys::loss_offset, p.lossOffset}, {keys::loss_dtype, p.lossDtype}}}};
}

} // namespace test
} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_UNITTESTS_TESTPROGRAM_H
