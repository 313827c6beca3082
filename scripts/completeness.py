#!/usr/bin/env python3
"""Completeness of the compiler -> runtime boundary, read from the sources.

  completeness.py <repository root>
  completeness.py --self-test

Checks (docs/Extending.md says what to do when one fails):
1. Every RT_ENTRY of RTEntryPoints.def is emitted by the lowering: some
   emitter in lib/Conversion/FSDPToRT calls it (`call("<name>"`). The rt.call
   verifier already refuses a call the table lacks; this refuses a table row
   nothing calls.
2. Every fsdprt_* function of fsdprt.h is reached by compiled steps (an
   RT_ENTRY, or the entry point of a dedicated rt op), or sits in a section of
   the header that says who calls it: the runner's API (context, graphs,
   buffers, streams, tracing, checkpoints, communicators) or the library-only
   kernels, each of which a runtime test calls.
3. Every virtual of the Backend interface is exercised by the conformance
   suites (the test files compiled once per backend): they call it, or call a
   C entry point whose body calls it, or it is part of every context's life
   (called by the core outside the C entry points).
4. The compiler (lib/, include/) includes of the runtime only the boundary
   headers (COMPILER_VISIBLE): the C ABI and the one-definition tables, not
   the runner's or the backends' C++.
(The nn ops' side, every op to an emitter or "emits nothing", is the
FSDPKernelCoverageTests unit test.)
"""
import pathlib
import re
import sys
import tempfile

ENTRY_DEF = "include/fsdp/Dialect/RT/IR/RTEntryPoints.def"
RT_OPS = "include/fsdp/Dialect/RT/IR/RTOps.td"
LOWERING = "lib/Conversion/FSDPToRT"
RT_TO_LLVM = "lib/Conversion/RTToLLVM/RTToLLVM.cpp"
HEADER = "runtime/include/fsdp/rt/fsdprt.h"
BACKEND = "runtime/include/fsdp/rt/backend/Backend.h"
CAPI = "runtime/src"
RUNTIME_TESTS = "runtime/unittests"
TESTS_CMAKE = "runtime/unittests/CMakeLists.txt"

# Sections of fsdprt.h ("/* ---- <title> ----*/") whose functions runners
# call, and the one whose kernels no compiled step calls.
RUNNER_SECTIONS = ("Errors", "Context", "Step graphs", "Buffers",
                   "Streams and events", "Tracing", "Checkpoints",
                   "Communicators")
LIBRARY_SECTION = "Library kernels"

# What the compiler may include of runtime/include (rule 4).
COMPILER_VISIBLE = {"fsdp/rt/fsdprt.h", "fsdp/rt/StepAbi.h",
                    "fsdp/rt/StepAbi.def", "fsdp/rt/ProgramKeys.h",
                    "fsdp/rt/ProgramKeys.def", "fsdp/rt/LrSchedule.h",
                    "fsdp/rt/AdafactorLayout.h", "fsdp/rt/math/Hd.h"}

# Backend virtuals only a multi-rank job reaches (fsdprt_comm_init*), which
# the per-backend suites cannot start: the communicator tests and the
# emulated multi-rank runs (test/Run/test_multirank_cuda_emu.py) cover them.
TESTED_ELSEWHERE = {"communicator", "deviceOrdinal"}


def read(root, path):
    return (root / path).read_text()


def entries(root):
    return re.findall(r"^RT_ENTRY\((\w+),", read(root, ENTRY_DEF), re.M)


def emitted(root):
    names = set()
    for path in sorted((root / LOWERING).glob("*.cpp")):
        # call("name", ...) and call(cond ? "a" : "b")
        for m in re.finditer(r'call\(\s*(?:[\w.()!]+\s*\?\s*)?"(\w+)"'
                             r'(?:\s*:\s*"(\w+)")?', path.read_text()):
            names |= {n for n in m.groups() if n}
    return names


def dedicated(root):
    """Entry points the rt dialect's own ops lower to."""
    names = set(re.findall(r'RT_DirectCallOp<"\w+",\s*"(\w+)">',
                           read(root, RT_OPS)))
    names |= set(re.findall(r'callChecked\(\s*"(\w+)"',
                            read(root, RT_TO_LLVM)))
    return names


def header_sections(root):
    """{function name: the title of the section declaring it}."""
    section, out = "", {}
    for line in read(root, HEADER).splitlines():
        m = re.match(r"/\* ---- (.+?) -*\s*(\([^)]*\))?\s*-*\s*\*/", line)
        if m:
            section = re.sub(r"\s*\(.*", "", m.group(1)).strip(" -")
            continue
        for name in re.findall(r"\bint32_t fsdprt_(\w+)\(", line):
            out[name] = section
    return out


def conformance_sources(root):
    text = read(root, TESTS_CMAKE)
    m = re.search(r"set\(FSDPRT_CONFORMANCE_SOURCES(.*?)\)", text, re.S)
    return [root / RUNTIME_TESTS / f for f in m.group(1).split()]


def capi_bodies(root):
    """{function: its body} of the C ABI's files: the fsdprt_* entry points
    (by their name without the prefix) and the helpers between them."""
    bodies = {}
    for path in sorted((root / CAPI).glob("CApi*.cpp")):
        text = path.read_text()
        starts = [(m.start(), m.group(1)) for m in re.finditer(
            r"^(?:static\s+|template\s*<[^>]*>\s*)*[A-Za-z_][\w:<>*& ]*?"
            r"\b(\w+)\(",
            text, re.M)]
        for i, (start, name) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
            bodies[name] = text[start:end]
    return bodies


