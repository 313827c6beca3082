#!/usr/bin/env bash
# Sets up a fresh machine, builds, and runs every test (lit, GoogleTest,
# pytest) through CTest, which prints the closing summary.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" -j "${JOBS:-$(nproc)}" --output-on-failure
