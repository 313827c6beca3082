# Sourced by the sweep scripts from the repository root: exports FSDP_OPT
# and FSDP_RUN (default: $BUILD_DIR/bin, build/bin) and stops, naming the
# script ($1), where one is not built.
export FSDP_OPT="${FSDP_OPT:-$PWD/${BUILD_DIR:-build}/bin/fsdp-opt}"
export FSDP_RUN="${FSDP_RUN:-$PWD/${BUILD_DIR:-build}/bin/fsdp-run}"
for tool in "$FSDP_OPT" "$FSDP_RUN"; do
  [[ -x "$tool" ]] || { echo "$1: $tool not found (build first)" >&2; exit 2; }
done
