//===- Embedding.cu - Index checks, embedding forward and backward --------===//
//
// Device-side index checks (their verdicts read by the host at the next
// synchronisation), the embedding gather and its backward (CUB radix sort,
// then each id's rows summed in position order).
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"
#include "RowGroups.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// flags = {n, 0}: no bad position yet, no valid index counted.
__global__ void indexCheckInitKernel(unsigned long long *flags, int64_t n) {
  FSDPRT_GRID_STRIDE(i, 1) {
    flags[0] = static_cast<unsigned long long>(n);
    flags[1] = 0;
  }
}

/// firstBad holds the smallest offending position (initialised to n).
__global__ void checkIndexKernel(bool i32, const void *ids, int64_t n,
                                 int64_t limit, bool hasIgnore,
                                 int64_t ignoreIndex,
                                 unsigned long long *firstBad,
                                 unsigned long long *count) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t v = loadIndex(i32, ids, i);
    if (hasIgnore && v == ignoreIndex)
      continue;
    if (v < 0 || v >= limit)
      atomicMin(firstBad, static_cast<unsigned long long>(i));
    else if (count)
      atomicAdd(count, 1ull); // integer: order-independent
  }
}

/// verdict = {first bad position, the index there} (n and 0 when none).
__global__ void indexVerdictKernel(bool i32, const void *ids, int64_t n,
                                   const unsigned long long *flags,
                                   int64_t *verdict) {
  FSDPRT_GRID_STRIDE(i, 1) {
    int64_t bad = static_cast<int64_t>(flags[0]);
    verdict[0] = bad;
    verdict[1] = bad < n ? loadIndex(i32, ids, bad) : 0;
  }
}

/// Rows of out-of-range ids (reported by the index check at the next
/// synchronisation) are left as they are: nothing outside the table is read.
template <typename T>
__global__ void gatherKernel(bool i32, const void *ids, const T *table, T *out,
                             int64_t numIds, int64_t vocab, int64_t dim) {
  FSDPRT_GRID_STRIDE(e, numIds * dim) {
    int64_t i = e / dim, j = e % dim, id = loadIndex(i32, ids, i);
    if (id >= 0 && id < vocab)
      out[e] = table[id * dim + j];
  }
}

/// out[i] = i: the positions sorted along with the ids.
__global__ void iotaKernel(int64_t *out, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) { out[i] = i; }
}

/// Over the positions sorted by id (stable: equal ids keep position order),
/// the warp of each id's first position sums its rows of dy in that order,
/// as the CPU's scatter-add does, into the id's row of dtable: in f32,
/// rounded once to the storage type (no f32 copy of a 50k-row table). Its
/// lanes take the row's 8-element groups, in whole 16-byte packs where the
/// rows are aligned (RowGroups.cuh): a thread per element, each dividing
/// its index by the width, ran 6.9x the bandwidth ceiling on an H100.
template <typename K, typename S>
__global__ void embeddingSegmentsKernel(const K *sortedIds,
                                        const int64_t *positions,
                                        const typename S::T *dy,
                                        typename S::T *dtable, int64_t numIds,
                                        int64_t vocab, int64_t dim) {
  FSDPRT_WARP_ROW_STRIDE(s, numIds) {
    K id = sortedIds[s];
    if ((s > 0 && sortedIds[s - 1] == id) || id < 0 || id >= vocab)
      continue; // not a segment's start, or an id the check reports
    int64_t end = s + 1;
    while (end < numIds && sortedIds[end] == id)
      ++end;
    forWarpGroups(dim, [&](int64_t j0, int64_t n) {
      float acc[kRowGroup] = {}, v[kRowGroup];
      for (int64_t t = s; t < end; ++t) {
        loadGroup<S>(dy + positions[t] * dim, j0, n, v);
        FSDPRT_GROUP_FOR(i, n)
          acc[i] += v[i];
      }
      storeGroup<S>(dtable + static_cast<int64_t>(id) * dim, j0, n, acc);
    });
  }
}

