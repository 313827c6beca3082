#!/usr/bin/env python3
"""How well fsdp-report's predicted step time matches fsdp-run, in one run.

1. Calibrates the cost model's machine profile on this machine: trains the
   calibration program (default: the demo's character-level GPT, 2 ranks,
   full-shard) with a trace, sums the traced time of GEMM kernels, other
   kernels and collectives, and divides by what the model counts for the
   same step (GEMM FLOPs, kernel bytes, ring bytes — read back from
   fsdp-report by pricing one resource at a time).
2. Predicts every configuration with that profile and measures it
   (median step time over the steps after warm-up), printing
   predicted / measured.

The machine is shared and noisy: compare the ratios of one run.

    python3 bench/step_time_model.py [--steps 12] [--build build]
"""
import argparse
import json
import math
import statistics
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GEMM_KERNELS = {"linear_forward", "matmul_forward", "attention_forward",
                "attention_backward"}
COLLECTIVES = {"all_gather", "reduce_scatter", "all_reduce"}
# Runtime events that are not kernels of the step.
NOT_KERNELS = {"buffer_free", "stream_wait_event", "event_record",
               "copy_from_host", "copy_to_host", "thread_name",
               "thread_sort_index", "process_name", "process_sort_index"}

GPT = ["auto-wrap-policy=module-kind", "wrap-kinds=Block"]
CONFIGS = [  # (name, model, ranks, pipeline options)
    ("char_gpt full-shard", "char_gpt", 2, ["sharding-strategy=full-shard"] + GPT),
    ("char_gpt shard-grad-op", "char_gpt", 2,
     ["sharding-strategy=shard-grad-op"] + GPT),
    ("char_gpt no-shard", "char_gpt", 2, ["sharding-strategy=no-shard"] + GPT),
    ("char_gpt 1 rank", "char_gpt", 1,
     ["sharding-strategy=no-shard", "grad-accum-steps=2"] + GPT),
    ("gpt2 full-shard", "gpt2", 2, ["sharding-strategy=full-shard"] + GPT),
    ("nested_wrapped full-shard", "nested_wrapped", 2,
     ["sharding-strategy=full-shard"]),
]


def pipeline(ranks, options):
    return " ".join([f"world-size={ranks}", "optimizer=adamw"] + options)


