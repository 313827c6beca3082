//===- KernelSupport.cuh - Helpers shared by the kernel files -------------===//
//
// Shapes passed by value to kernels (Dims, offsets of a linear index) and
// the blocked sums of losses and gradient norms (as cpu::blockedSum: fixed
// 16384-element blocks, each summed in order, then the block sums added in
// block order).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_KERNELSUPPORT_CUH
#define FSDP_RT_CUDA_KERNELSUPPORT_CUH

#include "Kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace fsdp {
namespace rt {
namespace cuda {

constexpr int kMaxRank = 12;

struct Dims {
  int rank = 0;
  int64_t size[kMaxRank];
  int64_t strideA[kMaxRank];
  int64_t strideB[kMaxRank];
};

inline void requireRank(size_t rank, const char *what) {
  if (rank > static_cast<size_t>(kMaxRank))
    fail(Status::Unsupported, "cuda backend: ", what, " of rank ", rank,
         " (at most ", kMaxRank, " supported)");
}

/// `v` of every lane of the warp summed in a fixed tree order; every lane
/// gets the result.
template <typename T> __device__ inline T warpSum(T v) {
  for (int off = kWarp / 2; off > 0; off /= 2)
    v += __shfl_down_sync(0xffffffffu, v, off);
  return __shfl_sync(0xffffffffu, v, 0);
}

/// Offsets of linear index i (row-major over d.size) along strideA / strideB.
__device__ inline void offsetsOf(const Dims &d, int64_t i, int64_t &a,
                                 int64_t &b) {
  a = 0;
  b = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    int64_t idx = i % d.size[k];
    i /= d.size[k];
    a += idx * d.strideA[k];
    b += idx * d.strideB[k];
  }
}

// Pointwise kernels over 16-byte packs: one 2-byte load per thread left
// most of an H100's memory bandwidth unused (the residual adds and GELU ran
// at about a third of it), so where every pointer is 16-byte aligned each
// thread loads and stores whole packs (eight bf16 / f16, four f32), and the
// tail goes item by item. The same math per item, so the same bits. Float
// casts go the same way (Conversions.cu).
template <typename T> struct alignas(16) Pack {
  static constexpr int kCount = 16 / sizeof(T);
  T v[kCount];
};

template <typename T> __device__ inline Pack<T> loadPack(const T *p, int64_t i) {
  Pack<T> pack;
#ifdef FSDPRT_CUDA_EMULATION // host C++: no type punning
  std::memcpy(&pack, p + i * Pack<T>::kCount, sizeof pack);
#else
  *reinterpret_cast<uint4 *>(&pack) = reinterpret_cast<const uint4 *>(p)[i];
#endif
  return pack;
}

template <typename T>
__device__ inline void storePack(T *p, int64_t i, const Pack<T> &pack) {
#ifdef FSDPRT_CUDA_EMULATION
  std::memcpy(p + i * Pack<T>::kCount, &pack, sizeof pack);
#else
  reinterpret_cast<uint4 *>(p)[i] = *reinterpret_cast<const uint4 *>(&pack);
#endif
}

__host__ __device__ inline bool packAligned(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// out[i] = f(a[i]) (b null) or f(a[i], b[i]) for i < n, read in storage
/// In (widened to f32) and written in storage Out (rounded once); out may
/// alias a or b when In is Out. The first `groups` groups of eight items go
/// a group per thread step in whole packs (one 16-bit pack, two f32 ones),
/// the rest item by item.
template <typename In, typename Out, typename F>
__global__ void mapKernel(F f, const typename In::T *a, const typename In::T *b,
                          typename Out::T *out, int64_t n, int64_t groups) {
  using TI = typename In::T;
  using TO = typename Out::T;
  constexpr int kItems = 8, kIn = Pack<TI>::kCount, kOut = Pack<TO>::kCount;
  auto apply = [&](TI x, const TI *y) {
    return Out::store(y ? f(In::load(x), In::load(*y)) : f(In::load(x), 0.0f));
  };
  FSDPRT_GRID_STRIDE(g, groups) {
    Pack<TI> pa[kItems / kIn], pb[kItems / kIn];
    Pack<TO> po[kItems / kOut];
#pragma unroll
    for (int p = 0; p < kItems / kIn; ++p) {
      pa[p] = loadPack(a, g * (kItems / kIn) + p);
      if (b)
        pb[p] = loadPack(b, g * (kItems / kIn) + p);
    }
#pragma unroll
    for (int u = 0; u < kItems; ++u)
      po[u / kOut].v[u % kOut] = apply(pa[u / kIn].v[u % kIn],
                                       b ? &pb[u / kIn].v[u % kIn] : nullptr);
#pragma unroll
    for (int p = 0; p < kItems / kOut; ++p)
      storePack(out, g * (kItems / kOut) + p, po[p]);
  }
  int64_t done = groups * kItems;
  FSDPRT_GRID_STRIDE(i, n - done) {
    int64_t at = done + i;
    out[at] = apply(a[at], b ? b + at : nullptr);
  }
}

/// Launches mapKernel: whole packs where a, b (if any) and out are 16-byte
/// aligned. `f` takes (a[i], b[i]), or (a[i], 0) without b.
template <typename In, typename Out = In, typename F>
void launchMap(Stream s, F f, const void *a, const void *b, void *out,
               int64_t n) {
  bool packed = packAligned(a) && (!b || packAligned(b)) && packAligned(out);
  int64_t groups = packed ? n / 8 : 0;
  FSDPRT_LAUNCH((mapKernel<In, Out, F>), groups > 0 ? groups : n, s, f,
                static_cast<const typename In::T *>(a),
                static_cast<const typename In::T *>(b),
                static_cast<typename Out::T *>(out), n, groups);
}

constexpr int64_t kSumBlock = 16384;

struct SquareTerm {
  const float *x;
  __device__ double operator()(int64_t i) const {
    return static_cast<double>(x[i]) * x[i];
  }
};

struct MseTerm {
  const float *a, *b;
  __device__ double operator()(int64_t i) const {
    double diff = static_cast<double>(a[i]) - b[i];
    return diff * diff;
  }
};

struct ArrayTerm {
  const double *v;
  __device__ double operator()(int64_t i) const { return v[i]; }
};

/// Each kSumBlock block's sum in index order, one warp per block: the
/// lanes load kAhead x 32 consecutive terms at a time (coalesced, the next
/// ones loaded while these are added) and every lane adds them in index
/// order through shuffles. One thread loading and adding alone, a few
/// loads in flight, took ~0.6 ms for the 8192 row terms of a GPT-2
/// cross-entropy. A missing term past the end adds +0.0, which leaves the
/// sum's bits as they are (it starts at +0.0, so it is never -0.0).
template <typename Term>
__global__ void blockSumKernel(Term term, int64_t n, double *partial) {
  constexpr int kAhead = 4;
  const int lane = threadIdx.x % kWarp;
  FSDPRT_WARP_ROW_STRIDE(blk, (n + kSumBlock - 1) / kSumBlock) {
    int64_t begin = blk * kSumBlock;
    int64_t end = begin + kSumBlock < n ? begin + kSumBlock : n;
    auto load = [&](int64_t i, double *v) {
#pragma unroll
      for (int u = 0; u < kAhead; ++u) {
        int64_t at = i + u * kWarp + lane;
        v[u] = at < end ? term(at) : 0.0;
      }
    };
    double sum = 0.0, next[kAhead];
    load(begin, next);
    for (int64_t i = begin; i < end; i += kAhead * kWarp) {
      double cur[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u)
        cur[u] = next[u];
      load(i + kAhead * kWarp, next);
#pragma unroll
      for (int u = 0; u < kAhead; ++u)
#pragma unroll
        for (int l = 0; l < kWarp; ++l)
          sum += __shfl_sync(0xffffffffu, cur[u], l);
    }
    if (lane == 0)
      partial[blk] = sum;
  }
}

/// Finish kernels are launched with one block; only its first thread works
/// (they read-modify-write a single scalar).
__device__ inline bool firstThread() {
  return blockIdx.x == 0 && threadIdx.x == 0;
}

__device__ inline double totalOf(const double *partial, int64_t blocks) {
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b)
    total += partial[b];
  return total;
}

/// Partial block sums of `term` over [0, n) into fresh scratch.
template <typename Term>
Scratch blockSums(Stream s, Term term, int64_t n, int64_t &blocks) {
  blocks = (n + kSumBlock - 1) / kSumBlock;
  Scratch partial(s, std::max<int64_t>(blocks, 1) * 8);
  FSDPRT_LAUNCH_WARP_ROWS(blockSumKernel<Term>, blocks, s, term, n,
                          partial.as<double>());
  return partial;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif
