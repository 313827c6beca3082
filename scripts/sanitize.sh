#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build and check of the
# compiler and the runtime (docs/Sanitizers.md).
#
#   scripts/sanitize.sh [--quick] [--no-build] [--skip lit,unit,run]
#
# Builds everything into $BUILD_DIR (default build-sanitize) with
# -fsanitize=address,undefined and libstdc++'s assertions (clang, lld,
# Ninja, -O1 -g1; the CUDA backend and NCCL off: nvcc and the sanitizers do
# not mix), then runs
#   lit   the lit suite (with its 600 mutated inputs of test/Fuzz),
#   unit  every GoogleTest binary (runtime, communicators, driver, compiler)
#         but the requires-gpu label,
#   run   fsdp-run (JIT) and fsdp-compile + fsdprt-run (AOT) on 2 ranks:
#         char_gpt on text data with a trace and a sharded save/resume,
#         then test/Run (all of it but the GPU bundle) and python/tests.
# --quick (what CI runs) keeps lit, unit and char_gpt whole and takes a
# 2-rank slice of test/Run (every strategy but hybrid, both optimizers,
# bf16, delays, AOT = JIT, resumes and truncated checkpoints) and three
# models of the architecture sweep.
# --no-build runs the checks on the build as it is; --skip leaves parts out.
# JOBS (default: cores) is the build's and the tests' parallelism;
# SANITIZE_FLAGS adds compiler flags.
#
# Every sanitized process (the tools, the ranks fsdp-run and fsdprt-run
# launch, the test binaries and their workers) inherits the options below
# and writes its reports to $BUILD_DIR/sanitizer-logs/report.<exe>.<pid>
# (log_path), so that a report in a test that expects a failure (lit's
# `not`, pytest's error checks) cannot go unnoticed: the script fails when a
# test fails or when any report was written. Third-party findings are
# suppressed, each with its reason, in scripts/sanitize/*.supp.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

QUICK=0
BUILD=1
SKIP=","
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --no-build) BUILD=0 ;;
    --skip) SKIP=",$2,"; shift ;;
    --skip=*) SKIP=",${1#--skip=}," ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "sanitize.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
skipped() { [[ "$SKIP" == *",$1,"* ]]; }

BUILD_DIR=${BUILD_DIR:-build-sanitize}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
LLVM_DIR=/usr/lib/llvm-22
JOBS=${JOBS:-$(nproc)}
# _GLIBCXX_ASSERTIONS: libstdc++'s bounds checks (vector[i] past size() but
# within capacity, which ASan cannot see); they change no layout, so our code
# still links with Debian's libraries.
SAN_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -D_GLIBCXX_ASSERTIONS ${SANITIZE_FLAGS:-}"
LOG_DIR=$BUILD_DIR/sanitizer-logs
SUPP=$ROOT/scripts/sanitize

# The sanitizers' run-time options: inherited by every process the tests
# start (lit passes *SAN_OPTIONS through, pytest's helpers copy os.environ,
# fsdp-run's launcher spawns ranks with its environment).
# allow_user_poisoning=0: LLVM's headers poison the unused part of a
# BumpPtrAllocator slab when the including code is instrumented
# (llvm/Support/Allocator.h), and only instrumented code unpoisons what it
# allocates. Our code and Debian's uninstrumented libMLIR allocate from the
# same allocators (the context's attribute and type storage), so libMLIR's
# allocations would read as use-after-poison. Heap, stack and global checks
# are unaffected; the runtime poisons nothing by hand.
mkdir -p "$LOG_DIR"
common="log_path=$LOG_DIR/report:log_exe_name=1:print_summary=1:symbolize=1"
export ASAN_OPTIONS="$common:halt_on_error=1:abort_on_error=0:allow_user_poisoning=0:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:suppressions=$SUPP/asan.supp"
export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="$common:halt_on_error=1:print_stacktrace=1:suppressions=$SUPP/ubsan.supp"
if command -v llvm-symbolizer >/dev/null; then
  export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer)}
fi
# fsdp-compile links step libraries with $CC (else cc): never a sanitized
# link; the step's code is LLVM's output, not instrumented.
unset CC CXX CFLAGS CXXFLAGS LDFLAGS

if [ "$(clang -print-file-name=libclang_rt.asan-x86_64.a)" = \
     libclang_rt.asan-x86_64.a ]; then
  echo "sanitize.sh: clang's sanitizer runtimes are missing (Debian:" \
       "libclang-rt-dev; scripts/setup.sh installs it)" >&2
  exit 2
fi

T0=$SECONDS
stamp() { printf '[sanitize %4ds] %s\n' $((SECONDS - T0)) "$*"; }

