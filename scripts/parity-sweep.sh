#!/usr/bin/env bash
# Runs the full parity matrix of test/Run/test_parity.py (FSDP_PARITY_FULL=1:
# 3 models x 4 strategies x 3 backward x 2 forward prefetch x ranks 2-4 x
# sgd/adamw = 360 configurations, plus the bf16 and delay checks) with the
# built tools, then prints the pass/fail summary.
#   scripts/parity-sweep.sh [extra pytest arguments, e.g. -k gpt2 or -x]
# FSDP_OPT / FSDP_RUN override the tools (default: $BUILD_DIR/bin, build/bin).
set -uo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
export FSDP_OPT="${FSDP_OPT:-$PWD/$build/bin/fsdp-opt}"
export FSDP_RUN="${FSDP_RUN:-$PWD/$build/bin/fsdp-run}"
export FSDP_PARITY_FULL=1
for tool in "$FSDP_OPT" "$FSDP_RUN"; do
  [[ -x "$tool" ]] || { echo "parity-sweep: $tool not found (build first)" >&2; exit 2; }
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
"${PYTHON:-python3}" -m pytest test/Run/test_parity.py -p no:cacheprovider -q -rfExX \
  --tb=line "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

echo
echo "=== parity sweep: $((SECONDS - start)) s ==="
grep -E '^(FAILED|ERROR|XFAIL|XPASS) ' "$log" || echo "every configuration matches the reference"
tail -n 1 "$log"
exit "$status"
