#!/usr/bin/env bash
# The one command of the GPU lease kit (made by scripts/gpu-bundle.sh):
#   <kit>/gpu-lease.sh [--unpack-only]
# On a GPU machine without network or package manager it checks the machine
# (nvidia-smi, driver, glibc, the NCCL / cuDNN / cuBLAS the image brings),
# runs the CUDA conformance suite, cuDNN's convolutions against the direct
# kernels, a 1-rank NCCL check, 1-rank training of
# every validation model against the CPU backend's reference (and queued
# against synchronous device work), ResNet-50's step (224 x 224, batch 32;
# convolutions on cuDNN, and f32 on the direct kernels for comparison),
# GPT-2 124M step times and a traced run,
# each CUDA kernel against its ceiling (fsdprt_cuda_bench) and PyTorch's
# time for the same step, each part under its own timeout, and writes
# $OUT/results.json plus one log per part (6.5 minutes on an H100). If the
# prebuilt binaries cannot load (an older glibc), it first rebuilds the
# runtime CUDA-only from the kit's sources. Exit 0 when every part passed.
#   PARTS=parity,gpt2_124m   runs only those parts (default: all, in order)
#   GPT2_RUNS="bf16:async:8" the gpt2_124m part's runs (dtype:mode:steps)
#   TORCH_BATCHES="8 64"     the torch part's batches (default 8)
#   PARITY_ONLY='gpt2-f32-*' the parity part's references whose step names
#                            match that glob (default: all; a rerun of one)
#   BACKEND=cpu              runs the training parts on the CPU backend (a
#                            dry run of the kit on a machine without a GPU)
#   PARTS=machine,multirank  2-4 NCCL ranks on the one GPU over loopback
#                            (not in the default list: its own command)
#   PARTS=machine,moe        the Mixtral-shaped step (1B, 8 experts) in bf16
#                            and f32 (not in the default list; its tiny
#                            Mixtral's parity is in the parity part)
#   PARTS=quick              the speed check (about 4 minutes): machine,
#                            conformance, GPT-2 124M bf16 graphed at 8 and
#                            64 x 1024 (each also with FSDPRT_GEMM_AUTOTUNE=1
#                            and with FSDPRT_NORM_KERNELS=lean)
#                            and the synchronous per-op trace,
#                            the bf16 kernel bench, Nsight Compute on the
#                            row kernels (where the image has ncu),
#                            torch.compile at 8 and 64
# The default part timeouts add up to under 10 minutes, one device command;
# T_<PART>=seconds overrides one (T_TORCH=420).
set -uo pipefail
PARTS=",${PARTS:-machine,conformance,cudnn_conv,nccl,parity,async_vs_sync,resnet,gpt2_124m,kernels,torch},"
if [ "$PARTS" = ",quick," ]; then
  PARTS=",machine,conformance,gpt2_124m,kernels,profile,torch,"
  GPT2_RUNS=${GPT2_RUNS:-bf16:async:8 bf16:fused:8 bf16:lean:8 bf16:leanxent:8 bf16:tune:8 bf16:b64:6 bf16:b64lean:6 bf16:b64tune:6 bf16:sync:5}
  TORCH_BATCHES=${TORCH_BATCHES:-8 64}
  TORCH_MODES=${TORCH_MODES:-compile_bf16}
  KERNEL_DTYPES=${KERNEL_DTYPES:-bf16}
fi
BACKEND=${BACKEND:-cuda}
# The conformance suites of the norms (runtime/unittests/CMakeLists.txt's
# cuda_emu_lean_norms runs the same).
LEAN_NORM_SUITES='*NormConformance*:*AddLayerNorm*:*LeanNorms*'
KIT=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$KIT/out}
mkdir -p "$OUT"
RESULTS="$OUT/parts.jsonl"
: >"$RESULTS"

