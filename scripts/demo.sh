#!/usr/bin/env bash
# The main job, for now: set up, build, and compile the GPT-2 example into a
# sharded training step for 2 ranks, printing its module summary and the
# pre-launch report (peak memory per rank, every collective of a step).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh >/dev/null
FSDP_OPT="${BUILD_DIR:-build}/bin/fsdp-opt"
"$FSDP_OPT" examples/gpt2.mlir --fsdp-auto-wrap="policy=module-kind kinds=Block" \
  --fsdp-model-summary -o /dev/null
"$FSDP_OPT" examples/gpt2.mlir --fsdp-mixed-precision="param-dtype=bf16" \
  --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw lr=3e-4 clip-grad-norm=1.0 report=true" \
  -o "${BUILD_DIR:-build}/gpt2_train_step.mlir"
echo "train step written to ${BUILD_DIR:-build}/gpt2_train_step.mlir"
