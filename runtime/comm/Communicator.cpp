//===- Communicator.cpp - Checks, error wrapping and groups ---------------===//
//
// The checks and the error wording live here, once, so that every backend
// reports a failure the same way: which collective, which group, which rank.
// So does the issue order (see Comm.h): with requiresIssueOrder(), the
// collective of tag t issues only after tags 0..t-1 were issued or given up,
// and alone; the turn passes on when the backend calls issued(), or when
// run* returns or throws, or when the collective fails its checks.
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/Comm.h"
#include "fsdp/rt/Mesh.h"

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

/// One collective's place in the issue order. acquire() waits for it; the
/// destructor passes it on whatever happened since (issued, failed its
/// checks, threw, or the communicator had failed).
class Communicator::IssueTurn {
public:
  enum class Result { Ready, Failed, TimedOut };

  IssueTurn(Communicator &comm, uint32_t tag)
      : comm_(comm), tag_(tag), ordered_(comm.requiresIssueOrder()) {}
  ~IssueTurn() {
    if (ordered_)
      comm_.endTurn(tag_, held_);
  }
  IssueTurn(const IssueTurn &) = delete;
  IssueTurn &operator=(const IssueTurn &) = delete;

  /// Ready: this thread holds the turn (or no order is needed). Failed: the
  /// communicator failed earlier; `detail` is its first error. TimedOut:
  /// `detail` names the tag that kept this one waiting.
  Result acquire(std::string &detail) {
    Communicator &c = comm_;
    std::unique_lock<std::mutex> lock(c.mutex_);
    if (ordered_) {
      auto behind = [&] {
        return static_cast<int32_t>(tag_ - c.nextTurn_) < 0;
      };
      std::chrono::milliseconds timeout = c.timeout();
      bool ready = c.turnChanged_.wait_for(lock, timeout, [&] {
        return !c.firstError_.empty() || behind() ||
               (tag_ == c.nextTurn_ && !c.turnTaken_);
      });
      if (c.firstError_.empty() && behind())
        fail(Status::InvalidArgument, "issue tag ", tag_,
             " was already used on group '", c.spec_.name,
             "' (each tag from nextTag() is used once)");
      if (c.firstError_.empty() && !ready) {
        std::ostringstream os;
        os << "waited " << timeout.count() << " ms for its turn to issue (tag "
           << tag_ << "): tag " << c.nextTurn_
           << (c.turnTaken_ ? " is still being issued"
                            : " has not been issued on this rank")
           << "; collectives on one communicator issue in tag order";
        detail = os.str();
        return Result::TimedOut;
      }
    }
    if (!c.firstError_.empty()) {
      detail = c.firstError_;
      return Result::Failed;
    }
    if (ordered_) {
      c.turnTaken_ = true;
      c.turnHolder_ = std::this_thread::get_id();
      held_ = true;
    }
    return Result::Ready;
  }

private:
  Communicator &comm_;
  uint32_t tag_;
  bool ordered_;
  bool held_ = false;
};

void Communicator::advanceTurnLocked() {
  ++nextTurn_;
  while (givenUp_.erase(nextTurn_))
    ++nextTurn_;
}

void Communicator::endTurn(uint32_t tag, bool held) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (held) {
      // issued() may have passed the turn on already.
      if (!turnTaken_ || nextTurn_ != tag ||
          turnHolder_ != std::this_thread::get_id())
        return;
      turnTaken_ = false;
      advanceTurnLocked();
    } else {
      int32_t ahead = static_cast<int32_t>(tag - nextTurn_);
      if (ahead == 0 && !turnTaken_)
        advanceTurnLocked();
      else if (ahead > 0)
        givenUp_.insert(tag);
      else
        return; // already passed over, or held by a duplicate of the tag
    }
  }
  turnChanged_.notify_all();
}

void Communicator::issued() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!turnTaken_ || turnHolder_ != std::this_thread::get_id())
      return;
    turnTaken_ = false;
    advanceTurnLocked();
  }
  turnChanged_.notify_all();
}

void Communicator::recordFailure(const std::string &message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (firstError_.empty())
      firstError_ = message;
  }
  // Collectives waiting for their turn fail now, not at their timeout.
  turnChanged_.notify_all();
}

std::string Communicator::failedOnRank(const std::string &collective,
                                       const std::string &why) const {
  std::ostringstream os;
  os << collective << " on group '" << spec_.name << "' (" << size()
     << " ranks) failed on rank " << rank_ << " (global rank " << globalRank()
     << "): " << why;
  return os.str();
}

void Communicator::abort(const std::string &why) {
  recordFailure(why);
  abortBackend();
}