unpack() { # lib/*.xz -> lib/*, once
  local f
  for f in "$KIT"/lib/*.xz; do
    [ -e "$f" ] || continue
    [ -e "${f%.xz}" ] && continue
    if command -v xz >/dev/null; then xz -dc "$f" >"${f%.xz}"
    else python3 -c 'import lzma,sys; open(sys.argv[2],"wb").write(lzma.open(sys.argv[1]).read())' "$f" "${f%.xz}"
    fi
  done
}
unpack
[ "${1:-}" = "--unpack-only" ] && exit 0

# Libraries: the kit's, then CUDA's from the toolkit and the Python wheels
# (nvidia/<pkg>/lib holds versioned .so files only).
LIBS="$KIT/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
         $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
  if [ -d "$d/nvidia" ]; then
    for lib in "$d"/nvidia/*/lib; do LIBS="$LIBS:$lib"; done
  elif [ -d "$d" ]; then LIBS="$LIBS:$d"; fi
done
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
BIN="$KIT/bin"
PY="$KIT/python"
# Python runs with the image's own libraries: the kit's libstdc++ (older than
# the image's) is for our binaries only and would break torch's extensions.
python() { env -u LD_LIBRARY_PATH python3 "$@"; }

# part NAME TIMEOUT CMD...: runs CMD, logs to $OUT/NAME.log, records status.
part() {
  local name=$1 limit=$2; shift 2
  [[ $PARTS == *",$name,"* ]] || return 0
  local start=$SECONDS
  echo "== $name"
  # The parts are shell functions: timeout runs them in a child bash.
  timeout "$limit" bash -c '"$@"' part "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local status=passed
  [ $rc -ne 0 ] && status=failed
  [ $rc -eq 124 ] && status="timed out after ${limit}s"
  echo "   $status ($(( SECONDS - start )) s)"
  tail -n 5 "$OUT/$name.log" | sed 's/^/   | /'
  python3 -c 'import json,sys; print(json.dumps({"part": sys.argv[1], "status": sys.argv[2], "exit": int(sys.argv[3]), "seconds": int(sys.argv[4])}))' \
    "$name" "$status" "$rc" "$(( SECONDS - start ))" >>"$RESULTS"
  return $rc
}

machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
  echo "glibc here: $(getconf GNU_LIBC_VERSION); the kit needs $(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["glibc_needed"])' "$KIT/manifest.json")"
  nvcc --version | tail -n 2
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  # cuDNN for the fused attention (opened at run time; absent: cuBLAS).
  local found="" d
  for d in ${LD_LIBRARY_PATH//:/ }; do
    [ -e "$d/libcudnn.so.9" ] && found="$d/libcudnn.so.9" && break
  done
  echo "${found:-no libcudnn.so.9: attention will run on cuBLAS, convolutions on the direct kernels}"
  python -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' || true
  local missing
  missing=$(ldd "$BIN/fsdprt-run" "$BIN/fsdprt_cuda_unittests" | grep "not found" | sort -u)
  [ -z "$missing" ] || { echo "missing libraries:"; echo "$missing"; return 1; }
  "$BIN/fsdprt-run" --help >/dev/null
}

# The prebuilt binaries cannot run here: rebuild the runtime CUDA-only (the
# configuration finds NCCL in the Python wheel by itself).
rebuild() {
  local src="$OUT/rebuild-src" build="$OUT/rebuild"
  mkdir -p "$src"
  for t in runtime nlohmann googletest; do tar -C "$src" -xJf "$KIT/src/$t.tar.xz"; done
  cmake -S "$src/runtime" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=native -DFSDPRT_WITH_CPU_BACKEND=OFF \
    -DFSDPRT_WITH_GLOO=OFF -DFSDPRT_NLOHMANN_JSON_INCLUDE_DIR="$src" \
    -DFSDPRT_GTEST_SOURCE_DIR="$src/googletest" &&
  cmake --build "$build" -j "$(nproc)" --target fsdprt-run fsdprt-comm-check fsdprt_cuda_unittests fsdprt_cuda_bench &&
  cp "$build"/bin/fsdprt-run "$build"/bin/fsdprt-comm-check "$build"/unittests/fsdprt_cuda_unittests "$build"/bench/fsdprt_cuda_bench "$BIN/" &&
  cp "$build"/src/libfsdp_runtime.so "$KIT/lib/" || return 1
  # Built where the rebuild found cuDNN's headers.
  if cmake --build "$build" --target fsdprt_cudnn_conv_tests; then
    cp "$build"/unittests/fsdprt_cudnn_conv_tests "$BIN/"
  else
    rm -f "$BIN/fsdprt_cudnn_conv_tests"
  fi
}

# Then the norm suites again with the lean norm kernels selected, and the
# loss suite with the lean cross-entropy kernels (FSDPRT_XENT_KERNELS=lean).
conformance() {
  local rc=0
  "$BIN/fsdprt_cuda_unittests" --gtest_output="json:$OUT/conformance.json" ||
    return 1
  FSDPRT_NORM_KERNELS=lean "$BIN/fsdprt_cuda_unittests" \
    --gtest_filter="$LEAN_NORM_SUITES" \
    --gtest_output="json:$OUT/conformance_lean_norms.json" || rc=1
  FSDPRT_XENT_KERNELS=lean "$BIN/fsdprt_cuda_unittests" \
    --gtest_filter='*LossConformance*' \
    --gtest_output="json:$OUT/conformance_lean_xent.json" || rc=1
  return $rc
}
# cuDNN's convolutions (forward, input and weight gradients; f32 and bf16)
# against the direct kernels over ResNet's, depthwise, 1-D and dilated
# geometries (the kit holds the test where its build had cuDNN's headers).
cudnn_conv() {
  [ -x "$BIN/fsdprt_cudnn_conv_tests" ] || { echo "no cuDNN convolution test in this kit"; return 1; }
  "$BIN/fsdprt_cudnn_conv_tests" --gtest_output="json:$OUT/cudnn_conv.json"
}

parity() {
  set -o pipefail
  local failed=0 runs=0 step dtype
  for ref in "$KIT"/reference/*.jsonl; do
    step=$(basename "$ref" .jsonl) # <model>-<dtype>-<optimizer>
    # shellcheck disable=SC2053 # a glob, on purpose
    [[ $step == ${PARITY_ONLY:-*} ]] || continue
    runs=$((runs + 1))
    IFS=- read -r _ dtype optimizer <<<"$step"
    mkdir -p "$OUT/runs/$step"
    if "$BIN/fsdprt-run" "$KIT/steps/$step.so" --backend "$BACKEND" --steps "$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' "$KIT/manifest.json")" \
         --seed 0 --quiet --metrics "$OUT/runs/$step/metrics.jsonl" --save "$OUT/runs/$step/ckpt"; then
      python "$PY/compare_reference.py" --dtype "$dtype" --optimizer "$optimizer" \
        "$OUT/runs/$step/metrics.jsonl" "$ref" \
        "$(ls "$OUT"/runs/"$step"/ckpt/step-*.safetensors | tail -1)" \
        "${ref%.jsonl}.safetensors" | tee "$OUT/runs/$step/compare.json" || failed=1
    else
      echo "{\"step\": \"$step\", \"ok\": false, \"problems\": [\"the run failed\"]}" | tee "$OUT/runs/$step/compare.json"
      failed=1
    fi
  done
  if [ "$runs" = 0 ]; then
    echo "parity: no reference matches PARITY_ONLY='${PARITY_ONLY:-}'"
    return 1
  fi
  return $failed
}

# The parity part's runs (the step replayed as a CUDA graph from its second
# step, the default) against FSDPRT_CUDA_SYNC=1 eager runs (every call
# waits for its work): the kernels are deterministic, so a missing
# device-side order or a stale per-step value in the graph shows as other
# bits.
async_vs_sync() {
  local step failed=0
  for step in char_gpt-f32-adamw gpt2-bf16-adamw llama_tiny-f32-sgd; do
    local dir="$OUT/runs/$step-sync"
    mkdir -p "$dir"
    FSDPRT_CUDA_SYNC=1 "$BIN/fsdprt-run" "$KIT/steps/$step.so" \
      --backend "$BACKEND" --steps 5 --seed 0 --quiet --cuda-graphs off \
      --metrics "$dir/metrics.jsonl" --save "$dir/ckpt" || return 1
    if cmp "$dir/ckpt/step-5.safetensors" \
         "$OUT/runs/$step/ckpt/step-5.safetensors"; then
      echo "$step: queued and synchronous runs bit-identical"
    else
      echo "$step: queued and synchronous runs differ"
      failed=1
    fi
  done
  return $failed
}

# GPT-2 124M: bf16 and f32 step times as the runner runs them (the step
# captured as a CUDA graph and replayed), bf16 with issue 41's opt-in
# fusions (the "fused" step: fuse-add-layer-norm, fuse-bias-gelu,
# fused-optimizer), bf16
# with the lean norm kernels (FSDPRT_NORM_KERNELS=lean, the "lean" run),
# bf16 with the lean cross-entropy kernels (FSDPRT_XENT_KERNELS=lean, the
# "leanxent" run), at batch 64 with both (the "b64lean" run), bf16
# eager (--cuda-graphs off: device work queued, the host ahead), bf16 with attention on cuBLAS
# instead of cuDNN (FSDPRT_CUDNN=0), bf16 queued and traced (eager: the
# traced times are the host's issue times), then bf16 with
# FSDPRT_CUDA_SYNC=1 (each call waits for its work: the traced per-op times
# are device times), and bf16 with the lm head unpadded (pad-vocab=0: the
# backend pads its GEMMs at run time instead), and bf16 without kept
# attention statistics (keep-attention-stats=false), and bf16 with cuDNN's
# non-deterministic attention backward (FSDPRT_CUDNN_DETERMINISTIC=0: its
# smaller scratch reserve, its time), and two eager bf16
# steps logging each op's per-call scratch outside the memory plan
# (FSDPRT_CUDA_SCRATCH_LOG=1, the "scratch" run). Traces leave out the first
# two steps (cuDNN graph builds, cuBLAS heuristics).
gpt2_124m() {
  local run
  for run in ${GPT2_RUNS:-bf16:async:8 bf16:fused:8 bf16:lean:8 \
             bf16:leanxent:8 bf16:eager:8 f32:async:5 \
             bf16:nocudnn:5 bf16:issue:5 bf16:sync:5 bf16:unpadded:5 \
             bf16:nostats:5 bf16:nondet:5 bf16:scratch:2}; do
    IFS=: read -r dtype mode steps <<<"$run"
    local name="gpt2_124m-$dtype" extra=() step="gpt2_124m-$dtype-adamw"
    local autotune=0
    [ "$mode" = async ] || name="$name-$mode"
    case $mode in
      unpadded|nostats|b64|fused) step="gpt2_124m_$mode-$dtype-adamw" ;;
      # tune / b64tune: cuBLASLt's candidates timed at the first step.
      tune) autotune=1 ;;
      b64tune) step="gpt2_124m_b64-$dtype-adamw" autotune=1 ;;
      b64lean) step="gpt2_124m_b64-$dtype-adamw" ;;
      eager) extra=(--cuda-graphs off) ;;
      scratch) extra=(--cuda-graphs off --quiet) ;;
      sync|issue)
        extra=(--trace "$OUT/$name.trace.json" --trace-skip 2 --trace-steps 3)
        ;;
    esac
    FSDPRT_GEMM_AUTOTUNE=$autotune \
    FSDPRT_NORM_KERNELS=$(case $mode in lean|b64lean) echo lean ;; *) echo default ;; esac) \
    FSDPRT_CUDA_SCRATCH_LOG=$([ "$mode" = scratch ] && echo 1 || echo 0) \
    FSDPRT_CUDNN=$([ "$mode" = nocudnn ] && echo 0 || echo 1) \
    FSDPRT_CUDNN_DETERMINISTIC=$([ "$mode" = nondet ] && echo 0 || echo 1) \
    FSDPRT_CUDA_SYNC=$([ "$mode" = sync ] && echo 1 || echo 0) \
    FSDPRT_XENT_KERNELS=$(case $mode in leanxent|b64lean) echo lean ;; *) echo default ;; esac) \
      "$BIN/fsdprt-run" "$KIT/steps/$step.so" \
      --backend "$BACKEND" --steps "$steps" --seed 0 \
      --metrics "$OUT/$name.jsonl" "${extra[@]}" || return 1
    if [ -f "$OUT/$name.trace.json" ]; then
      python "$PY/trace_summary.py" "$OUT/$name.trace.json" >"$OUT/$name.ops.json"
    fi
  done
}

# Losses and step times of steps/<name>-<dtype>-adamw.so, one rank, bf16
# and f32.
timed_steps() {
  local name=$1 dtype
  [ -f "$KIT/steps/$name-bf16-adamw.so" ] || { echo "no $name step in this kit"; return 1; }
  for dtype in bf16 f32; do
    "$BIN/fsdprt-run" "$KIT/steps/$name-$dtype-adamw.so" \
      --backend "$BACKEND" --steps 4 --seed 0 \
      --metrics "$OUT/$name-$dtype.jsonl" || return 1
  done
}
# Convolutional networks (issue 38): ResNet-50 at 224 x 224, batch 32 (the
# kit holds it where torchvision was installed when it was made), then f32
# with the direct convolution kernels (FSDPRT_CUDNN_CONV=0; 3 steps, the
# median past the first) to compare with cuDNN's.
resnet() {
  timed_steps resnet50 || return 1
  FSDPRT_CUDNN_CONV=0 "$BIN/fsdprt-run" "$KIT/steps/resnet50-f32-adamw.so" \
    --backend "$BACKEND" --steps 3 --seed 0 \
    --metrics "$OUT/resnet50-f32-direct.jsonl"
}
# Mixture of experts (issue 38): the Mixtral-shaped step (1B parameters,
# 8 experts, top-2, 4 x 1024 tokens; the grouped GEMMs' offsets stay on
# the device).
moe() { timed_steps mixtral_1b; }

# Multi-rank on the one GPU: 2-4 NCCL ranks, each a process of its own
# and, through a distinct NCCL_HOSTID, an NCCL "host" of its own, so that
# NCCL lets them share the device and connects them over sockets on
# loopback (correct, not fast: milliseconds per collective). Ranks start by
# hand with torchrun's environment. Checks, each a line of
# $OUT/multirank/checks.jsonl: the comm check at 2 and 4 ranks; every
# steps/multirank library (2 ranks; hybrid 2x2 at 4) against the CPU
# backend's run at the same rank count; the NCCL calls of the 2-rank runs
# the same on both ranks (NCCL's COLL log); the step graph at 2 ranks
# replaying the eager steps bit for bit; a killed rank and a stalled rank
# (SIGSTOP) end the other within MULTIRANK_DEADLINE seconds (the stall by
# the heartbeat, MULTIRANK_HEARTBEAT_MS, before the collective timeout).
# PARTS=machine,multirank runs it alone (about 3 minutes).
# start_ranks N LOG CMD...: N ranks of CMD in the background (pids in
# RANK_PIDS); rank r writes LOG.r and its NCCL log LOG.nccl.r.
start_ranks() {
  local n=$1 log=$2 r port
  shift 2
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  RANK_PIDS=()
  for ((r = 0; r < n; r++)); do
    env RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n \
      MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" NCCL_HOSTID="fsdp-rank-$r" \
      NCCL_SOCKET_IFNAME=lo NCCL_NET=Socket NCCL_IB_DISABLE=1 \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 \
      NCCL_COLLNET_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL \
      NCCL_DEBUG_FILE="$log.nccl.$r" "$@" >"$log.$r" 2>&1 &
    RANK_PIDS+=($!)
  done
}
wait_ranks() {
  local pid rc=0
  for pid in "${RANK_PIDS[@]}"; do wait "$pid" || rc=1; done
  return $rc
}
# check NAME STATUS DETAIL: one line of checks.jsonl (and of the log).
check() {
  echo "$1: $2 ${3:-}"
  python -c 'import json,sys; print(json.dumps({"check": sys.argv[1], "status": sys.argv[2], "detail": sys.argv[3]}))' \
    "$1" "$2" "${3:-}" >>"$OUT/multirank/checks.jsonl"
}
# The collectives of NCCL's COLL log: name, count, type, operator, root. A
# custom operator (a pre-multiplied sum: op >= ncclNumOps, 5) is a handle
# that differs between processes: "premulsum".
nccl_calls() {
  sed -nE 's/.* (AllGather|ReduceScatter|AllReduce|Broadcast|Reduce): opCount ([0-9a-f]+) .* count ([0-9]+) datatype ([0-9]+) op ([0-9]+) root ([0-9]+) .*/\1 \2 \3 \4 \5 \6/p' "$1" |
    awk '{ if ($5 >= 5) $5 = "premulsum"; print }'
}
# peer_failure STEP SIGNAL: trains STEP on 2 ranks, sends SIGNAL to rank 1
# once training is under way, and says how long rank 0 took to end.
peer_failure() {
  local step=$1 signal=$2 dir="$OUT/multirank/$2" start waited=0
  mkdir -p "$dir"
  FSDPRT_COLLECTIVE_TIMEOUT_MS=$(( ${MULTIRANK_STALL_TIMEOUT:-10} * 1000 )) \
    FSDPRT_HEARTBEAT_TIMEOUT_MS=${MULTIRANK_HEARTBEAT_MS:-3000} \
    start_ranks 2 "$dir/rank" "$BIN/fsdprt-run" "$KIT/steps/multirank/$step.so" \
    --backend "$BACKEND" --steps 100000 --seed 0 --quiet --metrics "$dir/metrics.jsonl"
  local rank0=${RANK_PIDS[0]} rank1=${RANK_PIDS[1]}
  until [ "$(cat "$dir/metrics.jsonl" 2>/dev/null | wc -l)" -ge 2 ]; do
    sleep 0.2
    waited=$(( waited + 1 ))
    if [ $waited -gt 600 ] || ! kill -0 "$rank0" 2>/dev/null; then
      kill -9 "${RANK_PIDS[@]}" 2>/dev/null
      check "peer_$signal" failed "training did not start"
      return 1
    fi
  done
  kill "-$signal" "$rank1"
  start=$(date +%s.%N)
  local deadline=$(( $(date +%s) + ${MULTIRANK_DEADLINE:-60} ))
  while kill -0 "$rank0" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
  local seconds
  seconds=$(python -c "import sys; print(f'{float(sys.argv[1]) - float(sys.argv[2]):.1f}')" "$(date +%s.%N)" "$start")
  local alive=0
  kill -0 "$rank0" 2>/dev/null && alive=1
  kill -9 "${RANK_PIDS[@]}" 2>/dev/null
  { wait "${RANK_PIDS[@]}"; } 2>/dev/null # their "Killed" notices too
  local message
  message=$(grep -m1 "error" "$dir/rank.0" | cut -c1-300)
  if [ $alive = 1 ]; then
    check "peer_$signal" failed "rank 0 still running ${MULTIRANK_DEADLINE:-60} s after SIG$signal to rank 1"
    return 1
  fi
  check "peer_$signal" passed "rank 0 ended ${seconds} s after SIG$signal to rank 1: $message"
}

multirank() {
  local dir="$OUT/multirank" failed=0 n so step ranks dtype optimizer
  mkdir -p "$dir"
  : >"$dir/checks.jsonl"
  for n in 2 4; do
    start_ranks "$n" "$dir/comm$n" "$BIN/fsdprt-comm-check" --backend "$BACKEND" --numel 100003
    if wait_ranks; then check "comm_check_$n" passed
    else check "comm_check_$n" failed "$(cat "$dir/comm$n".* | grep -m3 -iE "wrong|error")"; failed=1; fi
  done
  local steps
  steps=$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"])' "$KIT/manifest.json")
  for so in "$KIT"/steps/multirank/*.so; do
    step=$(basename "$so" .so)
    [[ $step =~ _r([0-9]+) ]] && ranks=${BASH_REMATCH[1]}
    IFS=- read -r _ dtype optimizer <<<"$step"
    mkdir -p "$dir/$step"
    # Not --quiet: graph_replay reads whether rank 0 captured the step.
    start_ranks "$ranks" "$dir/$step/rank" "$BIN/fsdprt-run" "$so" \
      --backend "$BACKEND" --steps "$steps" --seed 0 \
      --metrics "$dir/$step/metrics.jsonl" --save "$dir/$step/ckpt"
    if ! wait_ranks; then
      check "parity_$step" failed "$(grep -h -m1 error "$dir/$step"/rank.* | cut -c1-300)"
      failed=1
      continue
    fi
    if python "$PY/compare_reference.py" --dtype "$dtype" --optimizer "$optimizer" \
         "$dir/$step/metrics.jsonl" "$KIT/reference/multirank/$step.jsonl" \
         "$dir/$step/ckpt/step-$steps.safetensors" \
         "$KIT/reference/multirank/$step.safetensors" >"$dir/$step/compare.json"; then
      check "parity_$step" passed "$(cat "$dir/$step/compare.json")"
    else
      check "parity_$step" failed "$(cat "$dir/$step/compare.json")"
      failed=1
    fi
    [ "$ranks" = 2 ] || continue
    if [ ! -s "$dir/$step/rank.nccl.0" ]; then
      check "nccl_calls_$step" skipped "no NCCL log (backend $BACKEND)"
    elif cmp -s <(nccl_calls "$dir/$step/rank.nccl.0") <(nccl_calls "$dir/$step/rank.nccl.1"); then
      check "nccl_calls_$step" passed "$(nccl_calls "$dir/$step/rank.nccl.0" | wc -l) calls, the same on both ranks"
    else
      check "nccl_calls_$step" failed "the ranks' NCCL calls differ"
      failed=1
    fi
  done
  graph_replay gpt2_r2-f32-sgd "$steps" || failed=1
  peer_failure gpt2_r2-f32-sgd KILL || failed=1
  peer_failure gpt2_r2-f32-sgd STOP || failed=1
  return $failed
}

# graph_replay STEP STEPS: the parity run above (the step graph captured at
# step 2 and replayed, the default) against the same run with every step
# eager: bit for bit, losses and checkpoint.
graph_replay() {
  local step=$1 steps=$2 dir="$OUT/multirank/$1-eager"
  mkdir -p "$dir"
  start_ranks 2 "$dir/rank" "$BIN/fsdprt-run" "$KIT/steps/multirank/$step.so" \
    --backend "$BACKEND" --steps "$steps" --seed 0 --cuda-graphs off \
    --metrics "$dir/metrics.jsonl" --save "$dir/ckpt"
  if ! wait_ranks; then
    check "graph_replay_$step" failed "$(grep -h -m1 error "$dir"/rank.* | cut -c1-300)"
    return 1
  fi
  local graph="$OUT/multirank/$step" captured=no
  grep -q "one CUDA graph from here on" "$graph/rank.0" && captured=yes
  local rc=0
  python - "$graph" "$dir" "$steps" <<'PY' || rc=1
import json, sys
from safetensors.numpy import load_file
graph, eager, steps = sys.argv[1], sys.argv[2], sys.argv[3]
loss = lambda d: [json.loads(l)["loss"] for l in open(f"{d}/metrics.jsonl")]
a = load_file(f"{graph}/ckpt/step-{steps}.safetensors")
b = load_file(f"{eager}/ckpt/step-{steps}.safetensors")
sys.exit(0 if loss(graph) == loss(eager) and a.keys() == b.keys() and
         all((a[k] == b[k]).all() for k in a) else 1)
PY
  # (Not `if python - <<PY`: an exported function with a here-document in
  # a condition does not import back into bash.)
  if [ $rc = 0 ]; then
    check "graph_replay_$step" passed "captured: $captured; $steps steps bit-identical to eager"
  else
    check "graph_replay_$step" failed "captured: $captured; differs from eager"
    return 1
  fi
}

# Each CUDA kernel at the step's shapes against cuBLAS / copy bandwidth.
kernels() {
  local dt batch v
  for dt in ${KERNEL_DTYPES:-bf16 f32}; do
    "$BIN/fsdprt_cuda_bench" --dtype "$dt" || return 1
  done
  echo "== norms at batch 64"
  "$BIN/fsdprt_cuda_bench" --dtype bf16 --only norm --batch 64 || return 1
  echo "== GEMMs with FSDPRT_GEMM_AUTOTUNE=1"
  FSDPRT_GEMM_AUTOTUNE=1 "$BIN/fsdprt_cuda_bench" --dtype bf16 --only gemm ||
    return 1
}

# Nsight Compute on the norm and cross-entropy kernels where the image has
# ncu and lets it read the counters: occupancy, throughput, stall reasons,
# and for the norms (the streaming kernels, then the lean ones) which pipes
# their instructions keep busy and where the warps stall (the source
# counters' hottest SASS lines).
profile() {
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { echo "no ncu on this machine"; return 1; }
  local kernels
  for kernels in default lean; do
    FSDPRT_NORM_KERNELS=$kernels "$ncu" --section SpeedOfLight \
      --section Occupancy --section LaunchStats \
      --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section ComputeWorkloadAnalysis --section InstructionStats \
      --section SourceCounters --print-details all \
      --kernel-name regex:'[lL]ayerNorm|normColumns' --launch-count 3 \
      "$BIN/fsdprt_cuda_bench" --dtype bf16 --only norm --iters 1
  done
  "$ncu" --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --kernel-name regex:'crossEntropy' --launch-count 2 \
    "$BIN/fsdprt_cuda_bench" --dtype bf16 --only loss --iters 1
}

torch_step() {
  local batch suffix
  for batch in ${TORCH_BATCHES:-8}; do
    suffix=""
    [ "$batch" = 8 ] || suffix="_b$batch"
    (cd "$PY" && python torch_gpt2_step.py --steps 10 --warmup 3 \
       --batch "$batch" ${TORCH_MODES:+--modes "$TORCH_MODES"} \
       --out "$OUT/torch_gpt2_124m$suffix.json") || return 1
  done
}

export KIT OUT BIN PY BACKEND LD_LIBRARY_PATH GPT2_RUNS TORCH_BATCHES TORCH_MODES \
  KERNEL_DTYPES
export -f python machine rebuild conformance cudnn_conv parity async_vs_sync timed_steps resnet moe gpt2_124m kernels profile torch_step \
  start_ranks wait_ranks check nccl_calls peer_failure graph_replay multirank
if ! part machine "${T_MACHINE:-30}" machine && [[ $PARTS == *",machine,"* ]]; then
  PARTS="$PARTS,rebuild,"
  part rebuild "${T_REBUILD:-300}" rebuild
fi
part conformance "${T_CONFORMANCE:-60}" conformance
part cudnn_conv "${T_CUDNN_CONV:-60}" cudnn_conv
part nccl "${T_NCCL:-20}" "$BIN/fsdprt-comm-check" --backend cuda
part parity "${T_PARITY:-180}" parity
part async_vs_sync "${T_ASYNC_VS_SYNC:-30}" async_vs_sync
part resnet "${T_RESNET:-120}" resnet
part moe "${T_MOE:-120}" moe
part gpt2_124m "${T_GPT2_124M:-150}" gpt2_124m
part kernels "${T_KERNELS:-40}" kernels
part profile "${T_PROFILE:-120}" profile
part torch "${T_TORCH:-90}" torch_step
part multirank "${T_MULTIRANK:-300}" multirank

python - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
def lines(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip()]
    except (OSError, ValueError):
        return []
results = {"parts": lines(os.path.join(out, "parts.jsonl"))}
for name in ("conformance", "conformance_lean_norms", "conformance_lean_xent"):
    conf = load(os.path.join(out, f"{name}.json"))
    if conf:
        results[name] = {k: conf.get(k) for k in ("tests", "failures", "disabled", "errors")}
results["parity"] = {os.path.basename(os.path.dirname(p)): load(p)
                     for p in sorted(glob.glob(os.path.join(out, "runs/*/compare.json")))}
for run in ("f32", "bf16", "bf16-eager", "bf16-nocudnn", "bf16-issue",
            "bf16-sync", "bf16-unpadded", "bf16-nostats", "bf16-nondet",
            "bf16-b64", "bf16-fused", "bf16-lean", "bf16-b64lean",
            "bf16-leanxent"):
    rows = lines(os.path.join(out, f"gpt2_124m-{run}.jsonl"))
    if rows:
        times = sorted(r["step_time_s"] for r in rows[1:]) or [rows[0]["step_time_s"]]
        results[f"gpt2_124m_{run}"] = {
            "losses": [r["loss"] for r in rows], "median_step_s": times[len(times) // 2],
            "peak_bytes": rows[-1].get("peak_bytes"),
            "device_peak_bytes": rows[-1].get("device_peak_bytes"),
            # The device's mark beyond the arena: these two, counted once.
            "gemm_workspace_bytes": rows[-1].get("gemm_workspace_bytes"),
            "scratch_reserve_bytes": rows[-1].get("scratch_reserve_bytes"),
            "top_ops": (load(os.path.join(out, f"gpt2_124m-{run}.ops.json")) or [])[:10]}
# ResNet-50's step: convolutions on cuDNN (bf16, f32) and on the direct
# kernels (f32-direct).
for run in ("bf16", "f32", "f32-direct"):
    rows = lines(os.path.join(out, f"resnet50-{run}.jsonl"))
    if rows:
        times = sorted(r["step_time_s"] for r in rows[1:]) or [rows[0]["step_time_s"]]
        results[f"resnet50_{run}"] = {
            "losses": [r["loss"] for r in rows], "median_step_s": times[len(times) // 2],
            "scratch_reserve_bytes": rows[-1].get("scratch_reserve_bytes")}
results["torch_gpt2_124m"] = load(os.path.join(out, "torch_gpt2_124m.json"))
results["torch_gpt2_124m_b64"] = load(os.path.join(out, "torch_gpt2_124m_b64.json"))
results["multirank"] = lines(os.path.join(out, "multirank", "checks.jsonl"))
# Per-call scratch outside the memory plan, largest first (op, bytes).
scratch = set()
log = os.path.join(out, "gpt2_124m.log")
for l in open(log, errors="replace") if os.path.exists(log) else []:
    if "of scratch outside the memory plan" in l:
        op, rest = l.split("op '", 1)[1].split("' takes ", 1)
        scratch.add((op, int(rest.split()[0])))
results["gpt2_124m_scratch"] = sorted(scratch, key=lambda e: -e[1])[:20]
# Where attention fell back from cuDNN's fused kernels to cuBLAS, or a
# convolution from cuDNN to the direct kernels, and why.
results["cudnn_fallbacks"] = sorted({l.strip() for p in glob.glob(os.path.join(out, "*.log"))
                                     for l in open(p, errors="replace")
                                     if "attention runs on cuBLAS" in l
                                     or "convolution runs on the direct kernels" in l})
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(results, f, indent=1)
print(json.dumps({p["part"]: p["status"] for p in results["parts"]}))
PY
grep -q '"status": "failed\|"status": "timed' "$RESULTS" && exit 1
exit 0
