//===- device_radix_sort.cuh - Host emulation of CUB's radix sort ---------===//
//
// cub::DeviceRadixSort::SortPairs as documented: the size query with a null
// temporary buffer, then a stable sort of the pairs by the key bits
// [beginBit, endBit) (emulated memory is host memory).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_CUDA_EMU_CUB_DEVICE_RADIX_SORT_CUH
#define FSDPRT_CUDA_EMU_CUB_DEVICE_RADIX_SORT_CUH

#include "cuda_runtime.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace cub {
struct DeviceRadixSort {
  template <typename K, typename V, typename N>
  static cudaError_t SortPairs(void *temp, size_t &tempBytes, const K *keysIn,
                               K *keysOut, const V *valuesIn, V *valuesOut,
                               N n, int beginBit, int endBit,
                               cudaStream_t s) {
    if (!temp) {
      tempBytes = 1;
      return cudaSuccess;
    }
    emuRun(s, [=] {
      sort(keysIn, keysOut, valuesIn, valuesOut, n, beginBit, endBit);
    });
    return cudaSuccess;
  }

private:
  template <typename K, typename V, typename N>
  static void sort(const K *keysIn, K *keysOut, const V *valuesIn,
                   V *valuesOut, N n, int beginBit, int endBit) {
    using U = std::make_unsigned_t<K>;
    U mask = endBit >= int(sizeof(K) * 8) ? U(~U(0))
                                          : U((U(1) << endBit) - 1);
    mask &= U(~U(0)) << beginBit;
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t(0));
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return (U(keysIn[a]) & mask) < (U(keysIn[b]) & mask);
    });
    std::vector<K> keys(order.size());
    std::vector<V> values(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      keys[i] = keysIn[order[i]];
      values[i] = valuesIn[order[i]];
    }
    std::copy(keys.begin(), keys.end(), keysOut);
    std::copy(values.begin(), values.end(), valuesOut);
  }
};
} // namespace cub

#endif
