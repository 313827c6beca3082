//===- Random.cpp - dropout and random fills from Philox ------------------===//
#include "Kernels.h"
#include "Parallel.h"
#include "Storage.h"

#include "fsdp/rt/math/Philox.h"

#include <algorithm>
#include <cmath>

namespace fsdp {
namespace rt {
namespace cpu {

// Work is split on 4-element Philox blocks so that each block's 128 bits are
// generated once; element i always uses block i / 4, lane i % 4.
template <typename F>
static void forEachBlock(int threads, int64_t n, const RngKey &key, F f) {
  int64_t blocks = (n + 3) / 4;
  parallelFor(threads, blocks, 4096, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      Philox4x32 r = philoxBlock(key.seed, key.step, key.rngId, blk);
      f(blk * 4, std::min<int64_t>(4, n - blk * 4), r);
    }
  });
}

void dropout(int threads, DType dt, const void *x, void *y, int64_t n, float p,
             const RngKey &key) {
  withStorage(dt, [&](auto s) {
    using S = decltype(s);
    auto *px = static_cast<const typename S::T *>(x);
    auto *py = static_cast<typename S::T *>(y);
    forEachBlock(threads, n, key, [&](int64_t i0, int64_t len, Philox4x32 r) {
      for (int64_t l = 0; l < len; ++l)
        py[i0 + l] = S::store(S::load(px[i0 + l]) *
                              dropoutFactor(uniformFromBits(r.v[l]), p));
    });
  });
}

void rngFill(int threads, float *dst, int64_t n, Distribution dist, float a,
             float b, const RngKey &key) {
  forEachBlock(threads, n, key, [&](int64_t i0, int64_t len, Philox4x32 r) {
    float out[4];
    philoxSamples(r, dist == Distribution::Uniform, a, b, out);
    std::copy(out, out + len, dst + i0);
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
