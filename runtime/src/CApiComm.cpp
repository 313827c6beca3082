//===- CApiComm.cpp - C ABI: communicators and collectives ----------------===//
//
// Argument checks (handles, extents, dtype, op, root) happen on the calling
// thread; the collective itself runs on the stream, after the delay hook of
// its kind. Its tag is taken here, in program order, which is what keeps
// collectives on different streams matched across ranks (by tag for Gloo,
// by issue order for NCCL). A stream that has failed drops the closures
// queued behind the failure without running them; the TagClaim each closure
// holds then gives its tag up (Communicator::skipTag), so that collectives
// waiting for that tag's turn on other streams fail at once instead of
// waiting out the collective timeout.
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/fsdprt.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

CommReduceOp reduceOpFromCode(int32_t op) {
  if (op < FSDPRT_COMM_SUM || op > FSDPRT_COMM_MAX)
    fail(Status::InvalidArgument, "op code ", op,
         " is not FSDPRT_COMM_SUM, _AVG or _MAX");
  return static_cast<CommReduceOp>(op);
}

void checkMatchesContext(Context &ctx, const LaunchInfo &launch) {
  if (ctx.rank() != launch.rank || ctx.worldSize() != launch.worldSize)
    fail(Status::InvalidArgument, "the launcher says rank ", launch.rank,
         " of ", launch.worldSize, " but the context is rank ", ctx.rank(),
         " of ", ctx.worldSize());
}

int64_t initComm(int64_t ctxHandle, const char *backend,
                 const LaunchInfo &launch, CommOptions options) {
  std::shared_ptr<Context> ctx = getContext(ctxHandle);
  checkMatchesContext(*ctx, launch);
  if (std::string(backend) == "default")
    backend = ctx->backend().communicator();
  options.device = ctx->backend().deviceOrdinal();
  std::shared_ptr<Communicator> comm =
      createCommunicator(backend, launch, options);
  return ctx->addCommunicator(std::move(comm));
}

/// The tag of a collective enqueued on a stream, given up if the closure
/// holding it is destroyed without having used it.
class TagClaim {
public:
  TagClaim(std::shared_ptr<Communicator> comm, const char *collective)
      : comm_(std::move(comm)), tag_(comm_->nextTag()),
        collective_(collective) {}
  ~TagClaim() {
    if (used_)
      return;
    try {
      comm_->skipTag(tag_, collective_,
                     "its stream skipped it after an earlier failure");
    } catch (...) {
      // Only allocation can fail here; nothing to report it to.
    }
  }
  TagClaim(const TagClaim &) = delete;
  TagClaim &operator=(const TagClaim &) = delete;

  /// "all_gather (issue tag 7)": how the watchdog names the collective.
  std::string label() const {
    return std::string(collective_) + " (issue tag " + std::to_string(tag_) +
           ")";
  }
  /// The tag, for the collective that is about to run.
  uint32_t use() {
    used_ = true;
    return tag_;
  }

private:
  std::shared_ptr<Communicator> comm_;
  uint32_t tag_;
  const char *collective_;
  bool used_ = false;
};

/// A collective being prepared: context, stream and communicator resolved,
/// operands bounds-checked against the communicator's memory kind.
struct CommLaunch : Launch {
  CommLaunch(int64_t ctx, int64_t stream, int64_t comm, int32_t dtype,
             const char *op)
      : Launch(ctx, stream, dtype, op), comm(context().communicator(comm)) {
    if (this->comm->usesHostMemory() != backend().hostAccessible())
      fail(Status::Unsupported, "communicator backend '",
           this->comm->backendName(), "' cannot use the memory of backend '",
           backend().name(), "'");
  }
  std::shared_ptr<Communicator> comm;

  /// `work(queue)` runs the collective. On a backend with device ordering
  /// it is issued onto the worker's own device queue, after the work
  /// already there (DeviceOrdering.h): no host wait, and what the stream
  /// records next comes after the collective. The context's watchdog
  /// bounds it from there (outside a capture, where it only records).
  void enqueue(const TagClaim &claim, std::function<void(void *queue)> work) {
    DeviceOrdering *device = backend().deviceOrdering();
    Context &ctx = context(); // outlives its streams' work
    std::shared_ptr<Communicator> c = comm;
    Launch::enqueue([device, &ctx, c, label = claim.label(),
                     work = std::move(work)] {
      void *queue = device ? device->queueHandle() : nullptr;
      work(queue);
      if (!queue || !c->streamOrdered() || device->capturing())
        return;
      ctx.watchdog().watch(device->record(),
                           std::chrono::steady_clock::now() + c->timeout(),
                           label, c);
    });
  }
};

} // namespace

