#!/usr/bin/env bash
# Makes the GPU lease kit: one folder (at most 48 MiB) that a GPU machine
# without network or package manager runs with one command,
#   <kit>/gpu-lease.sh        (results JSON and logs into $OUT)
# It holds the prebuilt LLVM-free runner, runtime, CUDA conformance tests and
# kernel benchmark,
# the shared libraries such an image lacks (xz-compressed, unpacked there),
# step libraries of the validation models (f32 and bf16, 1 rank), the CPU
# backend's reference losses and final weights, the PyTorch GPT-2 124M
# timing script, and the runtime's sources for a CUDA-only rebuild there if
# the prebuilt binaries cannot load. Then checks the kit here as far as a
# machine without a GPU can: its size, and its runner training a model on
# --backend cpu from a clean copy with only the kit's libraries added.
#   scripts/gpu-bundle.sh [KIT_DIR]      (default build/gpu-bundle)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
KIT=${1:-build/gpu-bundle}
BUILD=${BUILD_DIR:-build}
LIMIT_MIB=48
STEPS=5

[ -x "$BUILD/bin/fsdprt-run" ] || scripts/build.sh >/dev/null
if [ ! -x "$BUILD/runtime/unittests/fsdprt_cuda_unittests" ]; then
  echo "gpu-bundle: the CUDA backend was not built in $BUILD (no nvcc or" \
       "cuBLAS when it was configured); the kit needs it" >&2
  exit 1
