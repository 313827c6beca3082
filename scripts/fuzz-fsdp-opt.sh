#!/usr/bin/env bash
# The long version of test/Fuzz/mutated-examples.test: COUNT (default 20000)
# mutated variants of the examples and op tests, from SEED. Failing variants
# are kept under $BUILD_DIR/fuzz-failures.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
python3 test/Fuzz/mutate.py --fsdp-opt "$BUILD_DIR/bin/fsdp-opt" \
  --count "${COUNT:-20000}" --seed "${SEED:-1}" --keep "$BUILD_DIR/fuzz-failures" \
  examples/*.mlir test/Dialect/NN/ops.mlir test/Dialect/FSDP/ops.mlir \
  test/Transforms/fsdp-build-train-step-vjp.mlir
