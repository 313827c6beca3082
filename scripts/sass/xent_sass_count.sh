#!/usr/bin/env bash
# SASS instructions (and MUFU ops) one 50304-wide bf16 cross-entropy row
# costs on sm_90, for RowKernels.cu's kernels (default) and
# CrossEntropyLean.cu's (FSDPRT_XENT_KERNELS=lean): forward, backward and
# the fused in-place call. Each kernel is compiled as a probe (probe.cu)
# for threads 0, 32 and 992 (lane 0 of warps 0, 1 and 31: a warp issues
# what its lane 0 does); sass_count.py walks the probes' SASS. Needs nvcc
# and cuobjdump (PATH or CUOBJDUMP); no GPU. KEEP_SASS=dir keeps the
# probes' SASS.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || true)}
[ -n "$cuobjdump" ] || {
  echo "cuobjdump not found: put the CUDA toolkit's on PATH or set CUOBJDUMP" >&2
  exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -z "${KEEP_SASS:-}" ] || trap 'cp "$tmp"/*.sass "$KEEP_SASS"/; rm -rf "$tmp"' EXIT
cp "$root"/runtime/backends/cuda/*.{h,cuh,cu} "$tmp"/
# Indices and alignment fixed; kernels callable from the probes; the
# block reductions' shared memory volatile, so that a thread whose results
# only feed other threads' reads (as every thread of a warp but 0 in the
# forward) keeps its work under a constant thread index.
sed -i -e 's/threadIdx\.x/PROBE_TID/g' -e 's/blockDim\.x/1024u/g' \
  -e 's/blockIdx\.x/0u/g' -e 's/gridDim\.x/1u/g' \
  -e 's/loadIndex(i32, targets, r)/int64_t(PROBE_TARGET)/' \
  -e 's/^__global__ void __launch_bounds__(kWideThreads, kHeld > 0 ? 1 : 2)$/__device__ __forceinline__ void/' \
  -e 's/__shared__ T warps\[kWarp\];/__shared__ volatile T warps[kWarp];/' \
  "$tmp"/*.cu "$tmp"/*.cuh "$tmp"/*.h
sed -i 's/return reinterpret_cast<uintptr_t>(p) % 16 == 0;/return true;/' \
  "$tmp"/KernelSupport.cuh
cp "$root"/scripts/sass/probe.cu "$tmp"/
printf '%-8s %-6s %-14s %8s %6s %6s   (a warp; row: its 32 warps)\n' kernels thread call instrs mufu fp64
for kind in default lean; do
  if [ $kind = default ]; then
    src=RowKernels.cu kernel=crossEntropyRowsKernel fwdHeld=0 fwdBlocks=2
    lean=0
  else
    src=CrossEntropyLean.cu kernel=leanCrossEntropyKernel fwdHeld=7 fwdBlocks=1
    lean=1
  fi
  for tid in 0 32 992; do
    nvcc -arch=sm_90 -cubin -O3 -DNDEBUG -std=c++17 --expt-relaxed-constexpr \
      -I"$tmp" -I"$root/runtime/include" -I"$root/runtime" \
      -DPROBE_SOURCE="\"$src\"" -DPROBE_KERNEL=$kernel -DPROBE_TID=${tid}u \
      -DPROBE_TARGET=25000 -DPROBE_FWD_HELD=$fwdHeld \
      -DPROBE_FWD_BLOCKS=$fwdBlocks -DPROBE_LEAN=$lean -o "$tmp/$kind$tid.cubin" "$tmp/probe.cu"
    "$cuobjdump" -sass "$tmp/$kind$tid.cubin" > "$tmp/$kind$tid.sass"
  done
  python3 "$root/scripts/sass/sass_count.py" $kind "$tmp/${kind}0.sass" \
    "$tmp/${kind}32.sass" "$tmp/${kind}992.sass"
done
