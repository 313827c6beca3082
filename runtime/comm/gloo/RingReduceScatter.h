//===- RingReduceScatter.h - Reduce-scatter from Gloo send/recv -*- C++ -*-===//
//
// Debian's Gloo has only ReduceScatterHalvingDoubling: its answers are right
// but it leaves the pairs ~1000x slower for every later collective. This is
// the textbook ring over Gloo's point-to-point unbound buffers instead: n-1
// steps, each sending one partially reduced chunk to the right neighbour and
// adding the chunk received from the left one; bandwidth-optimal, and each
// chunk is summed in one fixed order, so every run gives the same bits.
// Accumulation is f32 whatever the storage type.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_COMM_RINGREDUCESCATTER_H
#define FSDP_RT_COMM_RINGREDUCESCATTER_H

#include <gloo/context.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace fsdp {
namespace rt {
namespace comm {

/// `acc` holds this rank's (already pre-divided) f32 contribution to the
/// whole tensor of `numel` elements. On return, this rank's torch.chunk
/// range of `acc` holds the sum over the group. `incoming` has room for one
/// chunk. `globalRankOf` names peers in error messages.
void ringReduceScatter(const std::shared_ptr<gloo::Context> &context,
                       float *acc, float *incoming, int64_t numel, uint32_t tag,
                       std::chrono::milliseconds timeout,
                       const std::function<int32_t(int)> &globalRankOf);

} // namespace comm
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMM_RINGREDUCESCATTER_H
