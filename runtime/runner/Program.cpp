//===- Program.cpp - Parsing and validating the program description -------===//
//
// The JSON comes from our own compiler, but fsdp-run trusts nothing it reads:
// every error names the key path ("units[2].params[0].shape") so that a
// compiler bug shows up as a one-line message instead of a wild write into
// the persistent buffer.
//
//===----------------------------------------------------------------------===//
#include "runner/Program.h"

#include "fsdp/rt/DType.h"
#include "fsdp/rt/ProgramKeys.h"
#include "fsdp/rt/fsdprt.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>

namespace fsdp {
namespace driver {
namespace {

using json = nlohmann::json;
namespace keys = fsdprt::program_keys;

[[noreturn]] void fail(const std::string &path, const std::string &what) {
  throw std::runtime_error("program: " + path + ": " + what);
}

std::string join(const std::string &path, const std::string &key) {
  return path.empty() ? key : path + "." + key;
}

std::string at(const std::string &path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

/// Every key of `obj` is one ProgramKeys.def lists for `object`: a key the
/// compiler writes and the runner does not read is an error, not ignored.
void checkKeys(const json &obj, const char *object, const std::string &path) {
  if (!obj.is_object())
    return; // the caller names what it expected
  for (const auto &item : obj.items()) {
    bool known = false;
    for (const keys::Row &row : keys::kRows)
      known |= std::string(row.object) == object && row.key == item.key();
    if (!known)
      fail(join(path, item.key()),
           std::string("unknown key (not in ProgramKeys.def for ") + object +
               ")");
  }
}

const json &field(const json &obj, const std::string &path,
                  const std::string &key) {
  auto it = obj.find(key);
  if (it == obj.end())
    fail(join(path, key), "missing");
  return *it;
}

int64_t asInt(const json &v, const std::string &path) {
  if (!v.is_number_integer())
    fail(path, "expected an integer");
  return v.get<int64_t>();
}

int64_t getInt(const json &obj, const std::string &path,
               const std::string &key) {
  return asInt(field(obj, path, key), join(path, key));
}

int getSmallInt(const json &obj, const std::string &path,
                const std::string &key) {
  int64_t v = getInt(obj, path, key);
  if (v < std::numeric_limits<int>::min() ||
      v > std::numeric_limits<int>::max())
    fail(join(path, key), "value " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

std::string getString(const json &obj, const std::string &path,
                      const std::string &key) {
  const json &v = field(obj, path, key);
  if (!v.is_string())
    fail(join(path, key), "expected a string");
  return v.get<std::string>();
}

/// An optional true / false key, `otherwise` when absent.
bool getBoolOr(const json &obj, const std::string &path, const std::string &key,
               bool otherwise) {
  auto it = obj.find(key);
  if (it == obj.end())
    return otherwise;
  if (!it->is_boolean())
    fail(join(path, key), "expected true or false");
  return it->get<bool>();
}

double getNumber(const json &obj, const std::string &path,
                 const std::string &key) {
  const json &v = field(obj, path, key);
  if (!v.is_number())
    fail(join(path, key), "expected a number");
  return v.get<double>();
}

const json &getArray(const json &obj, const std::string &path,
                     const std::string &key, const char *what) {
  const json &v = field(obj, path, key);
  if (!v.is_array())
    fail(join(path, key), std::string("expected an array of ") + what);
  return v;
}

std::vector<int64_t> getShape(const json &obj, const std::string &path,
                              const std::string &key) {
  const json &v = getArray(obj, path, key, "integers");
  std::vector<int64_t> shape;
  for (const json &d : v) {
    if (!d.is_number_integer())
      fail(join(path, key), "expected an array of integers");
    if (d.get<int64_t>() < 0)
      fail(join(path, key), "negative dimension " + d.dump());
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

int64_t numelOf(const std::vector<int64_t> &shape, const std::string &path) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      fail(path, "too many elements");
    n *= d;
  }
  return n;
}

/// Number of arguments of each torch.nn.init kind (FSDP_InitAttr).
const std::map<std::string, size_t> &initArity() {
  static const std::map<std::string, size_t> arity = {
      {"zeros", 0},          {"ones", 0},          {"constant", 1},
      {"normal", 2},         {"uniform", 2},       {"trunc_normal", 4},
      {"xavier_uniform", 1}, {"xavier_normal", 1}, {"kaiming_uniform", 1},
      {"kaiming_normal", 1}};
  return arity;
}

InitSpec parseInit(const json &obj, const std::string &path, const char *key) {
  const json &v = field(obj, path, key);
  std::string p = join(path, key);
  checkKeys(v, "init", p);
  if (!v.is_object())
    fail(p, "expected an object {\"kind\", \"args\"}");
  InitSpec init;
  init.kind = getString(v, p, keys::init_kind);
  for (const json &a : getArray(v, p, keys::init_args, "numbers")) {
    if (!a.is_number())
      fail(join(p, keys::init_args), "expected an array of numbers");
    init.args.push_back(a.get<double>());
  }
  auto it = initArity().find(init.kind);
  if (it == initArity().end())
    fail(join(p, keys::init_kind), "unknown initializer '" + init.kind + "'");
  if (init.args.size() != it->second)
    fail(join(p, keys::init_args),
         init.kind + " takes " + std::to_string(it->second) +
             " arguments, got " + std::to_string(init.args.size()));
  return init;
}

/// dtypeBytes, the error naming the field at `path`.
int64_t fieldDtypeBytes(const std::string &dtype, const std::string &path) {
  try {
    return dtypeBytes(dtype);
  } catch (const std::runtime_error &) {
    fail(path, "unknown dtype '" + dtype + "'");
  }
}

/// Checks that [offset, offset + bytes) lies in the persistent buffer (or
/// the buffer whose size the key `limit` gives).
void checkExtent(int64_t offset, int64_t bytes, int64_t limitBytes,
                 const std::string &path,
                 const char *limit = "persistent_bytes") {
  if (offset < 0)
    fail(path, "negative offset " + std::to_string(offset));
  if (bytes > limitBytes || offset > limitBytes - bytes)
    fail(path, "bytes [" + std::to_string(offset) + ", " +
                   std::to_string(offset + bytes) + ") exceed " + limit + " " +
                   std::to_string(limitBytes));
}

ParamInfo parseParam(const json &v, const std::string &path) {
  if (!v.is_object())
    fail(path, "expected an object");
  checkKeys(v, "param", path);
  ParamInfo p;
  p.name = getString(v, path, keys::param_name);
  p.shape = getShape(v, path, keys::param_shape);
  p.flatOffset = getInt(v, path, keys::param_flat_offset);
  p.init = parseInit(v, path, keys::param_init);
  return p;
}

/// Params must lie inside the flat parameter and not overlap each other.
void checkParamLayout(const UnitInfo &u, const std::string &path) {
  std::vector<std::pair<int64_t, size_t>> byOffset;
  for (size_t i = 0; i < u.params.size(); ++i) {
    const ParamInfo &p = u.params[i];
    std::string pp = at(join(path, "params"), i);
    int64_t numel = numelOf(p.shape, join(pp, "shape"));
    if (p.flatOffset < 0 || p.flatOffset > u.flatNumel - numel)
      fail(join(pp, "flat_offset"),
           "'" + p.name + "' (" + std::to_string(numel) + " elements at " +
               std::to_string(p.flatOffset) + ") does not fit in flat_numel " +
               std::to_string(u.flatNumel));
    byOffset.push_back({p.flatOffset, i});
  }
  std::sort(byOffset.begin(), byOffset.end());
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const ParamInfo &prev = u.params[byOffset[i - 1].second];
    const ParamInfo &cur = u.params[byOffset[i].second];
    if (prev.flatOffset + numelOf(prev.shape, path) > cur.flatOffset)
      fail(join(path, "params"),
           "'" + prev.name + "' and '" + cur.name + "' overlap");
  }
}

void checkShardSizes(const Program &prog, const UnitInfo &u,
                     const std::string &path) {
  if (u.flatNumel < 0 || u.paddedNumel < u.flatNumel)
    fail(join(path, "padded_numel"), std::to_string(u.paddedNumel) +
                                         " is less than flat_numel " +
                                         std::to_string(u.flatNumel));
  // Whole on every rank: nothing is sharded, the unit is rank-local, or an
  // eval step keeps it whole across steps (fsdp.keep_weights_whole: laid
  // out as at no-shard, beside sharded units).
  bool whole = prog.shard == 1 || u.rankLocal ||
               (prog.mode == "eval" && u.shardNumel == u.paddedNumel);
  if (whole) {
    if (u.shardNumel != u.paddedNumel)
      fail(join(path, "shard_numel"),
           std::to_string(u.shardNumel) + " must equal padded_numel " +
               std::to_string(u.paddedNumel) + " when nothing is sharded");
    return;
  }
  if (u.paddedNumel % prog.shard != 0)
    fail(join(path, "padded_numel"), std::to_string(u.paddedNumel) +
                                         " is not a multiple of shard " +
                                         std::to_string(prog.shard));
  if (u.shardNumel * prog.shard != u.paddedNumel)
    fail(join(path, "shard_numel"), std::to_string(u.shardNumel) + " x shard " +
                                        std::to_string(prog.shard) +
                                        " != padded_numel " +
                                        std::to_string(u.paddedNumel));
}

UnitInfo parseUnit(const json &v, const Program &prog,
                   const std::string &path) {
  if (!v.is_object())
    fail(path, "expected an object");
  checkKeys(v, "unit", path);
  UnitInfo u;
  u.name = getString(v, path, keys::unit_name);
  u.dtype = getString(v, path, keys::unit_dtype);
  if (u.dtype != "f32")
    fail(join(path, keys::unit_dtype),
         "master shards must be f32, got '" + u.dtype + "'");
  u.offset = getInt(v, path, keys::unit_offset);
  u.flatNumel = getInt(v, path, keys::unit_flat_numel);
  u.paddedNumel = getInt(v, path, keys::unit_padded_numel);
  u.shardNumel = getInt(v, path, keys::unit_shard_numel);
  u.rankLocal = getBoolOr(v, path, keys::unit_rank_local, false);
  u.frozen = getBoolOr(v, path, keys::unit_frozen, false);
  u.ignored = getBoolOr(v, path, keys::unit_ignored, false);
  if (u.ignored && !u.rankLocal)
    fail(join(path, keys::unit_ignored),
         "an ignored unit is whole on every rank: it needs rank_local");
  checkShardSizes(prog, u, path);
  // Shards and state: in the host buffer with CPU offload.
  int64_t stateBytes = prog.cpuOffload ? prog.hostBytes : prog.persistentBytes;
  const char *limit = prog.cpuOffload ? "host_bytes" : "persistent_bytes";
  int64_t imageBase = prog.cpuOffload ? prog.persistentBytes : 0;
  checkExtent(u.offset, u.shardNumel * 4, stateBytes,
              join(path, keys::unit_offset), limit);
  u.offset += imageBase;

  const json &params = getArray(v, path, keys::unit_params, "objects");
  for (size_t i = 0; i < params.size(); ++i)
    u.params.push_back(
        parseParam(params[i], at(join(path, keys::unit_params), i)));
  checkParamLayout(u, path);

  const json &state = getArray(v, path, keys::unit_state, "objects");
  for (size_t i = 0; i < state.size(); ++i) {
    std::string sp = at(join(path, keys::unit_state), i);
    if (!state[i].is_object())
      fail(sp, "expected an object");
    checkKeys(state[i], "state", sp);
    StateInfo s;
    s.name = getString(state[i], sp, keys::unit_name);
    s.offset = getInt(state[i], sp, keys::unit_offset);
    s.whole = getBoolOr(state[i], sp, keys::state_whole, false);
    s.numel = s.whole ? getInt(state[i], sp, keys::state_numel) : u.shardNumel;
    if (!s.whole && state[i].contains(keys::state_numel) &&
        getInt(state[i], sp, keys::state_numel) != u.shardNumel)
      fail(join(sp, keys::state_numel),
           "a sharded state has the shard's numel " +
               std::to_string(u.shardNumel));
    if (s.numel < 0)
      fail(join(sp, keys::state_numel), "must be >= 0");
    checkExtent(s.offset, s.numel * 4, stateBytes, join(sp, keys::unit_offset),
                limit);
    s.offset += imageBase;
    u.state.push_back(s);
  }
  if (u.frozen && !u.state.empty())
    fail(join(path, keys::unit_state),
         "a frozen unit is never updated and has no "
         "optimizer state");
  return u;
}

/// A tensor of `shape` and `dtype` at `offset` lies in the persistent
/// buffer (the entry at `path`).
void checkTensorExtent(const std::vector<int64_t> &shape,
                       const std::string &dtype, int64_t offset,
                       const Program &prog, const std::string &path) {
  int64_t bytes = numelOf(shape, join(path, "shape")) *
                  fieldDtypeBytes(dtype, join(path, "dtype"));
  checkExtent(offset, bytes, prog.persistentBytes, join(path, "offset"));
}

/// `microBatch` is one of the program's micro-batches.
void checkMicroBatch(int64_t microBatch, const Program &prog,
                     const std::string &path) {
  if (microBatch < 0 || microBatch >= prog.microBatches)
    fail(join(path, "micro_batch"),
         std::to_string(microBatch) + " is not in [0, micro_batches " +
             std::to_string(prog.microBatches) + ")");
}

BufferInfo parseBuffer(const json &v, const Program &prog,
                       const std::string &path) {
  if (!v.is_object())
    fail(path, "expected an object");
  checkKeys(v, "buffer", path);
  BufferInfo b;
  b.name = getString(v, path, keys::buffer_name);
  b.shape = getShape(v, path, keys::buffer_shape);
  b.dtype = getString(v, path, keys::buffer_dtype);
  b.offset = getInt(v, path, keys::buffer_offset);
  b.init = parseInit(v, path, keys::buffer_init);
  checkTensorExtent(b.shape, b.dtype, b.offset, prog, path);
  return b;
}

InputInfo parseInput(const json &v, const Program &prog,
                     const std::string &path) {
  if (!v.is_object())
    fail(path, "expected an object");
  checkKeys(v, "input", path);
  InputInfo in;
  in.index = getInt(v, path, keys::input_index);
  in.microBatch = getInt(v, path, keys::input_micro_batch);
  in.shape = getShape(v, path, keys::input_shape);
  in.dtype = getString(v, path, keys::input_dtype);
  in.offset = getInt(v, path, keys::input_offset);
  in.maxId = getInt(v, path, keys::input_max_id);
  if (v.contains(keys::input_ignore_id))
    in.ignoreId = getInt(v, path, keys::input_ignore_id);
  if (in.index < 0)
    fail(join(path, keys::input_index), "negative index");
  checkMicroBatch(in.microBatch, prog, path);
  if (in.shape.empty())
    fail(join(path, keys::input_shape),
         "an input needs a leading batch dimension");
  checkTensorExtent(in.shape, in.dtype, in.offset, prog, path);
  return in;
}

OutputInfo parseOutput(const json &v, const Program &prog,
                       const std::string &path) {
  if (!v.is_object())
    fail(path, "expected an object");
  checkKeys(v, "output", path);
  OutputInfo out;
  out.name = getString(v, path, keys::output_name);
  out.microBatch = getInt(v, path, keys::output_micro_batch);
  out.shape = getShape(v, path, keys::output_shape);
  out.dtype = getString(v, path, keys::output_dtype);
  out.offset = getInt(v, path, keys::output_offset);
  if (prog.mode != "eval")
    fail(path, "only an eval program returns outputs");
  checkMicroBatch(out.microBatch, prog, path);
  if (prog.output(out.name, out.microBatch))
    fail(join(path, keys::output_name),
         "output '" + out.name + "' of micro-batch " +
             std::to_string(out.microBatch) + " is given twice");
  checkTensorExtent(out.shape, out.dtype, out.offset, prog, path);
  return out;
}

/// Every (index, micro-batch) pair once, every index in every micro-batch,
/// one batch size for all.
void checkInputSet(const Program &prog) {
  if (prog.inputs.empty())
    fail("inputs", "the step has no inputs");
  std::map<int64_t, std::vector<int64_t>> seen;
  for (size_t i = 0; i < prog.inputs.size(); ++i) {
    const InputInfo &in = prog.inputs[i];
    if (in.shape[0] != prog.inputs[0].shape[0])
      fail(at("inputs", i) + ".shape",
           "batch size " + std::to_string(in.shape[0]) + " differs from " +
               std::to_string(prog.inputs[0].shape[0]) + " of inputs[0]");
    std::vector<int64_t> &mbs = seen[in.index];
    if (std::find(mbs.begin(), mbs.end(), in.microBatch) != mbs.end())
      fail(at("inputs", i),
           "input " + std::to_string(in.index) + " of micro-batch " +
               std::to_string(in.microBatch) + " appears twice");
    mbs.push_back(in.microBatch);
  }
  for (const auto &[index, mbs] : seen)
    if (static_cast<int64_t>(mbs.size()) != prog.microBatches)
      fail("inputs", "input " + std::to_string(index) + " is given for " +
                         std::to_string(mbs.size()) + " of " +
                         std::to_string(prog.microBatches) + " micro-batches");
}

/// Checkpoints name tensors by parameter, buffer and unit name.
void checkUniqueNames(const Program &prog) {
  std::map<std::string, std::string> owner;
  auto claim = [&](const std::string &name, const std::string &path) {
    auto [it, fresh] = owner.emplace(name, path);
    if (!fresh)
      fail(path, "name '" + name + "' is also used by " + it->second);
  };
  for (size_t u = 0; u < prog.units.size(); ++u) {
    for (size_t p = 0; p < prog.units[u].params.size(); ++p)
      claim(prog.units[u].params[p].name, at(at("units", u) + ".params", p));
  }
  for (size_t b = 0; b < prog.buffers.size(); ++b)
    claim(prog.buffers[b].name, at("buffers", b));
  std::map<std::string, size_t> units;
  for (size_t u = 0; u < prog.units.size(); ++u) {
    // A unit may have one trainable and one frozen flat parameter.
    auto [it, fresh] = units.emplace(
        prog.units[u].name + (prog.units[u].frozen ? " (frozen)" : ""), u);
    if (!fresh)
      fail(at("units", u) + ".name", "unit '" + prog.units[u].name +
                                         "' is also " +
                                         at("units", it->second));
  }
}

void parseMesh(const json &root, Program &prog) {
  prog.worldSize = getSmallInt(root, "", keys::program_world_size);
  prog.replicate = getSmallInt(root, "", keys::program_replicate);
  prog.shard = getSmallInt(root, "", keys::program_shard);
  prog.microBatches = getSmallInt(root, "", keys::program_micro_batches);
  if (prog.worldSize < 1 || prog.replicate < 1 || prog.shard < 1)
    fail(keys::program_world_size,
         "world_size, replicate and shard must be positive");
  if (static_cast<int64_t>(prog.replicate) * prog.shard != prog.worldSize)
    fail(keys::program_world_size,
         "replicate " + std::to_string(prog.replicate) + " x shard " +
             std::to_string(prog.shard) + " != world_size " +
             std::to_string(prog.worldSize));
  if (prog.microBatches < 1)
    fail(keys::program_micro_batches, "must be positive");
  if (root.contains(keys::program_post_forward_group)) {
    prog.postForwardGroup =
        getSmallInt(root, "", keys::program_post_forward_group);
    if (prog.postForwardGroup < 2 || prog.shard % prog.postForwardGroup != 0)
      fail(keys::program_post_forward_group,
           "must be > 1 and divide shard " + std::to_string(prog.shard));
  }
}

/// "lr" and the optional "lr_schedule" {kind, warmup_steps, decay_steps,
/// min_lr_ratio} (absent: constant).
void parseLearningRate(const json &root, Program &prog) {
  if (root.contains(keys::program_lr))
    prog.lr = getNumber(root, "", keys::program_lr);
  if (!root.contains(keys::program_lr_schedule))
    return;
  const json &s = root[keys::program_lr_schedule];
  if (!s.is_object())
    fail(keys::program_lr_schedule, "expected an object");
  checkKeys(s, "lr_schedule", keys::program_lr_schedule);
  rt::LrSchedule &schedule = prog.lrSchedule;
  schedule.kind =
      getString(s, keys::program_lr_schedule, keys::lr_schedule_kind);
  schedule.warmupSteps =
      getInt(s, keys::program_lr_schedule, keys::lr_schedule_warmup_steps);
  schedule.decaySteps =
      getInt(s, keys::program_lr_schedule, keys::lr_schedule_decay_steps);
  schedule.minLrRatio =
      getNumber(s, keys::program_lr_schedule, keys::lr_schedule_min_lr_ratio);
  std::string why = schedule.invalidBecause();
  if (!why.empty())
    fail(keys::program_lr_schedule, why);
}

/// The offset of a 4-byte scalar the step returns, held in the optional
/// object `key` as `member`; -1 without the object.
int64_t optionalScalarOffset(const json &root, const Program &prog,
                             const std::string &key,
                             const std::string &member) {
  if (!root.contains(key))
    return -1;
  const json &object = root[key];
  if (!object.is_object())
    fail(key, "expected an object {\"" + member + "\"}");
  checkKeys(object, key.c_str(), key);
  int64_t offset = getInt(object, key, member);
  checkExtent(offset, 4, prog.persistentBytes, key + "." + member);
  return offset;
}

void parseLoss(const json &root, Program &prog) {
  const json &loss = field(root, "", keys::program_loss);
  if (!loss.is_object())
    fail("loss", "expected an object {\"offset\", \"dtype\"}");
  checkKeys(loss, "loss", keys::program_loss);
  prog.lossOffset = getInt(loss, "loss", keys::loss_offset);
  prog.lossDtype = getString(loss, "loss", keys::loss_dtype);
  checkExtent(prog.lossOffset, fieldDtypeBytes(prog.lossDtype, "loss.dtype"),
              prog.persistentBytes, "loss.offset");
  // Optional: steps that clip gradients also return the total norm (f32),
  // and steps with dynamic loss scaling the found-inf flag (f32).
  prog.gradNormOffset = optionalScalarOffset(
      root, prog, keys::program_grad_norm, keys::grad_norm_offset);
  prog.foundInfOffset = optionalScalarOffset(
      root, prog, keys::program_loss_scale, keys::loss_scale_found_inf_offset);
}

} // namespace

rt::DType dtypeOf(const std::string &dtype) {
  std::string upper = dtype;
  for (char &c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::optional<rt::DType> t = rt::dtypeFromName(upper);
  if (!t)
    throw std::runtime_error("unknown dtype '" + dtype + "'");
  return *t;
}

int64_t dtypeBytes(const std::string &dtype) {
  return rt::dtypeSize(dtypeOf(dtype));
}

int64_t tensorBytes(const std::vector<int64_t> &shape,
                    const std::string &dtype) {
  int64_t bytes = dtypeBytes(dtype);
  for (int64_t d : shape)
    bytes *= d;
  return bytes;
}

int64_t arenaAligned(int64_t bytes) {
  return (bytes + FSDPRT_ARENA_ALIGNMENT - 1) / FSDPRT_ARENA_ALIGNMENT *
         FSDPRT_ARENA_ALIGNMENT;
}

int64_t Program::batchPerRank() const {
  return inputs.empty() ? 0 : inputs.front().shape.front();
}

const OutputInfo *Program::output(const std::string &name,
                                  int64_t microBatch) const {
  for (const OutputInfo &out : outputs)
    if (out.name == name && out.microBatch == microBatch)
      return &out;
  return nullptr;
}

Program parseProgram(const std::string &text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error &e) {
    throw std::runtime_error(std::string("program: invalid JSON: ") + e.what());
  }
  if (!root.is_object())
    fail("<root>", "expected a JSON object");

  Program prog;
  checkKeys(root, "program", "");
  prog.model = getString(root, "", keys::program_model);
  prog.entry = getString(root, "", keys::program_entry);
  parseMesh(root, prog);
  if (root.contains(keys::program_mode)) {
    prog.mode = getString(root, "", keys::program_mode);
    if (prog.mode != "train" && prog.mode != "eval")
      fail(keys::program_mode,
           "expected train or eval, got '" + prog.mode + "'");
  }
  prog.optimizer = getString(root, "", keys::program_optimizer);
  parseLearningRate(root, prog);
  prog.persistentBytes = getInt(root, "", keys::program_persistent_bytes);
  prog.arenaBytes = getInt(root, "", keys::program_arena_bytes);
  prog.estimateBytes = getInt(root, "", keys::program_estimate_bytes);
  prog.report = getString(root, "", keys::program_report);
  if (prog.persistentBytes < 0 || prog.arenaBytes < prog.persistentBytes)
    fail(keys::program_arena_bytes, std::to_string(prog.arenaBytes) +
                                        " cannot hold persistent_bytes " +
                                        std::to_string(prog.persistentBytes));
  if (root.contains(keys::program_cpu_offload)) {
    if (!root[keys::program_cpu_offload].is_boolean())
      fail(keys::program_cpu_offload, "expected true or false");
    prog.cpuOffload = root[keys::program_cpu_offload].get<bool>();
    prog.hostBytes = getInt(root, "", keys::program_host_bytes);
    if (prog.hostBytes < 0 || (prog.cpuOffload && prog.hostBytes == 0))
      fail(keys::program_host_bytes,
           "a program offloading to the CPU needs a positive "
           "host buffer, got " +
               std::to_string(prog.hostBytes));
  }

  const json &units = getArray(root, "", keys::program_units, "objects");
  for (size_t i = 0; i < units.size(); ++i)
    prog.units.push_back(parseUnit(units[i], prog, at(keys::program_units, i)));
  const json &buffers = getArray(root, "", keys::program_buffers, "objects");
  for (size_t i = 0; i < buffers.size(); ++i)
    prog.buffers.push_back(
        parseBuffer(buffers[i], prog, at(keys::program_buffers, i)));
  const json &inputs = getArray(root, "", keys::program_inputs, "objects");
  for (size_t i = 0; i < inputs.size(); ++i)
    prog.inputs.push_back(
        parseInput(inputs[i], prog, at(keys::program_inputs, i)));
  checkUniqueNames(prog);
  checkInputSet(prog);
  if (prog.mode == "eval")
    for (size_t i = 0; i < prog.units.size(); ++i)
      if (!prog.units[i].frozen)
        fail(at(keys::program_units, i) + ".frozen",
             "an eval program updates no parameter: every unit is frozen");
  parseLoss(root, prog);
  if (root.contains(keys::program_outputs)) {
    const json &outputs = getArray(root, "", keys::program_outputs, "objects");
    for (size_t i = 0; i < outputs.size(); ++i)
      prog.outputs.push_back(
          parseOutput(outputs[i], prog, at(keys::program_outputs, i)));
  }
  return prog;
}

BufferRef locate(const Program &p, const StateBuffers &buffers,
                 int64_t imageOffset) {
  if (imageOffset < p.persistentBytes)
    return {buffers.persistent, imageOffset};
  return {buffers.host, imageOffset - p.persistentBytes};
}

} // namespace driver
} // namespace fsdp
