#!/usr/bin/env bash
# Puts the cuDNN and cudnn-frontend headers where the runtime's CMake looks
# for them (FSDPRT_CUDNN_ROOT, default ~/.cache/fsdp-mlir/cudnn), from the
# pinned PyPI wheels PyTorch's CUDA 13 builds use. Only headers: the CUDA
# backend opens libcudnn.so.9 at run time (a GPU machine's cuDNN, e.g. the
# nvidia-cudnn-cu13 wheel beside torch). Idempotent; silent when present.
set -euo pipefail

CUDNN_VERSION=9.28.1.4
FRONTEND_VERSION=1.32.0
DEST=${FSDPRT_CUDNN_ROOT:-$HOME/.cache/fsdp-mlir/cudnn}
PYTHON=${PYTHON:-python3}
STAMP="$DEST/.versions"
WANT="cudnn $CUDNN_VERSION frontend $FRONTEND_VERSION"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  exit 0
fi
echo "setup: fetching the cuDNN $CUDNN_VERSION and cudnn-frontend" \
  "$FRONTEND_VERSION headers into $DEST"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps \
  --only-binary=:all: --dest "$tmp" \
  "nvidia-cudnn-cu13==$CUDNN_VERSION" "nvidia-cudnn-frontend==$FRONTEND_VERSION"
rm -rf "$DEST"
mkdir -p "$DEST/include"
# The wheels are zip files: cuDNN's headers are under nvidia/cudnn/include,
# the frontend's (header-only C++ API) under include/.
"$PYTHON" - "$tmp" "$DEST/include" <<'PY'
import pathlib, sys, zipfile
src, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
for wheel in src.glob("*.whl"):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            for prefix in ("nvidia/cudnn/include/", "include/"):
                if name.startswith(prefix) and not name.endswith("/"):
                    out = dest / name[len(prefix):]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(z.read(name))
PY
echo "$WANT" >"$STAMP"
