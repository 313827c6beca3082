//===- Communicator.cpp - Checks, error wrapping and groups ---------------===//
//
// The checks and the error wording live here, once, so that every backend
// reports a failure the same way: which collective, which group, which rank.
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/Comm.h"

#include "fsdp/rt/Error.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace fsdp {
namespace rt {

const char *commReduceOpName(CommReduceOp op) {
  switch (op) {
  case CommReduceOp::Sum:
    return "sum";
  case CommReduceOp::Avg:
    return "avg";
  case CommReduceOp::Max:
    return "max";
  }
  return "?";
}

ShardRange shardRange(int64_t numel, int32_t groupSize, int32_t index) {
  if (numel < 0 || groupSize < 1 || index < 0 || index >= groupSize)
    fail(Status::InvalidArgument, "shard ", index, " of ", numel,
         " elements over ", groupSize, " ranks is not defined");
  int64_t chunk = (numel + groupSize - 1) / groupSize;
  int64_t begin = std::min(numel, chunk * index);
  int64_t end = std::min(numel, begin + chunk);
  return ShardRange{begin, end - begin};
}

Communicator::Communicator(const CommSetup &setup)
    : spec_(setup.group), store_(setup.store), launch_(setup.launch),
      options_(setup.options), timeout_(setup.options.collectiveTimeout) {
  rank_ = -1;
  for (size_t i = 0; i < spec_.ranks.size(); ++i)
    if (spec_.ranks[i] == setup.globalRank)
      rank_ = static_cast<int32_t>(i);
  if (rank_ < 0)
    fail(Status::InvalidArgument, "rank ", setup.globalRank,
         " is not a member of group '", spec_.name, "'");
}

Communicator::~Communicator() = default;

void Communicator::setTimeout(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    fail(Status::InvalidArgument, "collective timeout must be positive, got ",
         timeout.count(), " ms");
  timeout_ = timeout;
}

template <typename F>
void Communicator::guard(const char *collective, F &&body) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!firstError_.empty())
      fail(Status::IO, collective, " on group '", spec_.name,
           "': the communicator is unusable after an earlier failure: ",
           firstError_);
  }
  try {
    body();
  } catch (const Error &e) {
    if (e.status() != Status::IO && e.status() != Status::Internal)
      throw; // argument errors leave the communicator usable
    std::ostringstream os;
    os << collective << " on group '" << spec_.name << "' (" << size()
       << " ranks) failed on rank " << rank_ << " (global rank " << globalRank()
       << "): " << e.what();
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (firstError_.empty())
      firstError_ = os.str();
    throw Error(Status::IO, os.str());
  }
}

static void checkFloat(DType dt, const char *collective) {
  if (!isFloat(dt))
    fail(Status::InvalidArgument, collective,
         ": dtype must be f32, bf16 or f16, got ", dtypeName(dt));
}

static void checkNumel(int64_t numel, const char *collective) {
  if (numel < 0)
    fail(Status::InvalidArgument, collective,
         ": numel must be non-negative, got ", numel);
}

static void checkFactor(double f, const char *what) {
  if (!(f > 0.0) || f == HUGE_VAL)
    fail(Status::InvalidArgument, "reduce_scatter: ", what,
         " must be a positive finite number, got ", f);
}

void Communicator::allGather(DType dt, const void *in, void *out,
                             int64_t numel) {
  allGather(dt, in, out, numel, nextTag());
}

void Communicator::allGather(DType dt, const void *in, void *out, int64_t numel,
                             uint32_t tag) {
  checkFloat(dt, "all_gather");
  checkNumel(numel, "all_gather");
  guard("all_gather", [&] { runAllGather(dt, in, out, numel, tag); });
}

void Communicator::reduceScatter(DType dt, const void *in, void *out,
                                 int64_t numel, CommReduceOp op,
                                 double preDivide, double postDivide) {
  reduceScatter(dt, in, out, numel, op, preDivide, postDivide, nextTag());
}

