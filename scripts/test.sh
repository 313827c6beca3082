#!/usr/bin/env bash
# Sets up a fresh machine, builds, and runs every test (lit, GoogleTest,
# pytest) through CTest, then prints one summary line:
# "N passed, N failed, N skipped" (GPU cases skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --test-dir "${BUILD_DIR:-build}" -j "${JOBS:-$(nproc)}" --output-on-failure 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
total=$(grep -oE 'tests failed out of [0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)
failed=$(grep -oE '[0-9]+ tests failed out of' "$log" | grep -oE '^[0-9]+' || echo 0)
skipped=$(grep -c '(Skipped)$' "$log" || true)
echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped"
exit "$status"
