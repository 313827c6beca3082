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
// tail goes item by item. The same math per item, so the same bits.
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

inline bool packAligned(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// out[i] = f(a[i]) (b null) or f(a[i], b[i]) for i < n, in storage S
/// (loaded to f32, stored rounded once); out may alias a or b. The first
/// `packs` packs go a pack per thread step, the rest item by item.
template <typename S, typename F>
__global__ void mapKernel(F f, const typename S::T *a, const typename S::T *b,
                          typename S::T *out, int64_t n, int64_t packs) {
  using T = typename S::T;
  constexpr int kCount = Pack<T>::kCount;
  auto apply = [&](T x, const T *y) {
    return S::store(y ? f(S::load(x), S::load(*y)) : f(S::load(x), 0.0f));
  };
  FSDPRT_GRID_STRIDE(p, packs) {
    Pack<T> pa = loadPack(a, p), pb, po;
    if (b)
      pb = loadPack(b, p);
#pragma unroll
    for (int u = 0; u < kCount; ++u)
      po.v[u] = apply(pa.v[u], b ? &pb.v[u] : nullptr);
    storePack(out, p, po);
  }
  int64_t done = packs * kCount;
  FSDPRT_GRID_STRIDE(i, n - done) {
    int64_t at = done + i;
    out[at] = apply(a[at], b ? b + at : nullptr);
  }
}

/// Launches mapKernel: packs where a, b (if any) and out are 16-byte
/// aligned. `f` takes (a[i], b[i]), or (a[i], 0) without b.
template <typename S, typename F>
void launchMap(Stream s, F f, const void *a, const void *b, void *out,
               int64_t n) {
  using T = typename S::T;
  bool packed = packAligned(a) && (!b || packAligned(b)) && packAligned(out);
  int64_t packs = packed ? n / Pack<T>::kCount : 0;
  FSDPRT_LAUNCH((mapKernel<S, F>), packs > 0 ? packs : n, s, f,
                static_cast<const T *>(a), static_cast<const T *>(b),
                static_cast<T *>(out), n, packs);
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

template <typename Term>
__global__ void blockSumKernel(Term term, int64_t n, double *partial) {
  FSDPRT_GRID_STRIDE(blk, (n + kSumBlock - 1) / kSumBlock) {
    int64_t end = (blk + 1) * kSumBlock < n ? (blk + 1) * kSumBlock : n;
    double sum = 0.0;
    for (int64_t i = blk * kSumBlock; i < end; ++i)
      sum += term(i);
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
  FSDPRT_LAUNCH(blockSumKernel<Term>, blocks, s, term, n, partial.as<double>());
  return partial;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif
