#!/usr/bin/env python3
"""Lint: the CUDA backend waits on the host only where it says why, and
never between a producer and its collective.

1. Every cudaStreamSynchronize / cudaDeviceSynchronize / cudaEventSynchronize
   in the CUDA backend's sources must have a `host-sync:` comment on its
   line or on one of the two lines above it; a backend call otherwise only
   queues device work (backends/cuda/Worker.h).
2. The collective path waits on the host nowhere, whatever its comments
   say: collectives are issued onto the issuing worker's device queue
   (DeviceOrdering.h). In runtime/src/CApiComm.cpp no host wait at all (a
   CUDA synchronisation, a DeviceOrdering/Stream synchronize or drain, a
   marker's synchronize); in runtime/comm/nccl/NcclCommunicator.cpp the device
   is waited for only inside complete(), whose one caller in the
   collective path, run(), calls it only without a queue (`if (!queue)`).

Prints each offence; exit 1 if any.

  host_sync_lint.py <runtime source root>
  host_sync_lint.py --self-test
"""
import pathlib
import re
import sys
import tempfile

BLOCKING = re.compile(r"\bcuda(Stream|Device|Event)Synchronize\s*\(")
# Any host wait the collective path could make.
HOST_WAIT = re.compile(
    r"\bcuda(Stream|Device|Event)Synchronize\s*\(|\bcudaStreamQuery\s*\("
    r"|(->|\.)\s*(synchronize|drain)\s*\(")
COMPLETE_CALL = re.compile(r"\bcomplete\s*\(")


def code_lines(path):
    """(line number, code without its // comment) of each line."""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        yield i, line.split("//", 1)[0]


def unexplained_waits(cuda_dir):
    for path in sorted(pathlib.Path(cuda_dir).glob("*")):
        if path.suffix not in (".cu", ".cuh", ".h", ".cpp"):
            continue
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if not BLOCKING.search(line) or line.lstrip().startswith("//"):
                continue
            context = lines[max(0, i - 2):i + 1]
            if not any("host-sync:" in c for c in context):
                yield (f"host wait without a 'host-sync:' reason: "
                       f"{path}:{i + 1}: {line.strip()}")


def waits_in_capi_comm(path):
    for n, code in code_lines(path):
        if HOST_WAIT.search(code):
            yield (f"host wait on the collective path: {path}:{n}: "
                   f"{code.strip()}")


def body_lines(lines, signature):
    """Indices of the lines of each function whose definition line contains
    `signature`, through its closing brace."""
    inside = set()
    for first, code in enumerate(lines):
        if signature not in code:
            continue
        depth, opened = 0, False
        for i in range(first, len(lines)):
            inside.add(i)
            depth += lines[i].count("{") - lines[i].count("}")
            opened = opened or "{" in lines[i]
            if opened and depth <= 0:
                break
    return inside


def waits_in_nccl(path):
    lines = [code for _, code in code_lines(path)]
    inside = body_lines(lines, "void complete(")
    for i, code in enumerate(lines):
        if i in inside:
            continue
        if HOST_WAIT.search(code):
            yield (f"host wait outside complete(): {path}:{i + 1}: "
                   f"{code.strip()}")
        if COMPLETE_CALL.search(code):
            guard = (lines[i - 1] if i else "") + code
            if "if (!queue)" not in guard:
                yield (f"complete() (a host wait) not guarded by "
                       f"'if (!queue)': {path}:{i + 1}: {code.strip()}")


CUDA_DIR = pathlib.Path("backends") / "cuda"
CAPI_COMM = pathlib.Path("src") / "CApiComm.cpp"
NCCL_COMMUNICATOR = pathlib.Path("comm") / "nccl" / "NcclCommunicator.cpp"


def offences(root):
    root = pathlib.Path(root)
    # A moved file must move the lint with it, not silence it.
    missing = [root / p for p in (CUDA_DIR, CAPI_COMM, NCCL_COMMUNICATOR)
               if not (root / p).exists()]
    if missing:
        yield from (f"not found (moved? update the lint): {p}" for p in missing)
        return
    yield from unexplained_waits(root / CUDA_DIR)
    yield from waits_in_capi_comm(root / CAPI_COMM)
    yield from waits_in_nccl(root / NCCL_COMMUNICATOR)


def self_test():
    """The rules catch what they are for (a lint that cannot fail proves
    nothing): a commented wait in CApiComm.cpp, a wait and an unguarded
    complete() in the NCCL communicator's collective path."""
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for d in (CUDA_DIR, CAPI_COMM.parent, NCCL_COMMUNICATOR.parent):
            (root / d).mkdir(parents=True)
        (root / CAPI_COMM).write_text(
            "void enqueue() {\n"
            "  // host-sync: a reason does not make it right here\n"
            "  device->synchronize();\n}\n")
        (root / NCCL_COMMUNICATOR).write_text(
            "  template <typename F>\n"
            "  void run(const char *what, void *queue, F &&enqueue) {\n"
            "    cudaStreamSynchronize(stream_);\n"
            "    complete(what, deadline);\n"
            "  }\n"
            "  void complete(const char *what, Deadline deadline) {\n"
            "    cudaError_t rc = cudaStreamQuery(stream_);\n"
            "  }\n")
        found = list(offences(root))
        want = ["CApiComm.cpp:3", "NcclCommunicator.cpp:3",
                "NcclCommunicator.cpp:4"]
        missing = [w for w in want if not any(w in f for f in found)]
        extra = [f for f in found if not any(w in f for w in want)]
        for f in found:
            print(f"self-test found: {f}")
        if missing or extra:
            print(f"self-test FAILED: missing {missing}, unexpected {extra}")
            return 1
        print("self-test passed")
        return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    found = list(offences(sys.argv[1]))
    for f in found:
        print(f)
    print(f"{len(found)} host-wait offences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
