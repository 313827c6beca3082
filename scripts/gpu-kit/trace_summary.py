#!/usr/bin/env python3
"""Per-op time of a traced run (fsdprt-run --trace): per op name and stream
the calls, total, mean and median milliseconds over the traced steps, and
median x calls (what a step spends once one-time work such as building
cuDNN graphs in the first step is left out), largest first, as JSON.
Usage: trace_summary.py trace.json [--top 25]"""
import argparse
import collections
import json
import statistics


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
    durations = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            key = (e["name"], threads.get((e.get("pid"), e.get("tid")), "?"))
            durations[key].append(e.get("dur", 0) / 1000.0)
    rows = []
    for (op, stream), ms in durations.items():
        median = statistics.median(ms)
        rows.append({"op": op, "stream": stream, "calls": len(ms),
                     "total_ms": round(sum(ms), 3),
                     "mean_ms": round(sum(ms) / len(ms), 4),
                     "median_ms": round(median, 4),
                     "median_x_calls_ms": round(median * len(ms), 3)})
    rows.sort(key=lambda r: -r["median_x_calls_ms"])
    print(json.dumps(rows[:args.top], indent=1))


if __name__ == "__main__":
    main()