def report(opt, model, ranks, options, profile):
    """fsdp-report's predicted_step for `profile` (option -> value)."""
    flags = " ".join(f"{k}={v}" for k, v in profile.items())
    out = subprocess.run(
        [opt, str(REPO / "examples" / f"{model}.mlir"),
         f"--fsdp-pipeline={pipeline(ranks, options)}",
         f"--fsdp-report=json=true {flags}", "-o", "/dev/null"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)["steps"][0]["predicted_step"]


def counts(opt, model, ranks, options):
    """What the model counts per step: GEMM FLOPs, other kernels' bytes,
    ring bytes, calls and ring steps (one resource priced at a time)."""
    free = {"gemm-gflops": 1e12, "memory-gbps": 1e12, "link-gbps": 1e12,
            "link-latency-us": 0, "op-overhead-us": 0}
    def priced(**change):
        p = report(opt, model, ranks, options,
                   {**free, **{k.replace("_", "-"): v for k, v in change.items()}})
        return p["compute_seconds"], p["communication_seconds"]
    return {"gemm_flops": priced(gemm_gflops=1)[0] * 1e9,
            "kernel_bytes": priced(memory_gbps=1)[0] * 1e9,
            "ring_bytes": priced(link_gbps=1)[1] * 1e9,
            "compute_calls": priced(op_overhead_us=1e6)[0],
            "ring_steps": priced(link_latency_us=1e6)[1]}


def run(fsdp_run, program, ranks, steps, workdir, trace=None):
    metrics = workdir / "metrics.jsonl"
    cmd = [fsdp_run, program, "--nproc", str(ranks), "--steps", str(steps),
           "--metrics", str(metrics), "--quiet"]
    if trace:
        cmd += ["--trace", str(trace), "--trace-steps", str(steps)]
    subprocess.run(cmd, check=True)
    rows = [json.loads(line) for line in metrics.open()]
    return statistics.median(r["step_time_s"] for r in rows[2:] or rows)


def traced_seconds(trace, steps):
    """Rank 0's time per step in GEMMs, other kernels (and their number)
    and collectives, from the Chrome trace."""
    events = json.loads(Path(trace).read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    out = {"gemm": 0.0, "kernels": 0.0, "kernel_calls": 0, "collectives": 0.0}
    for e in events:
        if e.get("ph") != "X" or e.get("pid") != 0:
            continue
        name, seconds = e["name"], e["dur"] * 1e-6
        if name in GEMM_KERNELS:
            out["gemm"] += seconds
        elif name in COLLECTIVES:
            out["collectives"] += seconds
        elif name not in NOT_KERNELS:
            out["kernels"] += seconds
            out["kernel_calls"] += 1
    return {k: v / steps for k, v in out.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--build", default=str(REPO / "build"))
    args = parser.parse_args()
    opt = str(Path(args.build) / "bin" / "fsdp-opt")
    fsdp_run = str(Path(args.build) / "bin" / "fsdp-run")
    workdir = Path(tempfile.mkdtemp(prefix="step-time-"))

    def compile(name, model, ranks, options):
        out = workdir / (name.replace(" ", "_") + ".mlir")
        subprocess.run([opt, str(REPO / "examples" / f"{model}.mlir"),
                        f"--fsdp-pipeline={pipeline(ranks, options)} lower=true",
                        "-o", str(out)], check=True)
        return str(out)

    # 1. Calibration on the first configuration.
    name, model, ranks, options = CONFIGS[0]
    trace = workdir / "trace.json"
    run(fsdp_run, compile(name, model, ranks, options), ranks, args.steps,
        workdir, trace)
    t = traced_seconds(trace, args.steps)
    c = counts(opt, model, ranks, options)
    overhead_us = 4.0
    latency_us = 30.0
    other_calls = c["compute_calls"] - t["kernel_calls"]  # GEMM calls
    profile = {
        "gemm-gflops": c["gemm_flops"] / t["gemm"] / 1e9,
        "memory-gbps": c["kernel_bytes"] /
        max(t["kernels"] - t["kernel_calls"] * overhead_us * 1e-6, 1e-9) / 1e9,
        "link-gbps": c["ring_bytes"] /
        max(t["collectives"] - c["ring_steps"] * latency_us * 1e-6, 1e-9) / 1e9,
        "link-latency-us": latency_us,
        "op-overhead-us": overhead_us,
    }
    print(f"calibration ({name}, traced {args.steps} steps): per step "
          f"GEMM {t['gemm'] * 1e3:.1f} ms for {c['gemm_flops'] / 1e9:.2f} GFLOP, "
          f"other kernels {t['kernels'] * 1e3:.1f} ms for "
          f"{c['kernel_bytes'] / 1e6:.1f} MB in {t['kernel_calls']:.0f} calls "
          f"(model: {other_calls:.0f} GEMM calls), collectives "
          f"{t['collectives'] * 1e3:.1f} ms for {c['ring_bytes'] / 1e6:.2f} MB "
          "of ring traffic")
    print("profile: " + " ".join(f"{k}={v:.3g}" for k, v in profile.items()))

    # Fixed costs: the per-call overhead and the per-ring-step latency that
    # best explain the small models' steps (a grid over both, in log space),
    # GEMM and bandwidth rates kept.
    small = [cfg for cfg in CONFIGS if cfg[1] != model]
    measured_small = [run(fsdp_run, compile(*cfg), cfg[2], args.steps, workdir)
                      for cfg in small]
    best = None
    for overhead in (2, 5, 10, 20, 30, 40, 60, 80, 120):
        for latency in (10, 30, 60, 100, 150, 200, 300, 500):
            trial = dict(profile, **{"op-overhead-us": overhead,
                                     "link-latency-us": latency})
            error = sum(
                (math.log(report(opt, m, r, o, trial)["seconds"] / meas)) ** 2
                for (_, m, r, o), meas in zip(small, measured_small))
            if best is None or error < best[0]:
                best = (error, overhead, latency)
    profile["op-overhead-us"], profile["link-latency-us"] = best[1], best[2]
    print("fixed costs fitted on " + ", ".join(cfg[0] for cfg in small) +
          f": {best[1]} us per call, {best[2]} us per ring step")
    print("profile: " + " ".join(f"{k}={v:.3g}" for k, v in profile.items()))

    # 2. Predicted against measured.
    print(f"\n{'configuration':28} {'predicted ms':>12} {'measured ms':>12} "
          f"{'pred/meas':>10} {'exposed ms':>11}")
    for name, model, ranks, options in CONFIGS:
        predicted = report(opt, model, ranks, options, profile)
        measured = run(fsdp_run, compile(name, model, ranks, options), ranks,
                       args.steps, workdir)
        print(f"{name:28} {predicted['seconds'] * 1e3:12.2f} "
              f"{measured * 1e3:12.2f} {predicted['seconds'] / measured:10.2f} "
              f"{predicted['exposed_communication_seconds'] * 1e3:11.2f}")


if __name__ == "__main__":
    main()
