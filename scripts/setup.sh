#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test fsdp-mlir:
# MLIR/LLVM 22, clang + lld + Ninja, the runtime's libraries and the pinned
# Python test packages (and PyTorch, the tests' oracle, unless FSDP_SKIP_TORCH=1).
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
PYTHON=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)

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
# The Python packages the tests import, at the versions in
# python/requirements-test.txt, everything under them at those of
# python/constraints-test.txt (scripts/pin-python.sh): PyTorch and transformers
# are the oracle every parity test trusts, so a new version is a deliberate
# commit, not whatever PyPI serves on the day. They are a few GB with torch's
# CUDA dependencies (~2 min here); FSDP_SKIP_TORCH=1 leaves them out (the lines
# marked "oracle") and their tests skip.
requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
if [ -n "${FSDP_SKIP_TORCH:-}" ]; then
  grep -v '# oracle' "$ROOT/python/requirements-test.txt" >"$requirements"
else
  cp "$ROOT/python/requirements-test.txt" "$requirements"
fi
off_pin=$("$PYTHON" - "$requirements" <<'PY'
import importlib.metadata as metadata, re, sys
for line in open(sys.argv[1]):
    pin = re.match(r"\s*([A-Za-z0-9_.-]+)==([^\s#;]+)", line)
    if not pin:
        continue
    try:
        installed = metadata.version(pin[1])
    except metadata.PackageNotFoundError:
        installed = None
    if installed != pin[2]:
        print(f"{pin[1]}=={pin[2]}", end=" ")
PY
)
# pip is silent, and needs no network, when everything is at its pin; it is
# run either way so that a package under them a machine kept at another
# version is put back to the constraint.
[ -z "$off_pin" ] || echo "setup: installing pinned Python packages: $off_pin"
"$PYTHON" -m pip install --quiet --disable-pip-version-check \
  --root-user-action=ignore -r "$requirements" \
  -c "$ROOT/python/constraints-test.txt" || {
  echo "setup: the pinned Python packages could not be installed" \
    "(FSDP_SKIP_TORCH=1 leaves out PyTorch and transformers; their tests skip)" >&2
  exit 1
}
# The cuDNN and cudnn-frontend headers for the CUDA backend's fused attention
# (headers only, a few MB; cuDNN itself is opened at run time on a GPU host).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  "$(dirname "$0")/fetch-cudnn.sh" ||
    echo "setup: the cuDNN headers could not be fetched; attention on CUDA will use cuBLAS"
fi
