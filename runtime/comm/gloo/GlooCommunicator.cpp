//===- GlooCommunicator.cpp - Collectives on CPU over Gloo's TCP ----------===//
//
// all_gather, all_reduce, broadcast and barrier are Gloo's own algorithms;
// reduce_scatter is our ring over Gloo's point-to-point buffers (see
// RingReduceScatter.h). 16-bit reductions are widened to f32 before any
// byte moves, so partial sums are never rounded to 16 bits on the way (at
// twice the wire bytes; the gradients FSDP reduces in bf16 are small next
// to the parameters it gathers).
//
//===----------------------------------------------------------------------===//
#include "backends/Builtin.h"
#include "GlooStore.h"
#include "RingReduceScatter.h"
#include "ScratchPool.h"

#include "fsdp/rt/Error.h"
#include "fsdp/rt/backend/HostConvert.h"

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <vector>

namespace fsdp {
namespace rt {
namespace comm {

namespace {

/// Gloo reports failures with its own exception types (IoException,
/// EnforceNotMet, ...); they become Error(IO) so that the base class adds
/// the collective, group and rank.
template <typename F> void glooCall(F &&body) {
  try {
    body();
  } catch (const Error &) {
    throw;
  } catch (const std::exception &e) {
    fail(Status::IO, "gloo: ", e.what());
  }
}

std::shared_ptr<gloo::transport::Device> makeDevice(const CommOptions &o) {
  gloo::transport::tcp::attr attr;
  if (!o.glooInterface.empty())
    attr.iface = o.glooInterface;
  else
    attr.hostname = o.glooHostname;
  std::shared_ptr<gloo::transport::Device> device;
  glooCall([&] { device = gloo::transport::tcp::CreateDevice(attr); });
  return device;
}

/// Fills `acc` with an f32 copy of `in`, divided by `divide`.
void widen(DType dt, const void *in, int64_t numel, double divide, float *acc) {
  convertOnHost(dt, in, DType::F32, acc, numel);
  if (divide != 1.0) {
    float d = static_cast<float>(divide);
    for (int64_t i = 0; i < numel; ++i)
      acc[i] /= d;
  }
}

/// Gloo writes to its sockets without MSG_NOSIGNAL, so a peer that dies
/// mid-collective would kill this process with SIGPIPE instead of letting
/// the write fail with EPIPE and become an error. Ignore SIGPIPE unless the
/// program installed its own handler (as Python and most servers do).
void ignoreSigpipeUnlessHandled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, nullptr);
  }
}

class GlooCommunicator : public Communicator {
public:
  explicit GlooCommunicator(const CommSetup &setup) : Communicator(setup) {
    ignoreSigpipeUnlessHandled();
    device_ = makeDevice(setup.options);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank(), size());
    // Gloo waits 5x the context timeout for a pair's initial connection
    // (tcp/pair.h); a fifth keeps a peer that failed to connect from
    // holding this rank past the rendezvous timeout.
    context->setTimeout(std::max(std::chrono::milliseconds(1),
                                 setup.options.rendezvousTimeout / 5));
    GlooStore store(setup.store, setup.options.rendezvousTimeout);
    try {
      glooCall([&] { context->connectFullMesh(store, device_); });
    } catch (const Error &e) {
      fail(Status::IO, "connecting the gloo pairs of group '", group().name,
           "' on rank ", rank(), " (global rank ", globalRank(),
           "): ", e.what());
    }
    // Every op passes its own timeout; this covers anything that does not.
    context->setTimeout(setup.options.collectiveTimeout);
    context_ = context;
  }