void Communicator::skipTag(uint32_t tag, const char *collective,
                           const std::string &why) {
  if (!requiresIssueOrder())
    return; // nothing waits for tags; the peers time out in this one
  std::ostringstream os;
  os << collective << " (issue tag " << tag << ") on group '" << spec_.name
     << "' was never issued on rank " << rank_ << " (global rank "
     << globalRank() << "): " << why
     << "; later collectives cannot be issued in the order the other ranks "
        "use";
  recordFailure(os.str());
  endTurn(tag, /*held=*/false);
}

template <typename Check, typename Body>
void Communicator::guard(const char *collective, uint32_t tag, Check &&check,
                         Body &&body) {
  IssueTurn turn(*this, tag);
  check(); // argument errors give the turn up and leave the communicator usable
  std::string detail;
  IssueTurn::Result result = turn.acquire(detail);
  if (result == IssueTurn::Result::Failed)
    fail(Status::IO, collective, " on group '", spec_.name,
         "': the communicator is unusable after an earlier failure: ", detail);
  try {
    if (result == IssueTurn::Result::TimedOut)
      fail(Status::IO, detail);
    body();
  } catch (const Error &e) {
    if (e.status() != Status::IO && e.status() != Status::Internal)
      throw; // argument errors leave the communicator usable
    std::string message = failedOnRank(collective, e.what());
    recordFailure(message);
    throw Error(Status::IO, message);
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
                             uint32_t tag, void *queue) {
  guard(
      "all_gather", tag,
      [&] {
        checkFloat(dt, "all_gather");
        checkNumel(numel, "all_gather");
      },
      [&] { runAllGather(dt, in, out, numel, tag, queue); });
}

void Communicator::reduceScatter(DType dt, const void *in, void *out,
                                 int64_t numel, CommReduceOp op,
                                 double preDivide, double postDivide) {
  reduceScatter(dt, in, out, numel, op, preDivide, postDivide, nextTag());
}

void Communicator::reduceScatter(DType dt, const void *in, void *out,
                                 int64_t numel, CommReduceOp op,
                                 double preDivide, double postDivide,
                                 uint32_t tag, void *queue) {
  guard(
      "reduce_scatter", tag,
      [&] {
        checkFloat(dt, "reduce_scatter");
        checkNumel(numel, "reduce_scatter");
        if (op != CommReduceOp::Sum && op != CommReduceOp::Avg)
          fail(Status::InvalidArgument,
               "reduce_scatter: op must be sum or avg, got ",
               commReduceOpName(op));
        checkFactor(preDivide, "pre_divide");
        checkFactor(postDivide, "post_divide");
      },
      [&] {
        runReduceScatter(dt, in, out, numel, op, preDivide, postDivide, tag,
                         queue);
      });
}

void Communicator::allReduce(DType dt, const void *in, void *out, int64_t numel,
                             CommReduceOp op) {
  allReduce(dt, in, out, numel, op, nextTag());
}

void Communicator::allReduce(DType dt, const void *in, void *out, int64_t numel,
                             CommReduceOp op, uint32_t tag, void *queue) {
  guard(
      "all_reduce", tag,
      [&] {
        checkFloat(dt, "all_reduce");
        checkNumel(numel, "all_reduce");
      },
      [&] { runAllReduce(dt, in, out, numel, op, tag, queue); });
}

void Communicator::broadcast(void *buf, int64_t bytes, int32_t root) {
  broadcast(buf, bytes, root, nextTag());
}

void Communicator::broadcast(void *buf, int64_t bytes, int32_t root,
                             uint32_t tag, void *queue) {
  guard(
      "broadcast", tag,
      [&] {
        checkNumel(bytes, "broadcast");
        if (root < 0 || root >= size())
          fail(Status::InvalidArgument, "broadcast: root ", root,
               " is not a rank of group '", spec_.name, "' of ", size(),
               " ranks");
      },
      [&] { runBroadcast(buf, bytes, root, tag, queue); });
}

void Communicator::barrier() { barrier(nextTag()); }

void Communicator::barrier(uint32_t tag, void *queue) {
  guard(
      "barrier", tag, [] {}, [&] { runBarrier(tag, queue); });
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
  Mesh mesh{replicate, shard};
  int32_t r = mesh.replicaIndex(world.rank()),
          s = mesh.shardIndex(world.rank());
  GroupSpec shardSpec{"shard" + std::to_string(r), {}};
  for (int32_t j = 0; j < shard; ++j)
    shardSpec.ranks.push_back(mesh.rankOf(r, j));
  GroupSpec replicateSpec{"replicate" + std::to_string(s), {}};
  for (int32_t i = 0; i < replicate; ++i)
    replicateSpec.ranks.push_back(mesh.rankOf(i, s));
  MeshGroups groups;
  groups.shard = world.createGroup(shardSpec);
  groups.replicate = world.createGroup(replicateSpec);
  return groups;
}

} // namespace rt
} // namespace fsdp
