//===- Comm.h - Communicators and process groups ----------------*- C++ -*-===//
//
// One interface for every collective backend (Gloo on CPU, NCCL on GPU).
// Backends register by name, so callers never #ifdef. A communicator spans
// one process group: the world, or a sub-group built from a mesh shape
// (hybrid sharding: replicate x shard, global rank = r * shard + s).
//
// Sharded tensors follow torch.chunk: a tensor of numel elements is split
// into chunks of ceil(numel / groupSize) elements; the last chunks may be
// shorter or empty (shardRange). all_gather takes this rank's chunk and
// produces the whole tensor; reduce_scatter takes the whole tensor and
// produces this rank's chunk of the reduction.
//
// Collectives on one communicator must be issued in the same order on every
// rank, as with NCCL. Each gets a tag from that issue order (nextTag(), taken
// in program order). A backend that matches collectives by tag (Gloo) lets
// collectives enqueued on different streams run concurrently; one that
// matches them by launch order and forbids concurrent issue (NCCL:
// requiresIssueOrder()) gets them issued one at a time in tag order, whatever
// thread runs them: a collective waits, at most timeout(), until every
// smaller tag has been issued. A tag must therefore be used exactly once or
// given up with skipTag().
//
// Stream-ordered collectives: a collective given a device queue (a
// cudaStream_t for NCCL) is issued onto it, after the work already there,
// and the call returns once it is issued: its completion is seen through
// the queue (an event recorded there after it), and the host never waits
// for it. A backend whose collectives complete in the call (Gloo, on host
// memory) ignores the queue. Without a queue the call returns once the
// collective is complete.
//
// Failures: a collective that fails or times out throws Error(IO) naming the
// collective, the group, this rank and (where the transport can tell) the
// peer; the communicator is then unusable (like an aborted NCCL comm), and
// every later collective fails at once with the first error. A
// stream-ordered collective fails after its call returned: asyncError()
// says so, and abort() (the context's watchdog calls both, Watchdog.h)
// records the failure and stops the backend's work on the device.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_COMM_H
#define FSDP_RT_COMM_H

#include "fsdp/rt/CommStore.h"
#include "fsdp/rt/DType.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace fsdp {
namespace rt {

enum class CommReduceOp : int32_t {
  Sum = FSDPRT_COMM_SUM,
  Avg = FSDPRT_COMM_AVG,
  Max = FSDPRT_COMM_MAX,
};
const char *commReduceOpName(CommReduceOp op);

struct ShardRange {
  int64_t begin;
  int64_t count;
};
/// torch.chunk's split: chunk `index` of `numel` elements over `groupSize`.
ShardRange shardRange(int64_t numel, int32_t groupSize, int32_t index);

struct CommOptions {
  std::chrono::milliseconds collectiveTimeout{300000};
  std::chrono::milliseconds rendezvousTimeout{60000};
  /// Gloo: address its pairs listen on (default loopback), or an interface
  /// name; set one of them to run across hosts.
  std::string glooHostname = "127.0.0.1";
  std::string glooInterface;
  /// Address rank 0's store binds (default: MASTER_ADDR).
  std::string storeBindAddress;
  /// How long a rank may be silent (no heartbeat through the rendezvous
  /// store) while another waits for a collective with it, before that
  /// rank's watchdog fails the job (stream-ordered communicators only;
  /// Watchdog.h). 0: no heartbeat.
  std::chrono::milliseconds heartbeatTimeout{10000};
  /// The device of the context the communicator serves (its backend's
  /// deviceOrdinal(); fsdprt_comm_init* set it): NCCL runs there, so that
  /// the device is chosen in one place. -1: none.
  int32_t device = -1;

  /// FSDPRT_COLLECTIVE_TIMEOUT_MS, FSDPRT_RENDEZVOUS_TIMEOUT_MS,
  /// FSDPRT_HEARTBEAT_TIMEOUT_MS,
  /// FSDPRT_GLOO_HOSTNAME, FSDPRT_GLOO_IFNAME (or GLOO_SOCKET_IFNAME),
  /// FSDPRT_STORE_BIND_ADDR; malformed values throw InvalidArgument.
  static CommOptions fromEnvironment();
};

/// Where this process sits in the job and how to reach rank 0's store.
struct LaunchInfo {
  int32_t rank = 0;
  int32_t worldSize = 1;
  int32_t localRank = 0;
  int32_t localWorldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int32_t masterPort = 29500;
  std::string jobId = "fsdprt";
  /// FSDPRT_STORE_FD: rank 0's store listening socket, inherited from
  /// fsdp-run's launcher; -1 when rank 0 binds MASTER_PORT itself.
  int32_t storeFd = -1;
  /// "torchrun", "mpirun", "srun" or "single-process".
  std::string launcher = "single-process";
  /// TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent serves a c10d
  /// TCPStore at MASTER_ADDR:MASTER_PORT, which every rank joins.
  bool agentStore = false;
  /// TORCHELASTIC_RESTART_COUNT: the agent's store outlives a restart of
  /// the group, so the keys of each attempt are kept apart by it.
  int32_t restartCount = 0;

  /// Reads torchrun's RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE, else
  /// OpenMPI's OMPI_COMM_WORLD_*, else Slurm's SLURM_PROCID/NTASKS/LOCALID,
  /// else a single process; MASTER_ADDR/MASTER_PORT and the job id
  /// (FSDPRT_JOB_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID) in every case.
  /// `getenv` is injectable for tests.
  static LaunchInfo
  fromEnvironment(const std::function<const char *(const char *)> &getenv);
  static LaunchInfo fromEnvironment();
};

/// A process group: its name and its members' global ranks in group order.
struct GroupSpec {
  std::string name;
  std::vector<int32_t> ranks;
};

struct CommSetup;

class Communicator {
public:
  virtual ~Communicator();
  virtual const char *backendName() const = 0;
  /// Whether buffers are host memory (Gloo) or device memory (NCCL).
  virtual bool usesHostMemory() const = 0;
  /// Whether collectives must be issued one at a time in tag order (the
  /// backend matches them across ranks by launch order, as NCCL does). The
  /// default is the safe answer; a backend that keeps concurrent
  /// collectives apart by their tags (Gloo) returns false.
  virtual bool requiresIssueOrder() const { return true; }

  int32_t rank() const { return rank_; }
  int32_t size() const { return static_cast<int32_t>(spec_.ranks.size()); }
  int32_t globalRank() const { return spec_.ranks[rank_]; }
  const GroupSpec &group() const { return spec_; }
  const CommOptions &options() const { return options_; }
  /// The group's namespace of the job's rendezvous store.
  const std::shared_ptr<Store> &store() const { return store_; }
  std::chrono::milliseconds timeout() const { return timeout_.load(); }
  void setTimeout(std::chrono::milliseconds timeout);
  /// Tag of the next collective in issue order.
  uint32_t nextTag() { return tagCounter_++; }
  /// Gives up `tag` (from nextTag()) without running its collective, e.g.
  /// when a failed stream drops the enqueued collective. With issue order
  /// the communicator becomes unusable and collectives waiting behind the
  /// tag fail at once: issuing them would pair them with the other ranks'
  /// collective `tag`. `collective` and `why` go into the error message.
  void skipTag(uint32_t tag, const char *collective, const std::string &why);

  // Synchronous collectives. Buffers hold `numel` elements of `dt` (all
  // gather: `in` holds this rank's chunk; reduce scatter: `out` does).
  // 16-bit reductions accumulate in f32. `in` may equal `out` for
  // all_reduce, and may be `out`'s own chunk for all_gather.
  void allGather(DType dt, const void *in, void *out, int64_t numel);
  void allGather(DType dt, const void *in, void *out, int64_t numel,
                 uint32_t tag, void *queue = nullptr);
  /// result = (sum_i(in_i / preDivide) / postDivide) [/ size() for Avg]
  void reduceScatter(DType dt, const void *in, void *out, int64_t numel,
                     CommReduceOp op, double preDivide = 1.0,
                     double postDivide = 1.0);
  void reduceScatter(DType dt, const void *in, void *out, int64_t numel,
                     CommReduceOp op, double preDivide, double postDivide,
                     uint32_t tag, void *queue = nullptr);
  void allReduce(DType dt, const void *in, void *out, int64_t numel,
                 CommReduceOp op);
  void allReduce(DType dt, const void *in, void *out, int64_t numel,
                 CommReduceOp op, uint32_t tag, void *queue = nullptr);
  void broadcast(void *buf, int64_t bytes, int32_t root);
  void broadcast(void *buf, int64_t bytes, int32_t root, uint32_t tag,
                 void *queue = nullptr);
  void barrier();
  void barrier(uint32_t tag, void *queue = nullptr);

