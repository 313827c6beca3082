#!/usr/bin/env bash
# Runs the full parity matrix of test/Run/test_parity.py (FSDP_PARITY_FULL=1:
# 3 models x 4 strategies x 3 backward x 2 forward prefetch x ranks 2-4 x
# sgd/adamw = 360 configurations, plus the bf16 and delay checks) with the
# built tools, then prints the pass/fail summary. Then, when torch is
# importable, the full PyTorch oracle sweep (FSDP_ORACLE_FULL=1
# python/tests/test_torch_oracle*.py: every oracle model x ranks 1/2/4 x
# strategy x sgd/adamw against torch), with the PYTHONPATH of the CTest test
# python_oracles; each case prints its worst differences.
#   scripts/parity-sweep.sh [extra pytest arguments, e.g. -k gpt2 or -x]
# The extra arguments go to both sweeps (a -k that selects nothing in one is
# not a failure). FSDP_OPT / FSDP_RUN override the tools (default:
# $BUILD_DIR/bin, build/bin); PYTHON the interpreter.
set -uo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
source scripts/built-tools.sh parity-sweep

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
FSDP_PARITY_FULL=1 "$python" -m pytest test/Run/test_parity.py \
  -p no:cacheprovider -q -rfExX --tb=line "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
[[ $status == 5 ]] && status=0  # -k selected nothing here

echo
echo "=== parity sweep: $((SECONDS - start)) s ==="
grep -E '^(FAILED|ERROR|XFAIL|XPASS) ' "$log" || echo "every configuration matches the reference"
tail -n 1 "$log"

echo
if ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "=== torch oracle sweep: skipped (torch is not importable by $python) ==="
  exit "$status"
fi
start=$SECONDS
FSDP_ORACLE_FULL=1 PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" -m pytest python/tests/test_torch_oracle*.py -p no:cacheprovider \
  -q -s -rfExX --tb=short "$@" 2>&1 | tee "$log"
oracle=${PIPESTATUS[0]}
[[ $oracle == 5 ]] && oracle=0

echo
echo "=== torch oracle sweep: $((SECONDS - start)) s ==="
grep -E '^(FAILED|ERROR|XFAIL|XPASS) ' "$log" || echo "every configuration matches torch"
tail -n 1 "$log"
(( status != 0 )) && exit "$status"
exit "$oracle"