void Communicator::reduceScatter(DType dt, const void *in, void *out,
                                 int64_t numel, CommReduceOp op,
                                 double preDivide, double postDivide,
                                 uint32_t tag) {
  checkFloat(dt, "reduce_scatter");
  checkNumel(numel, "reduce_scatter");
  if (op != CommReduceOp::Sum && op != CommReduceOp::Avg)
    fail(Status::InvalidArgument, "reduce_scatter: op must be sum or avg, got ",
         commReduceOpName(op));
  checkFactor(preDivide, "pre_divide");
  checkFactor(postDivide, "post_divide");
  guard("reduce_scatter", [&] {
    runReduceScatter(dt, in, out, numel, op, preDivide, postDivide, tag);
  });
}

void Communicator::allReduce(DType dt, const void *in, void *out, int64_t numel,
                             CommReduceOp op) {
  allReduce(dt, in, out, numel, op, nextTag());
}

void Communicator::allReduce(DType dt, const void *in, void *out, int64_t numel,
                             CommReduceOp op, uint32_t tag) {
  checkFloat(dt, "all_reduce");
  checkNumel(numel, "all_reduce");
  guard("all_reduce", [&] { runAllReduce(dt, in, out, numel, op, tag); });
}

void Communicator::broadcast(void *buf, int64_t bytes, int32_t root) {
  broadcast(buf, bytes, root, nextTag());
}

void Communicator::broadcast(void *buf, int64_t bytes, int32_t root,
                             uint32_t tag) {
  checkNumel(bytes, "broadcast");
  if (root < 0 || root >= size())
    fail(Status::InvalidArgument, "broadcast: root ", root,
         " is not a rank of group '", spec_.name, "' of ", size(), " ranks");
  guard("broadcast", [&] { runBroadcast(buf, bytes, root, tag); });
}

void Communicator::barrier() { barrier(nextTag()); }

void Communicator::barrier(uint32_t tag) {
  guard("barrier", [&] { runBarrier(tag); });
}

std::unique_ptr<Communicator> Communicator::createGroup(const GroupSpec &spec) {
  if (spec.name.empty() || spec.name.find('/') != std::string::npos)
    fail(Status::InvalidArgument, "group name '", spec.name,
         "' must be non-empty and contain no '/'");
  std::vector<bool> seen(size(), false);
  bool member = false;
  for (int32_t r : spec.ranks) {
    if (r < 0 || r >= size() || seen[r])
      fail(Status::InvalidArgument, "group '", spec.name, "': rank ", r,
           " is out of range or repeated");
    seen[r] = true;
    member |= r == rank_;
  }
  if (!member)
    fail(Status::InvalidArgument, "group '", spec.name,
         "' does not contain this rank ", rank_);
  // Members of the new group are named by their global ranks; the store
  // namespace includes a per-parent counter so that re-creating a group of
  // the same name never reads the previous group's addresses.
  GroupSpec global{spec.name, {}};
  for (int32_t r : spec.ranks)
    global.ranks.push_back(spec_.ranks[r]);
  std::string prefix =
      spec_.name + "/" + std::to_string(groupCounter_++) + "/" + spec.name;
  CommSetup setup{std::make_shared<PrefixStore>(prefix, store_), global,
                  globalRank(), launch_, options_};
  setup.options.collectiveTimeout = timeout();
  return makeGroup(setup);
}

MeshGroups createMeshGroups(Communicator &world, int32_t replicate,
                            int32_t shard) {
  if (replicate < 1 || shard < 1 ||
      static_cast<int64_t>(replicate) * shard != world.size())
    fail(Status::InvalidArgument, "mesh [", replicate, ", ", shard,
         "] does not cover the ", world.size(), " ranks of group '",
         world.group().name, "'");
  int32_t r = world.rank() / shard, s = world.rank() % shard;
  GroupSpec shardSpec{"shard" + std::to_string(r), {}};
  for (int32_t j = 0; j < shard; ++j)
    shardSpec.ranks.push_back(r * shard + j);
  GroupSpec replicateSpec{"replicate" + std::to_string(s), {}};
  for (int32_t i = 0; i < replicate; ++i)
    replicateSpec.ranks.push_back(i * shard + s);
  MeshGroups groups;
  groups.shard = world.createGroup(shardSpec);
  groups.replicate = world.createGroup(replicateSpec);
  return groups;
}

} // namespace rt
} // namespace fsdp
