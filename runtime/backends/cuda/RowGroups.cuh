//===- RowGroups.cuh - Rows moved in 8-element groups -------------------===//
//
// How the row kernels (RowKernels.cu) read and write a
// row: in groups of kRowGroup elements, whole 16-byte packs where aligned.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_ROWGROUPS_CUH
#define FSDP_RT_CUDA_ROWGROUPS_CUH

#include "KernelSupport.cuh"

namespace fsdp {
namespace rt {
namespace cuda {

// Rows move in groups of kRowGroup consecutive elements (one 16-byte pack
// of bf16 / f16, two of f32), a group in whole packs where it is complete
// and aligned, element by element otherwise: one 2-byte load at a time
// left most of the memory bandwidth unused (on the last H100 lease
// layer_norm's backward ran 6.4x and cross-entropy 3-4x their bandwidth
// ceilings). Lane l of `lanes` owns groups l, l + lanes, ... and sums its
// elements in increasing order whatever the alignment, and the ownership
// is the same for every storage type: alignment does not change the bits,
// and a 16-bit row computes what its f32 widening does.
constexpr int kRowGroup = 8;

/// for i in [0, n) over a group's elements (n <= kRowGroup), unrolled to
/// kRowGroup with the bound as a predicate: a loop to a run-time bound
/// would keep the group's arrays in local memory instead of registers.
#define FSDPRT_GROUP_FOR(i, n)                                                 \
  _Pragma("unroll") for (int i = 0; i < kRowGroup; ++i) if (i < (n))

/// Calls f(j0, n) for each group [j0, j0 + n) of an n-wide row that lane
/// `lane` of `lanes` owns, in increasing j0 (n < kRowGroup only for the
/// row's last group).
template <typename F>
__device__ void forOwnedGroups(int64_t d, int64_t lane, int64_t lanes, F f) {
  for (int64_t j0 = lane * kRowGroup; j0 < d; j0 += lanes * kRowGroup)
    f(j0, d - j0 < kRowGroup ? d - j0 : kRowGroup);
}
/// The groups of this thread's lane in a warp (norm rows).
template <typename F> __device__ void forWarpGroups(int64_t d, F f) {
  forOwnedGroups(d, threadIdx.x % kWarp, kWarp, f);
}
/// The groups of this thread in its block (cross-entropy rows).
template <typename F> __device__ void forBlockGroups(int64_t d, F f) {
  forOwnedGroups(d, threadIdx.x, blockDim.x, f);
}

constexpr float kLog2e = 1.4426950408889634f;

/// exp2 on the SFU (ex2.approx.ftz: ~2 ulp, results under 2^-126 flush to
/// 0): the cross-entropy rows' exps; the host emulation's exp2f.
__device__ inline float fastExp2(float x) {
#ifdef FSDPRT_CUDA_EMULATION
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

/// `v` of every thread of a kWideThreads block combined by `combine` in a
/// fixed order (a shuffle tree in each warp, then the warps' results
/// through the same tree in warp 0); every thread gets the result. Two
/// barriers where blockReduce's shared-memory tree takes ten at 1024
/// threads.
template <typename T, typename Combine>
__device__ T wideBlockReduce(T v, Combine combine) {
  static_assert(kWideThreads == kWarp * kWarp, "one warp combines the warps");
  __shared__ T warps[kWarp];
  auto warpTree = [&](T x) {
    for (int off = kWarp / 2; off > 0; off /= 2)
      x = combine(x, __shfl_down_sync(0xffffffffu, x, off));
    return x;
  };
  v = warpTree(v);
  if (threadIdx.x % kWarp == 0)
    warps[threadIdx.x / kWarp] = v;
  __syncthreads();
  if (threadIdx.x < kWarp) {
    v = warpTree(warps[threadIdx.x]);
    if (threadIdx.x == 0)
      warps[0] = v;
  }
  __syncthreads();
  T result = warps[0];
  __syncthreads(); // warps is reused by the next reduction
  return result;
}

/// Elements [j0, j0 + n) of p as floats (p null: `none` each).
template <typename S>
__device__ void loadGroup(const typename S::T *p, int64_t j0, int64_t n,
                          float *v, float none = 0.0f) {
  using T = typename S::T;
  constexpr int kPack = Pack<T>::kCount;
  if (!p) {
#pragma unroll
    for (int i = 0; i < kRowGroup; ++i)
      v[i] = none;
  } else if (n == kRowGroup && packAligned(p + j0)) {
#pragma unroll
    for (int k = 0; k < kRowGroup / kPack; ++k) {
      Pack<T> pack = loadPack(p + j0, k);
#pragma unroll
      for (int i = 0; i < kPack; ++i)
        v[k * kPack + i] = S::load(pack.v[i]);
    }
  } else {
    FSDPRT_GROUP_FOR(i, n)
    v[i] = S::load(p[j0 + i]);
  }
}

/// Stores v as elements [j0, j0 + n) of p, rounded to the storage type.
template <typename S>
__device__ void storeGroup(typename S::T *p, int64_t j0, int64_t n,
                           const float *v) {
  using T = typename S::T;
  constexpr int kPack = Pack<T>::kCount;
  if (n == kRowGroup && packAligned(p + j0)) {
#pragma unroll
    for (int k = 0; k < kRowGroup / kPack; ++k) {
      Pack<T> pack;
#pragma unroll
      for (int i = 0; i < kPack; ++i)
        pack.v[i] = S::store(v[k * kPack + i]);
      storePack(p + j0, k, pack);
    }
  } else {
    FSDPRT_GROUP_FOR(i, n)
    p[j0 + i] = S::store(v[i]);
  }
}

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_ROWGROUPS_CUH
