#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test fsdp-mlir:
# MLIR/LLVM 22, clang + lld + Ninja, the runtime's libraries and the Python
# test packages (and PyTorch, the tests' oracle, unless FSDP_SKIP_TORCH=1).
# Idempotent, and silent when nothing is missing.
set -euo pipefail

DEBIAN_PACKAGES=(
  cmake ninja-build clang lld
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libopenblas-dev nlohmann-json3-dev libgloo-dev
  libgtest-dev libbenchmark-dev
  libclang-rt-dev  # ASan/UBSan runtimes (scripts/sanitize.sh); only
                   # recommended by clang, so --no-install-recommends skips it
)
PYTHON_MODULES=(pytest numpy safetensors matplotlib)
PYTHON=${PYTHON:-python3}

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  echo "setup: installing pip for $PYTHON"
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
fi
missing=()
for module in "${PYTHON_MODULES[@]}"; do
  "$PYTHON" -c "import $module" 2>/dev/null || missing+=("$module")
done
if ((${#missing[@]})); then
  echo "setup: installing Python packages: ${missing[*]}"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi

# PyTorch, the independent oracle of python/tests/test_torch_oracle.py: from
# PyPI when it can be installed (a few GB with its CUDA dependencies, ~2 min
# here); FSDP_SKIP_TORCH=1 skips the download and those tests then skip.
if [ -z "${FSDP_SKIP_TORCH:-}" ] && ! "$PYTHON" -c "import torch" 2>/dev/null; then
  echo "setup: installing torch from PyPI (FSDP_SKIP_TORCH=1 skips it)"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check torch ||
    echo "setup: torch could not be installed; the PyTorch oracle tests will skip"
fi
# Hugging Face transformers (configs with random weights, no downloads) for
# the importer's tests of GPT-2, Llama and BERT (python/tests/test_hf_import.py).
if [ -z "${FSDP_SKIP_TORCH:-}" ] && "$PYTHON" -c "import torch" 2>/dev/null &&
   ! "$PYTHON" -c "import transformers" 2>/dev/null; then
  echo "setup: installing transformers from PyPI"
  "$PYTHON" -m pip install --quiet --disable-pip-version-check transformers ||
    echo "setup: transformers could not be installed; its import tests will skip"
fi
# The cuDNN and cudnn-frontend headers for the CUDA backend's fused attention
# (headers only, a few MB; cuDNN itself is opened at run time on a GPU host).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  "$(dirname "$0")/fetch-cudnn.sh" ||
    echo "setup: the cuDNN headers could not be fetched; attention on CUDA will use cuBLAS"
fi
