#!/usr/bin/env bash
# The main job: set up, build, compile the character-level GPT
# (examples/char_gpt.mlir: 4 layers, width 128, ~0.8M parameters) into a
# fully sharded training step for 2 ranks, and train it with fsdp-run on 2
# CPU ranks on data/shakespeare.txt. Prints the pre-launch report, a line
# per step, then saves a checkpoint and says where the metrics and trace are.
#   STEPS=300 scripts/demo.sh   (default 800 steps: ~1.5 minutes of training
#                                 on 2 cores, after the build)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh >/dev/null
BUILD="${BUILD_DIR:-build}"
OUT="${DEMO_DIR:-$BUILD/demo}"
mkdir -p "$OUT"

"$BUILD/bin/fsdp-opt" examples/char_gpt.mlir \
  --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw lr=2e-3 lower=true" \
  -o "$OUT/char_gpt.lowered.mlir"

"$BUILD/bin/fsdp-run" "$OUT/char_gpt.lowered.mlir" --nproc 2 \
  --steps "${STEPS:-800}" --data data/shakespeare.txt --seed 0 \
  --metrics "$OUT/metrics.jsonl" --trace "$OUT/trace.json" \
  --save "$OUT/checkpoints"

python3 - "$OUT/metrics.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
first, last = rows[0]["loss"], sum(r["loss"] for r in rows[-10:]) / min(10, len(rows))
print(f"loss: first step {first:.3f} (ln 128 = {math.log(128):.3f}), "
      f"mean of the last 10 steps {last:.3f}")
PY
