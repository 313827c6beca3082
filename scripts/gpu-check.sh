#!/usr/bin/env bash
# GPU validation of the CUDA backend, for a machine with an NVIDIA GPU, the
# CUDA toolkit (nvcc, cuBLAS) and NCCL:
#   1. configures and builds the runtime with the CUDA backend in $BUILD_DIR
#      (default build-gpu; CUDA_ARCHS overrides CMAKE_CUDA_ARCHITECTURES,
#      default "native", i.e. the GPUs of this machine; BUILD_TYPE defaults
#      to RelWithDebInfo, Debug also synchronises after every kernel launch),
#   2. runs the CTest cases labelled requires-gpu (the conformance suites on
#      "cuda", SKIPPED without a device), cuDNN's convolutions against the
#      direct kernels (cudnn_conv:*) and the communicator tests,
#   3. prints a summary: passed / failed / skipped per label.
# Exit status: 0 if everything ran and passed, 1 on failures, 2 if nothing
# could run on a GPU (no driver or no device: every GPU case skipped).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-gpu}
mkdir -p "$BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
JOBS=${JOBS:-$(nproc)}

echo "== GPU"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total \
    --format=csv,noheader || true
else
  echo "nvidia-smi not found: no NVIDIA driver on this machine"
fi

echo "== configure + build ($BUILD_DIR)"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake -S runtime -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DCMAKE_C_COMPILER="${CC:-clang}" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-native}" \
  -DFSDPRT_WITH_CUDA=ON ${CMAKE_ARGS:-} >"$BUILD_DIR/gpu-check.configure.log" 2>&1 || {
  cat "$BUILD_DIR/gpu-check.configure.log"; exit 1; }
if ! grep -q "CUDA backend: ON" "$BUILD_DIR/gpu-check.configure.log"; then
  echo "the CUDA backend was not configured (no nvcc or cuBLAS found):"
  grep "fsdp runtime:" "$BUILD_DIR/gpu-check.configure.log"
  exit 1
fi
start=$(date +%s)
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "build: $(( $(date +%s) - start )) s"

summary() { # label junit-file
  python3 - "$1" "$2" <<'PY'
import sys, xml.etree.ElementTree as ET
label, path = sys.argv[1], sys.argv[2]
cases = ET.parse(path).getroot().iter("testcase")
# CTest's JUnit: status "run" (passed), "fail", "notrun" (skipped,
# SKIP_RETURN_CODE) or "disabled".
counts = {"passed": 0, "failed": 0, "skipped": 0}
failed = []
for c in cases:
    status = c.get("status")
    if status is None:  # pytest's JUnit: failure / error / skipped children
        status = ("fail" if c.find("failure") is not None
                  or c.find("error") is not None else
                  "notrun" if c.find("skipped") is not None else "run")
    if status == "fail":
        failed.append(c.get("name"))
        counts["failed"] += 1
    elif status == "run":
        counts["passed"] += 1
    else:
        counts["skipped"] += 1
print(f"{label:>14}: {counts['passed']} passed, {counts['failed']} failed, "
      f"{counts['skipped']} skipped")
for name in failed:
    print(f"{'':>16}FAILED {name}")
PY
}

status=0
echo "== requires-gpu tests"
ctest --test-dir "$BUILD_DIR" -L requires-gpu -j "$JOBS" --output-on-failure \
  --output-junit "$BUILD_DIR/gpu-tests.xml" || status=1
# cuDNN's convolutions against the direct kernels (built where the
# configuration found cuDNN's headers).
echo "== cuDNN convolution tests"
ctest --test-dir "$BUILD_DIR" -R '^cudnn_conv:' --output-on-failure || status=1
echo "== communicator tests (NCCL cases need GPUs)"
ctest --test-dir "$BUILD_DIR" -L comm --output-on-failure \
  --output-junit "$BUILD_DIR/comm-tests.xml" || status=1

# End to end: the fsdp-run parity slice (test/Run/test_parity.py; the whole
# matrix with FSDP_PARITY_FULL=1) on --backend cuda, one GPU per rank, when
# MLIR 22 is installed to build the compiler (FULL_BUILD_DIR, default
# build-gpu-full).
parity_xml="$BUILD_DIR/parity-tests.xml"
if [ -d /usr/lib/llvm-22/lib/cmake/mlir ]; then
  echo "== fsdp-run parity on --backend cuda"
  FULL_BUILD_DIR=${FULL_BUILD_DIR:-build-gpu-full}
  BUILD_DIR="$FULL_BUILD_DIR" scripts/build.sh >/dev/null
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0)
  FSDP_RUN_BACKEND=cuda FSDP_RUN_MAX_RANKS="$gpus" \
    FSDP_OPT="$FULL_BUILD_DIR/bin/fsdp-opt" FSDP_RUN="$FULL_BUILD_DIR/bin/fsdp-run" \
    python3 -m pytest -q test/Run/test_parity.py -p no:cacheprovider \
      --junitxml="$parity_xml" || status=1
else
  echo "== fsdp-run parity skipped: MLIR 22 is not installed (scripts/setup.sh)"
fi

echo "== summary"
summary requires-gpu "$BUILD_DIR/gpu-tests.xml"
summary comm "$BUILD_DIR/comm-tests.xml"
[ -f "$parity_xml" ] && summary fsdp-run-cuda "$parity_xml"
ran=$(python3 - "$BUILD_DIR/gpu-tests.xml" <<'PY'
import sys, xml.etree.ElementTree as ET
print(sum(1 for c in ET.parse(sys.argv[1]).getroot().iter("testcase")
          if c.get("status") in ("run", "fail")))
PY
)
if [ "$status" -ne 0 ]; then
  echo "RESULT: FAILED"
  exit 1
fi
if [ "$ran" -eq 0 ]; then
  echo "RESULT: NO GPU (every requires-gpu case was skipped)"
  exit 2
fi
echo "RESULT: OK"