status=0
report_check() {
  # $1: the part that ran. Prints and counts the reports it left.
  local files
  files=$(find "$LOG_DIR" -type f -newer "$LOG_DIR/.start-$1" 2>/dev/null | sort)
  if [ -n "$files" ]; then
    echo "=== sanitizer reports from '$1' ==="
    for f in $files; do echo "--- $f"; cat "$f"; done
    if grep -lE 'ERROR: (Address|Leak)Sanitizer|runtime error:|ERROR: UndefinedBehaviorSanitizer' $files >/dev/null; then
      stamp "$1: SANITIZER REPORTS (above)"
      status=1
    fi
  fi
}
if [ "$BUILD" = 1 ]; then
  # Configured on every run (a few seconds; nothing rebuilds unless the
  # flags below changed).
  stamp "configuring $BUILD_DIR"
  cmake -S . -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_FLAGS="$SAN_FLAGS" -DCMAKE_CXX_FLAGS="$SAN_FLAGS" \
    -DCMAKE_C_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DLLVM_USE_LINKER=lld \
    -DFSDPRT_WITH_CUDA=OFF -DFSDPRT_WITH_NCCL=OFF \
    -DMLIR_DIR="$LLVM_DIR/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_DIR/bin/lit" \
    ${CMAKE_ARGS:-} >/dev/null
  stamp "building with -j$JOBS"
  # GoogleTest discovery runs the test binaries: a report fails the build.
  touch "$LOG_DIR/.start-build"
  if ! cmake --build "$BUILD_DIR" -j "$JOBS"; then
    report_check build
    stamp "build FAILED"
    exit 1
  fi
  stamp "built"
fi

run_part() {
  # $1: name, rest: command. A failing test or a report fails the script.
  local name=$1; shift
  if skipped "$name"; then stamp "$name: skipped (--skip)"; return; fi
  touch "$LOG_DIR/.start-$name"
  stamp "$name: $*"
  local t=$SECONDS
  if ! "$@"; then
    stamp "$name: FAILED"
    status=1
  fi
  report_check "$name"
  stamp "$name: done in $((SECONDS - t)) s"
}
# The checks start from an empty log directory.
find "$LOG_DIR" -type f -name 'report*' -delete

export FSDP_OPT=$BUILD_DIR/bin/fsdp-opt
export FSDP_RUN=$BUILD_DIR/bin/fsdp-run
export FSDP_COMPILE=$BUILD_DIR/bin/fsdp-compile
export FSDPRT_RUN=$BUILD_DIR/bin/fsdprt-run
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}

# 1. lit.
run_part lit "$LLVM_DIR/bin/lit" -sv -j "$JOBS" "$BUILD_DIR/test"

# 2. GoogleTest (CTest runs what gtest_discover_tests found): runtime,
# communicators (multi-process Gloo jobs), driver, compiler; not the
# requires-gpu label. lit, test/Run and python/tests (the python_* tests)
# run on their own here.
run_part unit ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure \
  -LE requires-gpu -E '^(lit|run_.*|python_.*)$'

# 3. fsdp-run (JIT; the ranks it launches), fsdp-compile + fsdprt-run (ahead
# of time: the step library dlopened), fsdp-opt driven from Python.
PYTEST=(python3 -m pytest -q -rs -p no:cacheprovider --durations=5)
run_slice() {
  local rc=0
  if [ "$QUICK" = 1 ]; then
    # 2 ranks: every strategy but hybrid (4 ranks), both optimizers, bf16,
    # injected delays; AOT = JIT; an exact resume from a sharded checkpoint.
    "${PYTEST[@]}" test/Run/test_parity.py -k "r2 and not hybrid" || rc=1
    "${PYTEST[@]}" test/Run/test_aot.py -k "not 4" || rc=1
    "${PYTEST[@]}" test/Run/test_checkpoints.py \
      -k "resume or sharded_2_to_1 or truncated" || rc=1
    # Imported models through the sanitized compiler: routing (scatter,
    # gather), F.unfold / F.fold (index_put), convolutions and batch norm.
    "${PYTEST[@]}" python/tests/test_arch_sweep.py \
      -k "deepseek_v3 or timm_volo or resnet_hf" || rc=1
  else
    # test/Run but the GPU bundle (packaging, no new code paths here), and
    # the Python package's tests.
    "${PYTEST[@]}" test/Run --ignore=test/Run/test_gpu_bundle.py || rc=1
    "${PYTEST[@]}" python/tests || rc=1
  fi
  return $rc
}
# scripts/demo.sh in short: text data, a merged trace, a sharded checkpoint
# resumed by the step library.
char_gpt() {
  local out=$BUILD_DIR/sanitize-char-gpt data=(--data data/shakespeare.txt)
  rm -rf "$out" && mkdir -p "$out" &&
  "$FSDP_OPT" examples/char_gpt.mlir -o "$out/char_gpt.mlir" \
    --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw lr=2e-3 lower=true" &&
  "$FSDP_RUN" "$out/char_gpt.mlir" --nproc 2 --steps 8 "${data[@]}" --seed 0 \
    --quiet --metrics "$out/metrics.jsonl" --trace "$out/trace.json" \
    --save "$out/ckpt" --save-format sharded &&
  "$FSDP_COMPILE" "$out/char_gpt.mlir" -o "$out/char_gpt.so" &&
  "$FSDPRT_RUN" "$out/char_gpt.so" --nproc 2 --steps 12 "${data[@]}" \
    --seed 0 --quiet --load "$out/ckpt/step-8" --save "$out/ckpt" &&
  [ "$(wc -l < "$out/metrics.jsonl")" = 8 ] && [ -s "$out/trace.json" ] &&
  [ -s "$out/ckpt/step-12.safetensors" ] && echo "char_gpt: ok"
}
run_tests() {
  local rc=0
  char_gpt || rc=1
  run_slice || rc=1
  return $rc
}
run_part run run_tests

stamp "total $((SECONDS - T0)) s"
if [ "$status" = 0 ]; then
  stamp "clean: no test failed, no sanitizer report"
else
  stamp "FAILED (see above; reports in $LOG_DIR)"
fi
exit "$status"
