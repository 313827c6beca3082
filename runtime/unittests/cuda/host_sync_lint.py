#!/usr/bin/env python3
"""Lint: the CUDA backend waits on the host only where it says why.

Every cudaStreamSynchronize / cudaDeviceSynchronize / cudaEventSynchronize
in the given sources must have a `host-sync:` comment on its line or on one
of the two lines above it; a backend call otherwise only queues device work
(CudaBackend.cu, "Streams"). Prints each offending call; exit 1 if any.

  host_sync_lint.py runtime/cuda
"""
import pathlib
import re
import sys

BLOCKING = re.compile(r"\bcuda(Stream|Device|Event)Synchronize\s*\(")


def offenders(root):
    for path in sorted(pathlib.Path(root).glob("*")):
        if path.suffix not in (".cu", ".cuh", ".h", ".cpp"):
            continue
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if not BLOCKING.search(line) or line.lstrip().startswith("//"):
                continue
            context = lines[max(0, i - 2):i + 1]
            if not any("host-sync:" in c for c in context):
                yield f"{path}:{i + 1}: {line.strip()}"


def main():
    found = list(offenders(sys.argv[1]))
    for f in found:
        print(f"host wait without a 'host-sync:' reason: {f}")
    print(f"{len(found)} unexplained host waits")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
