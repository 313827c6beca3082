#!/usr/bin/env python3
"""SASS instructions a warp executes for one norm row (docs/GPU-Results.md).

Compiles RowKernels.cu (streaming) and LeanNorms.cu (lean) for sm_90,
disassembles them (cuobjdump) and walks each kernel's row loop once the
way an aligned row of --width elements goes: every inner loop (the
streaming kernels' loops over a lane's groups) runs width / 256 times, a
divergent-warp branch (BRA.DIV) is not taken, and at every other forward
branch the walk takes the side without 16-bit scalar memory accesses
(the element-by-element path for a partial or misaligned group) or a
CALL (the double division's slow path); otherwise it falls through.
The layer_norm backward is walked with its addend (add_layer_norm_grad):
the walk cannot tell a null addend from the SASS.
--decisions prints every branch so the walk can be checked by eye.

  scripts/sass/norm_sass_count.py [--width 768] [--dtype Bf16] [--decisions]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEAN = r"StorageELi{w}E"
KERNELS = [  # (label, file, kernel name pattern; {d} the dtype, {w} width)
    ("layer_norm fwd", "RowKernels.cu", r"19layerNormRowsKernelINS0_\d+{d}S"),
    ("layer_norm fwd", "LeanNorms.cu",
     r"leanLayerNormKernelINS0_\d+{d}" + LEAN),
    ("add + layer_norm fwd", "RowKernels.cu",
     r"addLayerNormRowsKernelINS0_\d+{d}S"),
    ("add + layer_norm fwd", "LeanNorms.cu",
     r"leanAddLayerNormKernelINS0_\d+{d}" + LEAN),
    ("layer_norm bwd + addend", "RowKernels.cu",
     r"layerNormRowsBackwardKernelINS0_\d+{d}S"),
    ("layer_norm bwd + addend", "LeanNorms.cu",
     r"leanLayerNormBackwardKernelINS0_\d+{d}" + LEAN),
    ("rms_norm fwd", "RowKernels.cu", r"17rmsNormRowsKernelINS0_\d+{d}S"),
    ("rms_norm fwd", "LeanNorms.cu", r"leanRmsNormKernelINS0_\d+{d}" + LEAN),
    ("rms_norm bwd", "RowKernels.cu",
     r"rmsNormRowsBackwardKernelINS0_\d+{d}S"),
    ("rms_norm bwd", "LeanNorms.cu",
     r"leanRmsNormBackwardKernelINS0_\d+{d}" + LEAN),
]
COLD = re.compile(r"\b(LDG|STG)\.E\.(U16|16)\b|\bCALL\b")  # rare paths
WIDE = re.compile(r"\b(LDG|STG)\.E\.(EL\.)?128\b")


def tool(name):
    for d in (os.environ.get("CUDA_HOME", "/usr/local/cuda") + "/bin", None):
        path = os.path.join(d, name) if d else shutil.which(name)
        if path and os.path.exists(path):
            return path
    try:  # Triton's wheel ships cuobjdump where the toolkit image lacks it
        import triton
        path = os.path.join(os.path.dirname(triton.__file__),
                            "backends/nvidia/bin", name)
        if os.path.exists(path):
            return path
    except ImportError:
        pass
    sys.exit(f"{name} not found")


def disassemble(source, tmp):
    cubin = os.path.join(tmp, os.path.basename(source) + ".cubin")
    subprocess.run([tool("nvcc"), "-I", f"{ROOT}/runtime/include", "-I",
                    f"{ROOT}/runtime", "-O3", "-DNDEBUG", "-std=c++17",
                    "--expt-relaxed-constexpr", "-arch=sm_90", "-cubin", "-o",
                    cubin, f"{ROOT}/runtime/backends/cuda/{source}"],
                   check=True)
    return subprocess.run([tool("cuobjdump"), "-sass", cubin], check=True,
                          capture_output=True, text=True).stdout


def instructions(sass, pattern):
    """[(address, text)] of the first function whose name matches."""
    out, inside = [], False
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if out:
                break
            inside = re.search(pattern, m.group(1)) is not None
            continue
        m = inside and re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2)))
    return out


def target(text):
    m = re.search(r"\bBRA\b(?:\.\w+)*\s+(?:\S+,\s*)?0x([0-9a-f]+)", text)
    return int(m.group(1), 16) if m else None


def walk(ins, trips, decisions):
    at = {a: i for i, (a, _) in enumerate(ins)}
    back = [(target(t), a) for a, t in ins
            if t.startswith("@") and target(t) is not None and
            target(t) < a and "BRA.DIV" not in t]
    head, end = min(back)  # the row loop: the outermost back edge
    taken, count = {}, 0

    def straight(j):  # a cold instruction before the next branch
        for _, t in ins[j:]:
            if COLD.search(t):
                return True
            if "BRA" in t or "BSYNC" in t or "EXIT" in t:
                return False
        return False

    def reaches(j, pattern, seen):
        """Some path from index j to the next reconvergence (BSYNC) or
        loop edge runs an instruction matching pattern."""
        while j < len(ins) and j not in seen:
            seen.add(j)
            a, t = ins[j]
            if pattern.search(t):
                return True
            dest = target(t)
            if "BSYNC" in t or "EXIT" in t or a == end or (
                    dest is not None and dest < a):
                return False
            if dest is not None and "BRA.DIV" not in t:
                if not t.startswith("@"):
                    j = at[dest]
                    continue
                if reaches(at[dest], pattern, seen):
                    return True
            j += 1
        return False

    prologue = None  # from the entry to the row loop, once per warp
    i = 0
    while True:
        a, t = ins[i]
        if a == head and prologue is None:
            prologue, count = count, 0
        count += 1
        if a == end and prologue is not None:
            return prologue, count
        dest = target(t)
        if dest is None or "BRA.DIV" in t:
            i += 1
            continue
        if not t.startswith("@"):
            i = at[dest]
            continue
        if dest < a:  # an inner loop's back edge
            taken[a] = taken.get(a, 0) + 1
            go = taken[a] < trips
            if not go:
                taken[a] = 0
        else:
            # The side with whole 16-byte packs; else the side without
            # 16-bit scalar accesses or a CALL on its straight line.
            hot = [reaches(j, WIDE, set()) for j in (i + 1, at[dest])]
            if hot[0] != hot[1]:
                go = hot[1]
            else:
                cold = [straight(j) for j in (i + 1, at[dest])]
                go = cold[0] and not cold[1]
        if decisions:
            print(f"    {a:05x} {t}: {'taken' if go else 'not taken'}")
        i = at[dest] if go else i + 1


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--dtype", default="Bf16", choices=["Bf16", "F16", "F32"])
    p.add_argument("--decisions", action="store_true")
    args = p.parse_args()
    if args.width % 256:
        sys.exit("--width: a multiple of 256 (32 lanes x 8 elements)")
    with tempfile.TemporaryDirectory() as tmp:
        sass = {f: disassemble(f, tmp) for f in ("RowKernels.cu",
                                                  "LeanNorms.cu")}
    print(f"SASS instructions a warp executes per {args.width}-wide "
          f"{args.dtype.lower()} row (sm_90)")
    rows = {}
    for label, source, pattern in KERNELS:
        pattern = pattern.format(d=args.dtype, w=args.width)
        ins = instructions(sass[source], pattern)
        if not ins:
            sys.exit(f"no kernel matches {pattern} in {source}")
        if args.decisions:
            print(f"  {label}, {source}:")
        rows.setdefault(label, []).append(
            walk(ins, args.width // 256, args.decisions))
    print("  (a row: the row loop's body; + once a warp: the entry to it)")
    for label, ((sp, streaming), (lp, lean)) in rows.items():
        print(f"  {label:26} streaming {streaming:5} + {sp:3}   "
              f"lean {lean:5} + {lp:3}   ({streaming / lean:.1f}x fewer)")


if __name__ == "__main__":
    main()
