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