/// Sorts (id, position) pairs by id with CUB's stable radix sort over the
/// bits the vocabulary needs, then sums each id's segment.
template <typename K, typename S>
void embeddingBackwardSorted(Stream s, const K *ids, const typename S::T *dy,
                             typename S::T *dtable, int64_t numIds,
                             int64_t vocab, int64_t dim) {
  int endBit = 1;
  while (endBit < 63 && (int64_t(1) << endBit) < vocab)
    ++endBit;
  Scratch keys(s, numIds * sizeof(K)), pos(s, 2 * numIds * 8);
  int64_t *posIn = pos.as<int64_t>(), *posOut = posIn + numIds;
  FSDPRT_LAUNCH(iotaKernel, numIds, s, posIn, numIds);
  size_t tempBytes = 0;
  checkCuda(cub::DeviceRadixSort::SortPairs(
                nullptr, tempBytes, ids, keys.as<K>(), posIn, posOut,
                numIds, 0, endBit, s),
            "cub::DeviceRadixSort::SortPairs (size)");
  Scratch temp(s, static_cast<int64_t>(tempBytes));
  checkCuda(cub::DeviceRadixSort::SortPairs(
                temp.as<void>(), tempBytes, ids, keys.as<K>(), posIn, posOut,
                numIds, 0, endBit, s),
            "cub::DeviceRadixSort::SortPairs");
  FSDPRT_LAUNCH_WARP_ROWS((embeddingSegmentsKernel<K, S>), numIds, s,
                          keys.as<K>(), posOut, dy, dtable, numIds, vocab,
                          dim);
}

} // namespace

void queueIndexCheck(Stream s, DType type, const void *ids, int64_t n,
                     int64_t limit, bool hasIgnore, int64_t ignoreIndex,
                     int64_t *countOut, IndexVerdict *verdict) {
  // flags: first bad position (n when none), count of valid indices; then
  // the verdict {first bad, its value} copied to the host.
  Scratch scratch(s, 32);
  auto *f = scratch.as<unsigned long long>();
  auto *v = reinterpret_cast<int64_t *>(f + 2);
  bool i32 = type == DType::I32;
  FSDPRT_LAUNCH(indexCheckInitKernel, 1, s, f, n);
  FSDPRT_LAUNCH(checkIndexKernel, n, s, i32, ids, n, limit, hasIgnore,
                ignoreIndex, f, countOut ? f + 1 : nullptr);
  FSDPRT_LAUNCH(indexVerdictKernel, 1, s, i32, ids, n, f, v);
  checkCuda(cudaMemcpyAsync(verdict, v, sizeof(IndexVerdict),
                            cudaMemcpyDeviceToHost, s),
            "cudaMemcpyAsync (index verdict)");
  if (countOut)
    checkCuda(cudaMemcpyAsync(countOut, f + 1, 8, cudaMemcpyDeviceToDevice, s),
              "cudaMemcpyAsync (index count)");
}

void embeddingForward(Stream s, DType idsType, const void *ids,
                      const void *table, void *out, int64_t elemSize,
                      int64_t numIds, int64_t vocab, int64_t dim) {
  bool i32 = idsType == DType::I32;
  int64_t n = numIds * dim;
  switch (elemSize) {
  case 2:
    FSDPRT_LAUNCH(gatherKernel<uint16_t>, n, s, i32, ids,
                  static_cast<const uint16_t *>(table),
                  static_cast<uint16_t *>(out), numIds,
                  vocab, dim);
    return;
  case 4:
    FSDPRT_LAUNCH(gatherKernel<uint32_t>, n, s, i32, ids,
                  static_cast<const uint32_t *>(table),
                  static_cast<uint32_t *>(out), numIds,
                  vocab, dim);
    return;
  default:
    FSDPRT_LAUNCH(gatherKernel<uint64_t>, n, s, i32, ids,
                  static_cast<const uint64_t *>(table),
                  static_cast<uint64_t *>(out), numIds,
                  vocab, dim);
  }
}

void embeddingBackward(Stream s, DType dt, DType idsType, const void *ids,
                       const void *dy, void *dtable, int64_t numIds,
                       int64_t vocab, int64_t dim) {
  fill(s, dt, dtable, vocab * dim, 0.0); // ids never seen: zero
  if (numIds == 0)
    return;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    auto *y = static_cast<const T *>(dy);
    auto *table = static_cast<T *>(dtable);
    if (idsType == DType::I32)
      embeddingBackwardSorted<int32_t, S>(s, static_cast<const int32_t *>(ids),
                                          y, table, numIds, vocab, dim);
    else
      embeddingBackwardSorted<int64_t, S>(s, static_cast<const int64_t *>(ids),
                                          y, table, numIds, vocab, dim);
  });
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