  const char *backendName() const override { return "gloo"; }
  bool usesHostMemory() const override { return true; }
  /// Every Gloo collective carries its tag, so collectives on different
  /// streams may be in flight at once without mixing their messages.
  bool requiresIssueOrder() const override { return false; }

protected:
  void runAllGather(DType dt, const void *in, void *out, int64_t numel,
                    uint32_t tag, void *) override {
    const int64_t esize = dtypeSize(dt);
    ShardRange own = shardRange(numel, size(), rank());
    char *outBytes = static_cast<char *>(out);
    // In place by Gloo's convention (no input buffer): our chunk is first
    // moved into its slot of the output; memmove because FSDP passes the
    // chunk's own slot as the input.
    if (own.count > 0)
      std::memmove(outBytes + own.begin * esize, in, own.count * esize);
    if (size() == 1 || numel == 0)
      return;
    std::vector<size_t> counts;
    for (int32_t i = 0; i < size(); ++i)
      counts.push_back(
          static_cast<size_t>(shardRange(numel, size(), i).count * esize));
    glooCall([&] {
      gloo::AllgathervOptions opts(context_);
      opts.setOutput(outBytes, counts);
      opts.setTag(tag);
      opts.setTimeout(timeout());
      gloo::allgatherv(opts);
    });
  }

  void runReduceScatter(DType dt, const void *in, void *out, int64_t numel,
                        CommReduceOp op, double preDivide, double postDivide,
                        uint32_t tag, void *) override {
    ShardRange own = shardRange(numel, size(), rank());
    ScratchPool::Lease acc = scratch_.acquire(numel);
    ScratchPool::Lease incoming =
        scratch_.acquire(shardRange(numel, size(), 0).count);
    widen(dt, in, numel, preDivide, acc.get());
    ringReduceScatter(context_, acc.get(), incoming.get(), numel, tag,
                      timeout(), [this](int r) { return group().ranks[r]; });
    float post = static_cast<float>(
        op == CommReduceOp::Avg ? postDivide * size() : postDivide);
    float *mine = acc.get() + own.begin;
    if (post != 1.0f)
      for (int64_t i = 0; i < own.count; ++i)
        mine[i] /= post;
    convertOnHost(DType::F32, mine, dt, out, own.count);
  }

  void runAllReduce(DType dt, const void *in, void *out, int64_t numel,
                    CommReduceOp op, uint32_t tag, void *) override {
    ScratchPool::Lease acc = scratch_.acquire(numel);
    widen(dt, in, numel, 1.0, acc.get());
    if (size() > 1 && numel > 0) {
      glooCall([&] {
        gloo::AllreduceOptions opts(context_);
        opts.setOutput(acc.get(), static_cast<size_t>(numel));
        if (op == CommReduceOp::Max)
          opts.setReduceFunction(
              static_cast<void (*)(void *, const void *, const void *, size_t)>(
                  &gloo::max<float>));
        else
          opts.setReduceFunction(
              static_cast<void (*)(void *, const void *, const void *, size_t)>(
                  &gloo::sum<float>));
        opts.setTag(tag);
        opts.setTimeout(timeout());
        gloo::allreduce(opts);
      });
    }
    if (op == CommReduceOp::Avg && size() > 1) {
      float n = static_cast<float>(size());
      for (int64_t i = 0; i < numel; ++i)
        acc.get()[i] /= n;
    }
    convertOnHost(DType::F32, acc.get(), dt, out, numel);
  }

  void runBroadcast(void *buf, int64_t bytes, int32_t root,
                    uint32_t tag, void *) override {
    if (size() == 1 || bytes == 0)
      return;
    glooCall([&] {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<char *>(buf), static_cast<size_t>(bytes));
      opts.setRoot(root);
      opts.setTag(tag);
      opts.setTimeout(timeout());
      gloo::broadcast(opts);
    });
  }

  void runBarrier(uint32_t tag, void *) override {
    if (size() == 1)
      return;
    glooCall([&] {
      gloo::BarrierOptions opts(context_);
      opts.setTag(tag);
      opts.setTimeout(timeout());
      gloo::barrier(opts);
    });
  }

  std::unique_ptr<Communicator> makeGroup(const CommSetup &setup) override {
    return std::make_unique<GlooCommunicator>(setup);
  }

private:
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  ScratchPool scratch_;
};

} // namespace

std::unique_ptr<Communicator> createGlooCommunicator(const CommSetup &setup) {
  return std::make_unique<GlooCommunicator>(setup);
}

} // namespace comm
} // namespace rt
} // namespace fsdp
