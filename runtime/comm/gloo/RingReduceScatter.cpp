//===- RingReduceScatter.cpp - Reduce-scatter from Gloo send/recv ---------===//
#include "RingReduceScatter.h"

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/Error.h"

#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <vector>

namespace fsdp {
namespace rt {
namespace comm {

// Gloo's own algorithms use slot prefixes 0x01..0x0c; this one is ours.
static constexpr uint8_t kRingReduceScatterSlotPrefix = 0x7e;

void ringReduceScatter(const std::shared_ptr<gloo::Context> &context,
                       float *acc, float *incoming, int64_t numel, uint32_t tag,
                       std::chrono::milliseconds timeout,
                       const std::function<int32_t(int)> &globalRankOf) {
  const int n = context->size, r = context->rank;
  if (n == 1 || numel == 0)
    return;
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const int64_t maxChunk = shardRange(numel, n, 0).count;
  auto accBuf = context->createUnboundBuffer(acc, numel * sizeof(float));
  auto inBuf = context->createUnboundBuffer(incoming, maxChunk * sizeof(float));
  const uint64_t slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, tag);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now()));
  };

  // Step s: send chunk (r-1-s) (complete up to us) right, receive chunk
  // (r-2-s) from the left and add ours. After n-1 steps chunk r is done.
  for (int s = 0; s < n - 1; ++s) {
    ShardRange send = shardRange(numel, n, (r - 1 - s + 2 * n) % n);
    ShardRange recv = shardRange(numel, n, (r - 2 - s + 2 * n) % n);
    // Both ends compute the same chunk sizes, so empty chunks are skipped
    // symmetrically and never become zero-byte messages.
    if (send.count > 0)
      accBuf->send(right, slot, send.begin * sizeof(float),
                   send.count * sizeof(float));
    if (recv.count > 0)
      inBuf->recv(left, slot, 0, recv.count * sizeof(float));
    try {
      if (recv.count > 0)
        inBuf->waitRecv(left_ms());
    } catch (const std::exception &e) {
      fail(Status::IO, "ring step ", s + 1, "/", n - 1,
           ": receiving from rank ", left, " (global rank ", globalRankOf(left),
           "): ", e.what());
    }
    try {
      if (send.count > 0)
        accBuf->waitSend(left_ms());
    } catch (const std::exception &e) {
      fail(Status::IO, "ring step ", s + 1, "/", n - 1, ": sending to rank ",
           right, " (global rank ", globalRankOf(right), "): ", e.what());
    }
    float *dst = acc + recv.begin;
    for (int64_t i = 0; i < recv.count; ++i)
      dst[i] += incoming[i];
  }
}

} // namespace comm
} // namespace rt
} // namespace fsdp