fi
rm -rf "$KIT"
mkdir -p "$KIT"/{bin,lib,steps,reference,python,src}
KIT=$(cd "$KIT" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

echo "== binaries and the libraries a CUDA image lacks"
BINARIES=("$BUILD/bin/fsdprt-run" "$BUILD/bin/fsdprt-comm-check"
          "$BUILD/runtime/unittests/fsdprt_cuda_unittests"
          "$BUILD/runtime/bench/fsdprt_cuda_bench")
# cuDNN's convolutions against the direct kernels (built with cuDNN's headers).
CUDNN_CONV_TESTS="$BUILD/runtime/unittests/fsdprt_cudnn_conv_tests"
[ ! -x "$CUDNN_CONV_TESTS" ] || BINARIES+=("$CUDNN_CONV_TESTS")
cp "${BINARIES[@]}" "$KIT/bin/"
# The image brings glibc and CUDA (cudart, cuBLAS, NCCL and cuDNN from its
# toolkit and wheels); everything else the binaries load travels, large
# files xz-compressed (gpu-lease.sh unpacks them).
SYSTEM='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv)\.so'
CUDA='^(libcudart|libcublas|libcublasLt|libnccl|libcudnn|libcuda)\.so'
ldd "${BINARIES[@]}" | awk '/=> \//{print $1, $3}' | sort -u |
  while read -r name path; do
    if [[ $name =~ $SYSTEM || $name =~ $CUDA ]]; then continue; fi
    if [ "$(stat -Lc %s "$path")" -gt 262144 ]; then
      xz -T2 -6 -c "$path" >"$KIT/lib/$name.xz"
    else
      cp -L "$path" "$KIT/lib/$name"
    fi
  done
# The newest glibc symbol version the binaries need: gpu-lease.sh compares
# it with the image's before running anything.
glibc=$(objdump -T "${BINARIES[@]}" "$BUILD"/runtime/src/libfsdp_runtime.so |
  grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)

echo "== step libraries and CPU references"
# save_parameters CHECKPOINT OUT: the parameters only (the optimizer state
# would double the kit).
save_parameters() {
  python3 - "$1" "$2" <<'PY'
import sys
from safetensors.numpy import load_file, save_file
tensors = load_file(sys.argv[1])
save_file({k: v for k, v in tensors.items() if not k.startswith("optim.")},
          sys.argv[2])
PY
}
PY=(env PYTHONPATH="$REPO/python" python3 -m fsdp_mlir.models)
"${PY[@]}" llama_tiny -o "$WORK/llama_tiny.mlir"
"${PY[@]}" gpt2_124m -o "$WORK/gpt2_124m.mlir"
"${PY[@]}" gpt2_124m --batch 64 -o "$WORK/gpt2_124m_b64.mlir"
# name | model IR | pipeline options | reference run on CPU here
MODELS=(
  "char_gpt|examples/char_gpt.mlir|auto-wrap-policy=module-kind wrap-kinds=Block|yes"
  "gpt2|examples/gpt2.mlir|auto-wrap-policy=module-kind wrap-kinds=Block|yes"
  "llama_tiny|$WORK/llama_tiny.mlir|auto-wrap-policy=module-kind wrap-kinds=LlamaDecoderLayer|yes"
  "nested_wrapped|examples/nested_wrapped.mlir||yes"
  # CPU offload: pinned host buffers, copy streams and the optimizer on the
  # host beside the device's kernels (the same losses as without offload).
  "gpt2_offload|examples/gpt2.mlir|auto-wrap-policy=module-kind wrap-kinds=Block cpu-offload=true|yes"
  "gpt2_124m|$WORK/gpt2_124m.mlir|auto-wrap-policy=module-kind wrap-kinds=Block|no"
  # The lm head as the model declares it (50257 classes, no fsdp-pad-vocab):
  # bf16 only, the lease's A/B of the compile-time padding.
  "gpt2_124m_unpadded|$WORK/gpt2_124m.mlir|auto-wrap-policy=module-kind wrap-kinds=Block pad-vocab=0|no"
  # Attention without kept softmax statistics (fsdp-keep-attention-stats
  # off): each backward regenerates its forward; bf16 only, the A/B.
  # llm.c's batch (64 x 1024): bf16 only, tokens/s at the largest batch.
  "gpt2_124m_b64|$WORK/gpt2_124m_b64.mlir|auto-wrap-policy=module-kind wrap-kinds=Block|no"
  "gpt2_124m_nostats|$WORK/gpt2_124m.mlir|auto-wrap-policy=module-kind wrap-kinds=Block keep-attention-stats=false|no"
  # Issue 41's opt-in fusions together (residual add + layer_norm forward
  # and backward, bias + GELU in cuBLASLt's epilogues, every unit's update
  # in one multi-tensor launch): bf16 only, the A/B that decides whether
  # they become the default.
  "gpt2_124m_fused|$WORK/gpt2_124m.mlir|auto-wrap-policy=module-kind wrap-kinds=Block fuse-add-layer-norm=true fuse-bias-gelu=true fused-optimizer=true|no"
)
# Convolutional networks (issue 38), where torchvision is installed:
# MobileNetV2 at a quarter width (0.24M parameters: references small
# enough for the kit) on 32 x 32 images, batch 8, against the CPU backend
# here: batch norm, depthwise and pointwise convolutions, ReLU6; and
# ResNet-50 at 224 x 224, batch 32 (the lease's resnet part).
if python3 -c "import torchvision" 2>/dev/null; then
  TV=(env PYTHONPATH="$REPO/python" python3 scripts/gpu-kit/torchvision_step.py)
  "${TV[@]}" mobilenet_v2 --image 32 --batch 8 --classes 10 \
    --arg width_mult=0.25 --arg dropout=0.0 -o "$WORK/mobilenet_v2.mlir"
  "${TV[@]}" resnet50 --image 224 --batch 32 -o "$WORK/resnet50.mlir"
  MODELS+=(
    "mobilenet_v2|$WORK/mobilenet_v2.mlir|auto-wrap-policy=module-kind wrap-kinds=InvertedResidual|yes"
    "resnet50|$WORK/resnet50.mlir|auto-wrap-policy=module-kind wrap-kinds=Bottleneck|no")
fi
# Mixture of experts (issue 38), where transformers is installed: a tiny
# Mixtral (4 experts, top-2) against the CPU backend here, and a
# Mixtral-shaped 1B (hidden 1024, 4 layers, 8 experts, top-2, one rank's
# 4 x 1024 tokens) for the lease's moe part.
if python3 -c "import transformers" 2>/dev/null; then
  MX=(env PYTHONPATH="$REPO/python" python3 scripts/gpu-kit/mixtral_step.py)
  "${MX[@]}" --hidden 64 --ffn 128 --layers 2 --heads 4 --kv-heads 2 \
    --experts 4 --vocab 256 --seq 64 --batch 4 -o "$WORK/mixtral_tiny.mlir"
  "${MX[@]}" -o "$WORK/mixtral_1b.mlir"
  MODELS+=(
    "mixtral_tiny|$WORK/mixtral_tiny.mlir|auto-wrap-policy=module-kind wrap-kinds=MixtralDecoderLayer|yes"
    "mixtral_1b|$WORK/mixtral_1b.mlir|auto-wrap-policy=module-kind wrap-kinds=MixtralDecoderLayer|no")
fi
# Steps are <model>-<dtype>-<optimizer>: SGD is linear in the gradient, so
# its parity bound is tight; AdamW is what users run (compare_reference.py).
for entry in "${MODELS[@]}"; do
  IFS='|' read -r name ir options reference <<<"$entry"
  for dtype in f32 bf16; do
    [[ $name = gpt2_124m_* ]] && [ "$dtype" = f32 ] && continue
    mp=""
    [ "$dtype" = bf16 ] && mp="param-dtype=bf16"
    for optimizer in adamw sgd; do
      [ "$reference" = no ] && [ $optimizer = sgd ] && continue
      step="$name-$dtype-$optimizer"
      "$BUILD/bin/fsdp-compile" "$ir" -o "$KIT/steps/$step.so" \
        --fsdp-pipeline="world-size=1 $options optimizer=$optimizer $mp lower=true"
      [ "$reference" = yes ] || continue
      "$BUILD/bin/fsdprt-run" "$KIT/steps/$step.so" --backend cpu \
        --steps $STEPS --seed 0 --quiet --metrics "$KIT/reference/$step.jsonl" \
        --save "$WORK/$step"
      save_parameters "$WORK/$step/step-$STEPS.safetensors" \
        "$KIT/reference/$step.safetensors"
    done
  done
done

echo "== multi-rank step libraries and CPU (Gloo) references"
# The lease's multirank part runs these with one NCCL rank per process on
# the one GPU (loopback sockets) against the CPU backend's runs at the same
# rank count: <model>_r<ranks>[_<strategy>]-<dtype>-<optimizer>.
MULTIRANK=(
  "nested_wrapped_r2|examples/nested_wrapped.mlir|2||f32|adamw"
  "gpt2_r2|examples/gpt2.mlir|2|auto-wrap-policy=module-kind wrap-kinds=Block|f32|sgd"
  "gpt2_r2|examples/gpt2.mlir|2|auto-wrap-policy=module-kind wrap-kinds=Block|bf16|adamw"
  "gpt2_r2_sgo|examples/gpt2.mlir|2|auto-wrap-policy=module-kind wrap-kinds=Block sharding-strategy=shard-grad-op|f32|adamw"
  "gpt2_r4_hybrid|examples/gpt2.mlir|4|auto-wrap-policy=module-kind wrap-kinds=Block sharding-strategy=hybrid-shard shard-group-size=2|f32|sgd"
)
mkdir -p "$KIT/steps/multirank" "$KIT/reference/multirank"
for entry in "${MULTIRANK[@]}"; do
  IFS='|' read -r name ir ranks options dtype optimizer <<<"$entry"
  step="$name-$dtype-$optimizer"
  mp=""
  [ "$dtype" = bf16 ] && mp="param-dtype=bf16"
  "$BUILD/bin/fsdp-compile" "$ir" -o "$KIT/steps/multirank/$step.so" \
    --fsdp-pipeline="world-size=$ranks $options optimizer=$optimizer $mp lower=true"
  "$BUILD/bin/fsdprt-run" "$KIT/steps/multirank/$step.so" --backend cpu \
    --nproc "$ranks" --steps $STEPS --seed 0 --quiet \
    --metrics "$KIT/reference/multirank/$step.jsonl" --save "$WORK/$step"
  save_parameters "$WORK/$step/step-$STEPS.safetensors" \
    "$KIT/reference/multirank/$step.safetensors"
done

echo "== scripts, PyTorch oracle, sources"
cp scripts/gpu-kit/gpu-lease.sh "$KIT/"
cp scripts/gpu-kit/*.py python/tests/torch_reference.py "$KIT/python/"
# A CUDA-only rebuild needs the runtime's sources, nlohmann-json and a
# googletest source tree (the image has cmake, ninja and nvcc, not these).
tar -C "$REPO" -cJf "$KIT/src/runtime.tar.xz" --exclude='*.pyc' runtime
tar -C /usr/include -cJf "$KIT/src/nlohmann.tar.xz" nlohmann
tar -C /usr/src -cJf "$KIT/src/googletest.tar.xz" googletest
cat >"$KIT/manifest.json" <<JSON
{"made": "$(date -u +%FT%TZ)", "commit": "$(git rev-parse --short HEAD)",
 "glibc_needed": "${glibc#GLIBC_}", "steps": $STEPS, "seed": 0,
 "cuda_archs": "$(grep -o 'CMAKE_CUDA_ARCHITECTURES:STRING=.*' "$BUILD/CMakeCache.txt" | cut -d= -f2)"}
JSON

size=$(du -sb "$KIT" | cut -f1)
echo "kit: $KIT, $(( size / 1024 / 1024 )) MiB ($size bytes; limit $LIMIT_MIB MiB)"
if [ "$size" -gt $(( LIMIT_MIB * 1024 * 1024 )) ]; then
  echo "gpu-bundle: the kit is larger than $LIMIT_MIB MiB" >&2
  exit 1
fi

echo "== check: the kit's runner trains on --backend cpu from a clean copy"
cp -r "$KIT" "$WORK/kit"
"$WORK/kit/gpu-lease.sh" --unpack-only
check="$WORK/check"
mkdir "$check"
(cd "$check" && env -i PATH=/usr/bin:/bin HOME="$check" \
  LD_LIBRARY_PATH="$WORK/kit/lib" \
  "$WORK/kit/bin/fsdprt-run" "$WORK/kit/steps/nested_wrapped-f32-adamw.so" \
  --backend cpu --steps $STEPS --seed 0 --quiet --metrics m.jsonl)
ldd "$WORK/kit/bin/fsdprt-run" | grep -E "libLLVM|libMLIR" &&
  { echo "gpu-bundle: the kit's runner links LLVM" >&2; exit 1; }
if cmp -s <(cut -d, -f2 "$check/m.jsonl") \
          <(cut -d, -f2 "$KIT/reference/nested_wrapped-f32-adamw.jsonl"); then
  echo "check: nested_wrapped-f32-adamw from the kit alone: the same $STEPS losses as the reference"
else
  echo "gpu-bundle: the kit's runner gave other losses than the reference" >&2
  exit 1
fi