extern "C" {

int32_t fsdprt_comm_init_env(int64_t ctx, const char *backend,
                             int64_t *out_comm) {
  return guarded(__func__, [&] {
    requireOut(backend, "backend");
    requireOut(out_comm, "out_comm");
    *out_comm = initComm(ctx, backend, LaunchInfo::fromEnvironment(),
                         CommOptions::fromEnvironment());
  });
}

int32_t fsdprt_comm_init(int64_t ctx, const char *backend, int32_t rank,
                         int32_t world_size, const char *master_addr,
                         int32_t master_port, const char *job_id,
                         int64_t rendezvous_timeout_ms,
                         int64_t collective_timeout_ms, int64_t *out_comm) {
  return guarded(__func__, [&] {
    requireOut(backend, "backend");
    requireOut(master_addr, "master_addr");
    requireOut(out_comm, "out_comm");
    LaunchInfo launch;
    launch.launcher = "explicit";
    launch.rank = rank;
    launch.worldSize = world_size;
    launch.localRank = rank;
    launch.localWorldSize = world_size;
    launch.masterAddr = master_addr;
    launch.masterPort = master_port;
    if (job_id)
      launch.jobId = job_id;
    CommOptions options = CommOptions::fromEnvironment();
    if (rendezvous_timeout_ms > 0)
      options.rendezvousTimeout =
          std::chrono::milliseconds(rendezvous_timeout_ms);
    if (collective_timeout_ms > 0)
      options.collectiveTimeout =
          std::chrono::milliseconds(collective_timeout_ms);
    *out_comm = initComm(ctx, backend, launch, options);
  });
}

int32_t fsdprt_comm_split_mesh(int64_t ctx, int64_t comm, int32_t replicate,
                               int32_t shard, int64_t *out_shard_comm,
                               int64_t *out_replicate_comm) {
  return guarded(__func__, [&] {
    requireOut(out_shard_comm, "out_shard_comm");
    requireOut(out_replicate_comm, "out_replicate_comm");
    std::shared_ptr<Context> c = getContext(ctx);
    MeshGroups groups =
        createMeshGroups(*c->communicator(comm), replicate, shard);
    *out_shard_comm = c->addCommunicator(std::move(groups.shard));
    *out_replicate_comm = c->addCommunicator(std::move(groups.replicate));
  });
}

int32_t fsdprt_comm_destroy(int64_t ctx, int64_t comm) {
  return guarded(__func__, [&] { getContext(ctx)->destroyCommunicator(comm); });
}

int32_t fsdprt_comm_rank(int64_t ctx, int64_t comm, int32_t *out) {
  return guarded(__func__, [&] {
    requireOut(out, "out");
    *out = getContext(ctx)->communicator(comm)->rank();
  });
}

int32_t fsdprt_comm_size(int64_t ctx, int64_t comm, int32_t *out) {
  return guarded(__func__, [&] {
    requireOut(out, "out");
    *out = getContext(ctx)->communicator(comm)->size();
  });
}

int32_t fsdprt_comm_set_timeout(int64_t ctx, int64_t comm, int64_t timeout_ms) {
  return guarded(__func__, [&] {
    getContext(ctx)->communicator(comm)->setTimeout(
        std::chrono::milliseconds(timeout_ms));
  });
}

int32_t fsdprt_comm_shard_range(int64_t numel, int32_t size, int32_t index,
                                int64_t *out_begin, int64_t *out_count) {
  return guarded(__func__, [&] {
    requireOut(out_begin, "out_begin");
    requireOut(out_count, "out_count");
    ShardRange r = shardRange(numel, size, index);
    *out_begin = r.begin;
    *out_count = r.count;
  });
}

int32_t fsdprt_all_gather(int64_t ctx, int64_t stream, int64_t comm,
                          int32_t dtype, int64_t in, int64_t in_off,
                          int64_t out, int64_t out_off, int64_t numel) {
  return guarded(__func__, [&] {
    CommLaunch l(ctx, stream, comm, dtype, "all_gather");
    nonNegative(numel, "numel");
    ShardRange own = shardRange(numel, l.comm->size(), l.comm->rank());
    const void *x = l.operand(in, in_off, own.count, "in");
    void *y = l.operand(out, out_off, numel, "out");
    auto claim = std::make_shared<TagClaim>(l.comm, "all_gather");
    DType dt = l.dtype();
    const DelayConfig &delays = l.context().delays();
    auto c = l.comm;
    l.enqueue(*claim, [=, &delays](void *queue) {
      delays.apply(DelayPoint::AllGather);
      c->allGather(dt, x, y, numel, claim->use(), queue);
    });
  });
}

int32_t fsdprt_reduce_scatter(int64_t ctx, int64_t stream, int64_t comm,
                              int32_t dtype, int32_t op, int64_t in,
                              int64_t in_off, int64_t out, int64_t out_off,
                              int64_t numel, double pre_divide,
                              double post_divide) {
  return guarded(__func__, [&] {
    CommLaunch l(ctx, stream, comm, dtype, "reduce_scatter");
    CommReduceOp rop = reduceOpFromCode(op);
    if (rop == CommReduceOp::Max)
      fail(Status::InvalidArgument, "reduce_scatter: op must be sum or avg");
    if (!(pre_divide > 0) || !(post_divide > 0) || pre_divide == HUGE_VAL ||
        post_divide == HUGE_VAL)
      fail(Status::InvalidArgument,
           "pre_divide and post_divide must be positive and finite, got ",
           pre_divide, " and ", post_divide);
    nonNegative(numel, "numel");
    ShardRange own = shardRange(numel, l.comm->size(), l.comm->rank());
    const void *x = l.operand(in, in_off, numel, "in");
    void *y = l.operand(out, out_off, own.count, "out");
    auto claim = std::make_shared<TagClaim>(l.comm, "reduce_scatter");
    DType dt = l.dtype();
    const DelayConfig &delays = l.context().delays();
    auto c = l.comm;
    l.enqueue(*claim, [=, &delays](void *queue) {
      delays.apply(DelayPoint::ReduceScatter);
      c->reduceScatter(dt, x, y, numel, rop, pre_divide, post_divide,
                       claim->use(), queue);
    });
  });
}

int32_t fsdprt_all_reduce(int64_t ctx, int64_t stream, int64_t comm,
                          int32_t dtype, int32_t op, int64_t in, int64_t in_off,
                          int64_t out, int64_t out_off, int64_t numel) {
  return guarded(__func__, [&] {
    CommLaunch l(ctx, stream, comm, dtype, "all_reduce");
    CommReduceOp rop = reduceOpFromCode(op);
    nonNegative(numel, "numel");
    const void *x = l.operand(in, in_off, numel, "in");
    void *y = l.operand(out, out_off, numel, "out");
    auto claim = std::make_shared<TagClaim>(l.comm, "all_reduce");
    DType dt = l.dtype();
    auto c = l.comm;
    l.enqueue(*claim, [=](void *queue) {
      c->allReduce(dt, x, y, numel, rop, claim->use(), queue);
    });
  });
}

int32_t fsdprt_broadcast(int64_t ctx, int64_t stream, int64_t comm,
                         int32_t dtype, int64_t buf, int64_t off, int64_t numel,
                         int32_t root) {
  return guarded(__func__, [&] {
    // Any dtype may be broadcast (token ids too): only its size matters.
    DType dt = dtypeFromCode(dtype, "dtype");
    CommLaunch l(ctx, stream, comm, FSDPRT_F32, "broadcast");
    nonNegative(numel, "numel");
    if (root < 0 || root >= l.comm->size())
      fail(Status::InvalidArgument, "root ", root,
           " is not a rank of a group of ", l.comm->size());
    int64_t bytes = mul(numel, dtypeSize(dt));
    void *p = l.operand(buf, off, numel, dt, "buf");
    auto claim = std::make_shared<TagClaim>(l.comm, "broadcast");
    auto c = l.comm;
    l.enqueue(*claim, [=](void *queue) {
      c->broadcast(p, bytes, root, claim->use(), queue);
    });
  });
}

int32_t fsdprt_barrier(int64_t ctx, int64_t stream, int64_t comm) {
  return guarded(__func__, [&] {
    CommLaunch l(ctx, stream, comm, FSDPRT_F32, "barrier");
    auto claim = std::make_shared<TagClaim>(l.comm, "barrier");
    auto c = l.comm;
    l.enqueue(*claim, [=](void *queue) { c->barrier(claim->use(), queue); });
  });
}

} // extern "C"
