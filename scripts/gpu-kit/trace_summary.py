#!/usr/bin/env python3
"""Per-op time of a traced run (fsdprt-run --trace): total and mean
milliseconds per op name and stream over the traced steps, largest first,
as JSON. Usage: trace_summary.py trace.json [--top 25]"""
import argparse
import collections
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    threads = {(e.get("pid"), e.get("tid")): e["args"]["name"]
               for e in events if e.get("ph") == "M"
               and e.get("name") == "thread_name"}
    total = collections.Counter()
    count = collections.Counter()
    for e in events:
        if e.get("ph") == "X":
            key = (e["name"], threads.get((e.get("pid"), e.get("tid")), "?"))
            total[key] += e.get("dur", 0) / 1000.0
            count[key] += 1
    rows = [{"op": op, "stream": stream, "total_ms": round(ms, 3),
             "calls": count[(op, stream)],
             "mean_ms": round(ms / count[(op, stream)], 4)}
            for (op, stream), ms in total.most_common(args.top)]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
