#!/usr/bin/env bash
# The architecture sweep (python/tests/arch_sweep.py): every model of its
# list built from a small config, imported, trained 5 steps at 2 CPU ranks
# and compared with torch; prints one line per model and writes the
# markdown table docs/Python.md keeps to $OUT (default: arch-sweep.md).
#   scripts/arch-sweep.sh [--only gpt2,falcon] [--jobs 2]
# FSDP_OPT / FSDP_RUN override the tools (default: $BUILD_DIR/bin, build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/built-tools.sh arch-sweep
export PYTHONPATH="$PWD/python:$PWD/python/tests${PYTHONPATH:+:$PYTHONPATH}"
exec "${PYTHON:-python3}" python/tests/arch_sweep.py \
  --markdown "${OUT:-arch-sweep.md}" "$@"
