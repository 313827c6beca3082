#!/usr/bin/env bash
# The main job, for now: set up, build, and compile the GPT-2 example with
# fsdp-opt, printing its module tree with parameter counts and bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh >/dev/null
"${BUILD_DIR:-build}/bin/fsdp-opt" examples/gpt2.mlir --fsdp-model-summary -o /dev/null
