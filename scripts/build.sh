#!/usr/bin/env bash
# Configures (once) and builds fsdp-mlir in $BUILD_DIR (default: build).
# clang + lld + Ninja by default; CC=gcc CXX=g++ scripts/build.sh uses g++.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
LLVM_DIR=/usr/lib/llvm-22
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="${CC:-clang}" \
    -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DLLVM_USE_LINKER=lld \
    -DMLIR_DIR="$LLVM_DIR/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_DIR/bin/lit" \
    ${CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