def reachers(bodies, call):
    """The C entry points whose body, or a helper's it calls, matches."""
    direct = {n for n, body in bodies.items() if call.search(body)}
    helpers = {n for n in direct if not n.startswith("fsdprt_")}
    out = {n for n in direct if n.startswith("fsdprt_")}
    for n, body in bodies.items():
        if n.startswith("fsdprt_") and any(
                re.search(rf"\b{h}\(", body) for h in helpers):
            out.add(n)
    return sorted(n[len("fsdprt_"):] for n in out)


def virtuals(root):
    return re.findall(r"\bvirtual\s+[^;{(]*?\b(\w+)\s*\(",
                      read(root, BACKEND))


def offences(root):
    root = pathlib.Path(root)
    table = entries(root)
    calls = emitted(root)
    for name in table:
        if name not in calls:
            yield (f"{ENTRY_DEF}: RT_ENTRY({name}) is emitted by no "
                   f"emitter in {LOWERING} (move it to the library kernels)")

    reached = set(table) | dedicated(root)
    sections = header_sections(root)
    tests = "\n".join(p.read_text()
                      for p in (root / RUNTIME_TESTS).rglob("*.cpp"))
    for name, section in sorted(sections.items()):
        if name in reached or section in RUNNER_SECTIONS:
            continue
        if section == LIBRARY_SECTION:
            if not re.search(rf"\bfsdprt_{name}\(", tests):
                yield (f"{HEADER}: library kernel fsdprt_{name} is called "
                       f"by no runtime test")
            continue
        yield (f"{HEADER}: fsdprt_{name} (section '{section}') is reached by "
               f"no compiled step: emit it, or move it to '{LIBRARY_SECTION}'")

    yield from compiler_includes(root)

    conformance = "\n".join(p.read_text() for p in conformance_sources(root))
    bodies = capi_bodies(root)
    core = "\n".join(p.read_text() for p in (root / CAPI).glob("*.cpp")
                     if not p.name.startswith("CApi"))
    for virtual in sorted(set(virtuals(root)) - {"Backend"}):
        if virtual in TESTED_ELSEWHERE:
            continue
        call = re.compile(rf"((\.|->){virtual}\(|&Backend::{virtual}\b)")
        if call.search(conformance) or call.search(core):
            continue
        via = reachers(bodies, call)
        if not any(re.search(rf"\bfsdprt_{n}\(", conformance) for n in via):
            yield (f"{BACKEND}: Backend::{virtual} is exercised by no "
                   f"conformance test (through: {', '.join(via) or 'nothing'})")


def compiler_includes(root):
    for top in ("lib", "include"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in (".h", ".cpp", ".td", ".def", ".inc"):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"(fsdp/rt/[^"]+)"', line)
                if m and m.group(1) not in COMPILER_VISIBLE:
                    yield (f"{path.relative_to(root)}:{n}: the compiler "
                           f"includes {m.group(1)}, which is not a boundary "
                           f"header")


def self_test():
    """Each rule catches what it is for (a lint that cannot fail proves
    nothing): an unemitted RT_ENTRY, an unsorted kernel, an untested library
    kernel, an untested Backend virtual and a runner header in the
    compiler."""
    files = {
        ENTRY_DEF: "RT_ENTRY(used, (CTX))\nRT_ENTRY(unused, (CTX))\n",
        RT_OPS: 'def X : RT_DirectCallOp<"free", "buffer_free"> {}\n',
        f"{LOWERING}/Calls.cpp": 'calls.call("used", args);\n',
        RT_TO_LLVM: 'callChecked("buffer_alloc_at", {});\n',
        HEADER: ("/* ---- Buffers --------------------------------*/\n"
                 "int32_t fsdprt_buffer_free(int64_t ctx);\n"
                 "/* ---- Kernels --------------------------------*/\n"
                 "int32_t fsdprt_used(int64_t ctx);\n"
                 "int32_t fsdprt_stray(int64_t ctx);\n"
                 f"/* ---- {LIBRARY_SECTION} ----------------------*/\n"
                 "int32_t fsdprt_lonely(int64_t ctx);\n"),
        BACKEND: ("class Backend {\n  virtual void used(int n) = 0;\n"
                  "  virtual void untested(int n) = 0;\n};\n"),
        f"{CAPI}/CApiKernels.cpp": ("int32_t fsdprt_used(int64_t ctx) {\n"
                                    "  b->used(1);\n}\n"
                                    "int32_t fsdprt_lonely(int64_t ctx) {\n"
                                    "  b->untested(1);\n}\n"),
        TESTS_CMAKE: "set(FSDPRT_CONFORMANCE_SOURCES\n  KernelTest.cpp)\n",
        f"{RUNTIME_TESTS}/KernelTest.cpp": "fsdprt_used(ctx);\n",
        "lib/Lowering.cpp": ('#include "fsdp/rt/fsdprt.h"\n'
                             '#include "fsdp/rt/Comm.h"\n'),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text)
        found = list(offences(root))
    want = ["RT_ENTRY(unused)", "fsdprt_stray", "fsdprt_lonely",
            "Backend::untested", "includes fsdp/rt/Comm.h"]
    for f in found:
        print(f"self-test found: {f}")
    missing = [w for w in want if not any(w in f for f in found)]
    extra = [f for f in found if not any(w in f for w in want)]
    if missing or extra:
        print(f"self-test FAILED: missing {missing}, unexpected {extra}")
        return 1
    print("self-test passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    found = list(offences(sys.argv[1]))
    for f in found:
        print(f)
    print(f"{len(found)} completeness offences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
