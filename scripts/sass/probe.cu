// Probe kernels for xent_sass_count.sh: one thread's path through a
// cross-entropy row kernel with everything but the data fixed at compile
// time (thread PROBE_TID of a 1024-thread block, one bf16 row of 50257
// classes padded to 50304, target PROBE_TARGET, aligned rows, mean), so
// that the SASS left is the code that thread executes. The kernel sources
// come through sed (the script): kernels made __device__ functions, thread
// and block indices and the target constants. PROBE_TAIL: the lean
// kernel's `stored` (its launcher's choice on a Hopper: 7, none without a
// gradient).
#include PROBE_SOURCE

#if PROBE_LEAN // whole packs (aligned rows)
#define PROBE_K(held) PROBE_KERNEL<Bf16Storage, held, true>
#define PROBE_TAIL(stored) , stored
#else
#define PROBE_K(held) PROBE_KERNEL<Bf16Storage, held>
#define PROBE_TAIL(stored)
#endif

namespace fsdp {
namespace rt {
namespace cuda {
using T = uint16_t;
constexpr LogitRows kRows{1, 50257, 50304};
__global__ void __launch_bounds__(1024, PROBE_FWD_BLOCKS)
    probeForward(const T *x, double *terms) {
  PROBE_K(PROBE_FWD_HELD)(false, x, nullptr, nullptr, nullptr, terms,
                          nullptr, kRows, true, -100 PROBE_TAIL(0));
}
__global__ void __launch_bounds__(1024, 1)
    probeBackward(const T *x, const int64_t *count, const float *dloss,
                  T *dx) {
  PROBE_K(7)(false, x, nullptr, count, dloss, nullptr, dx, kRows, true,
             -100 PROBE_TAIL(7));
}
__global__ void __launch_bounds__(1024, 1)
    probeFused(T *x, const int64_t *count, const float *dloss,
               double *terms) {
  PROBE_K(7)(false, x, nullptr, count, dloss, terms, x, kRows, true,
             -100 PROBE_TAIL(7));
}
} // namespace cuda
} // namespace rt
} // namespace fsdp
