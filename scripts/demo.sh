#!/usr/bin/env bash
# The main job: set up, build, compile the character-level GPT
# (examples/char_gpt.mlir: 4 layers, width 128, ~0.8M parameters) into a
# fully sharded training step for 2 ranks, and train it with fsdp-run on 2
# CPU ranks on the first 90% of data/shakespeare.txt. Prints the pre-launch
# report, a line per step, saves a checkpoint and says where the metrics and
# trace are, with the validation loss on the held-out last 10% every 200
# steps (the forward-only program, mode=eval, beside the training program);
# then evaluates the checkpoint on the training text and samples a few
# lines from it (fsdp-run --generate).
#   STEPS=300 scripts/demo.sh   (default 800 steps: ~1.5 minutes of training
#                                 on 2 cores, after the build)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh >/dev/null
BUILD="${BUILD_DIR:-build}"
OUT="${DEMO_DIR:-$BUILD/demo}"
mkdir -p "$OUT"

STEPS="${STEPS:-800}"
# Hold out the corpus's last 10% for validation.
python3 - data/shakespeare.txt "$OUT" <<'PY'
import sys
text = open(sys.argv[1], "rb").read()
cut = len(text) * 9 // 10
open(f"{sys.argv[2]}/train.txt", "wb").write(text[:cut])
open(f"{sys.argv[2]}/val.txt", "wb").write(text[cut:])
PY

WRAP="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block"
"$BUILD/bin/fsdp-opt" examples/char_gpt.mlir \
  --fsdp-pipeline="$WRAP optimizer=adamw lr=2e-3 lower=true" \
  -o "$OUT/char_gpt.lowered.mlir"
"$BUILD/bin/fsdp-opt" examples/char_gpt.mlir \
  --fsdp-pipeline="$WRAP mode=eval lower=true" -o "$OUT/char_gpt.eval.mlir"

# Validation loss on 20 held-out batches every 200 steps, by the eval
# program beside the training program on the same sharded weights.
"$BUILD/bin/fsdp-run" "$OUT/char_gpt.lowered.mlir" --nproc 2 \
  --steps "$STEPS" --data "$OUT/train.txt" --seed 0 \
  --eval-program "$OUT/char_gpt.eval.mlir" --eval-every 200 \
  --eval-data "$OUT/val.txt" --eval-batches 20 \
  --metrics "$OUT/metrics.jsonl" --trace "$OUT/trace.json" \
  --save "$OUT/checkpoints"

python3 - "$OUT/metrics.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
first, last = rows[0]["loss"], sum(r["loss"] for r in rows[-10:]) / min(10, len(rows))
print(f"loss: first step {first:.3f} (ln 128 = {math.log(128):.3f}), "
      f"mean of the last 10 steps {last:.3f}")
PY

echo "evaluating the step-$STEPS checkpoint on train.txt (20 batches), to set"
echo "beside the validation loss above:"
"$BUILD/bin/fsdp-run" "$OUT/char_gpt.eval.mlir" --nproc 2 --steps 20 \
  --data "$OUT/train.txt" --seed 0 --quiet \
  --load "$OUT/checkpoints/step-$STEPS.safetensors"

echo "a sample from step $STEPS (temperature 0.8, top-k 40, seed 1):"
"$BUILD/bin/fsdp-run" "$OUT/char_gpt.eval.mlir" --nproc 2 --quiet \
  --load "$OUT/checkpoints/step-$STEPS.safetensors" \
  --generate 300 --prompt "ROMEO:" --temperature 0.8 --top-k 40 --seed 1