  /// Device memory the backend holds for this communicator (NCCL's
  /// buffers, measured around its creation); 0 for host backends.
  virtual int64_t deviceBytes() const { return 0; }
  /// Whether a collective given a queue completes after its call returns
  /// (NCCL); such communicators are watched by their context's watchdog.
  virtual bool streamOrdered() const { return false; }
  /// The backend's asynchronous error, "" if none (NCCL: what
  /// ncclCommGetAsyncError reports). Any thread may ask.
  virtual std::string asyncError() { return ""; }
  /// Records `why` as the communicator's failure (later collectives fail
  /// with it) and stops its work on the device (NCCL: ncclCommAbort), so
  /// that streams waiting for a collective that will never complete move on.
  void abort(const std::string &why);
  /// "<collective> on group 'world' (2 ranks) failed on rank 0 (global
  /// rank 0): <why>": how every failure of a collective is worded.
  std::string failedOnRank(const std::string &collective,
                           const std::string &why) const;

  /// Collective over this communicator: every member calls it, in the same
  /// order, each with the spec of the sub-group it belongs to (the specs of
  /// different members may differ, e.g. the shard groups of a mesh).
  std::unique_ptr<Communicator> createGroup(const GroupSpec &spec);

protected:
  explicit Communicator(const CommSetup &setup);

  // `queue`: see "Stream-ordered collectives" above.
  virtual void runAllGather(DType dt, const void *in, void *out, int64_t numel,
                            uint32_t tag, void *queue) = 0;
  virtual void runReduceScatter(DType dt, const void *in, void *out,
                                int64_t numel, CommReduceOp op,
                                double preDivide, double postDivide,
                                uint32_t tag, void *queue) = 0;
  virtual void runAllReduce(DType dt, const void *in, void *out, int64_t numel,
                            CommReduceOp op, uint32_t tag, void *queue) = 0;
  virtual void runBroadcast(void *buf, int64_t bytes, int32_t root,
                            uint32_t tag, void *queue) = 0;
  virtual void runBarrier(uint32_t tag, void *queue) = 0;
  /// Stops the backend's device work for abort() (default: nothing to stop).
  virtual void abortBackend() {}
  /// Builds a member of a new group (setup.group holds global ranks).
  virtual std::unique_ptr<Communicator> makeGroup(const CommSetup &setup) = 0;

  /// Called by run* on its own thread once the collective is issued (for
  /// NCCL: enqueued, the communicator out of ncclInProgress), before waiting
  /// for it to complete: the next tag may then issue. Without the call the
  /// turn passes on when run* returns or throws. No-op without issue order.
  void issued();

private:
  class IssueTurn;
  /// Runs `check` (argument checks), then waits for the turn of `tag`, then
  /// runs `body`, wrapping IO failures; the turn is passed on on every path.
  template <typename Check, typename Body>
  void guard(const char *collective, uint32_t tag, Check &&check, Body &&body);
  void recordFailure(const std::string &message);
  void advanceTurnLocked();
  void endTurn(uint32_t tag, bool held);

  GroupSpec spec_;
  int32_t rank_;
  std::shared_ptr<Store> store_;
  LaunchInfo launch_;
  CommOptions options_;
  std::atomic<std::chrono::milliseconds> timeout_;
  std::atomic<uint32_t> tagCounter_{0};
  uint32_t groupCounter_ = 0;
  // Guards the first error and the issue order. nextTurn_ is the smallest
  // tag neither issued nor given up; turnTaken_ says a collective (on thread
  // turnHolder_) is issuing it; givenUp_ holds later tags given up early
  // (argument errors), passed over when their turn comes.
  std::mutex mutex_;
  std::condition_variable turnChanged_;
  uint32_t nextTurn_ = 0;
  bool turnTaken_ = false;
  std::thread::id turnHolder_;
  std::set<uint32_t> givenUp_;
  std::string firstError_;
};

/// Everything a backend needs to build the communicator of one group: the
/// group's own store namespace, its spec and this process's global rank.
struct CommSetup {
  std::shared_ptr<Store> store;
  GroupSpec group;
  int32_t globalRank;
  LaunchInfo launch;
  CommOptions options;
};
using CommFactory =
    std::function<std::unique_ptr<Communicator>(const CommSetup &setup)>;
bool registerCommBackend(const std::string &name, CommFactory factory);
std::vector<std::string> commBackendNames();

/// Joins the job's rendezvous (rank 0 serves the store) and builds the world
/// communicator. Throws Error(IO) naming the missing ranks when the join
/// times out, and InvalidArgument for an unknown backend.
std::unique_ptr<Communicator> createCommunicator(const std::string &backend,
                                                 const LaunchInfo &launch,
                                                 const CommOptions &options);

/// The groups of a [replicate, shard] mesh containing this rank.
struct MeshGroups {
  std::unique_ptr<Communicator> shard;
  std::unique_ptr<Communicator> replicate;
};
MeshGroups createMeshGroups(Communicator &world, int32_t replicate,
                            int32_t shard);

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMM_H
