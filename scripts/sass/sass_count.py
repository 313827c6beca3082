#!/usr/bin/env python3
"""Counts the SASS instructions one thread of a probe kernel executes.

Usage: sass_count.py KIND SASS_TID0 SASS_TID32 SASS_TID992 (xent_sass_count.sh).
The probes fix everything but the data, so the branches left are loops
over a thread's groups (taken groups - 1 times) and data-dependent ones.
A conditional forward branch skips the code up to its target when that
code holds a cold marker (the slow path of a division or log: CALL; NaN
handling; software bf16 rounding; RowKernels' running-max rescale, which
runs once or a few times a thread: so default's counts are lower bounds),
and falls through otherwise. A row is warp 0 (thread 0: 7 groups, the
block reductions' second level, the row's loss term), warps 1-4 (thread
32: 7 groups) and warps 5-31 (thread 992: 6 groups); a warp issues what its
lane 0 executes.
"""
import re
import sys

COLD = ("CALL.REL", "FSETP.NAN", "0x7f800000", "+QNAN", "0x3bbb989d")
F64 = re.compile(r"^(DADD|DMUL|DFMA|DSETP|F2F\.F64|F2F\.F32\.F64|I2F\.F64)")


def functions(path):
    """{probe name: [(address, predicate, opcode, operands)]}"""
    out, cur = {}, None
    for line in open(path):
        m = re.search(r"Function : \S*?(probe(?:Forward|Backward|Fused))", line)
        if "Function :" in line:
            cur = out.setdefault(m.group(1), []) if m else None
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?(\S+)(.*?);",
                     line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), (m.group(2) or "").strip(),
                        m.group(3), m.group(4)))
    return out


def target(operands):
    return int(re.search(r"0x([0-9a-f]+)\s*$", operands.strip()).group(1), 16)


def executed(code, trips):
    """(instructions, MUFU, FP64 ops) the thread executes."""
    at = {a: i for i, (a, _, _, _) in enumerate(code)}

    def cold(begin, end):  # skips nested conditional regions
        i = begin
        while i < len(code) and code[i][0] < end:
            a, pred, op, rest = code[i]
            if any(c in op + rest for c in COLD):
                return True
            if op == "BRA" and pred and target(rest) > a:
                i = at[target(rest)]
                continue
            i += 1
        return False

    counts, loops, stack, i = [0, 0, 0], {}, [], 0
    while True:
        a, pred, op, rest = code[i]
        counts[0] += 1
        counts[1] += op.startswith("MUFU")
        counts[2] += bool(F64.match(op))
        if counts[0] > 10 ** 6:
            raise RuntimeError("no exit")
        if op == "EXIT" and not pred:
            return counts
        if op.startswith("CALL"):
            stack.append(i + 1)
            i = at[target(rest)]
            continue
        if op.startswith("RET"):
            i = stack.pop()
            continue
        if op == "BRA":
            to = target(rest)
            if not pred:
                i = at[to]
                continue
            if to <= a:  # a loop over the thread's groups
                loops[a] = loops.get(a, 0) + 1
                if loops[a] < trips:
                    i = at[to]
                    continue
            elif cold(i + 1, to):
                i = at[to]
                continue
        i += 1


def main(kind, paths):
    threads = {0: 1, 32: 4, 992: 27}  # warps each probe stands for
    groups = {0: 7, 32: 7, 992: 6}
    per = {tid: functions(p) for tid, p in zip(threads, paths)}
    for call in ("probeForward", "probeBackward", "probeFused"):
        row = [0, 0, 0]
        for tid, warps in threads.items():
            c = executed(per[tid][call], groups[tid])
            print("%-8s %-6d %-14s %8d %6d %6d" % (kind, tid, call[5:], *c))
            row = [r + warps * x for r, x in zip(row, c)]
        print("%-8s %-6s %-14s %8d %6d %6d   per element %.2f (MUFU %.2f)" %
              (kind, "row", call[5:], *row, 32 * row[0] / 50257,
               32 * row[1] / 50257))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
