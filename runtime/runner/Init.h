//===- Init.h - Deterministic parameter initialisation ----------*- C++ -*-===//
//
// Every element of a parameter or buffer is a pure function of (seed, the
// tensor's fully-qualified name, its row-major index), whatever the world
// size, the unit wrapping or the order of generation: a 1-rank and a 4-rank
// run start from bit-identical weights, and each rank generates only the
// elements of its own shard.
//
// Random bits: Philox4x32-10 (fsdp/rt/math/Philox.h) with key = seed and
// counter = (index low, index high, FNV-1a-64(name) low, high). Uniforms are
// 53-bit doubles from lanes 0-1; normals are Box-Muller in double from lanes
// 0-1 and 2-3 (the cosine branch); values are rounded to f32 once, at the end.
// Kinds and scales follow torch.nn.init; trunc_normal uses PyTorch's
// inverse-CDF method (uniform in [2l-1, 2u-1), erfinv, scale, clamp).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_INIT_H
#define FSDP_DRIVER_INIT_H

#include "runner/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

/// FNV-1a, 64 bits: the stable identity of a tensor's random stream.
uint64_t nameHash(const std::string &name);

struct Fans {
  int64_t fanIn = 0;
  int64_t fanOut = 0;
};

/// torch.nn.init._calculate_fan_in_and_fan_out: fan_in = dim 1 x receptive
/// field, fan_out = dim 0 x receptive field (receptive field = product of
/// dims 2..). Throws for fewer than 2 dimensions, naming `name`.
Fans computeFans(const std::vector<int64_t> &shape, const std::string &name);

/// Elements [begin, begin + count) of tensor `name` (row-major `shape`) as
/// `init` creates them; `out` has room for `count` floats.
void initRange(const InitSpec &init, const std::vector<int64_t> &shape,
               uint64_t seed, const std::string &name, int64_t begin,
               int64_t count, float *out);

/// The whole tensor.
std::vector<float> initTensor(const InitSpec &init,
                              const std::vector<int64_t> &shape, uint64_t seed,
                              const std::string &name);

/// The seed rank `rank` initialises a rank-local unit with: a stream of its
/// own for every rank (and unlike the shared units' stream).
uint64_t rankLocalSeed(uint64_t seed, int rank);

/// Element offset of rank `rank`'s shard in `unit`'s padded flat parameter
/// (0 when the unit is not sharded: shard_numel == padded_numel).
int64_t shardBegin(const Program &program, const UnitInfo &unit, int rank);

/// Resizes `persistent` to the persistent buffer's size and fills it as the
/// step expects to find it before its first call: every unit's f32 shard of
/// its flat parameter (zero padding), zero optimizer state, every buffer
/// from its initializer, zeros elsewhere (inputs, loss).
void initializeRank(const Program &program, uint64_t seed, int rank,
                    std::vector<uint8_t> &persistent);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_INIT_H
