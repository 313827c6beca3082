#!/usr/bin/env python3
"""Feeds fsdp-opt truncated and mutated variants of IR files.

Every run must end with exit code 0 (the variant is still valid IR) or 1 with
an `error:` diagnostic; a signal (crash, failed assertion), another exit
code, a silent failure or a hang is a bug. Variants are derived from a fixed
seed so that a failure reproduces; failing variants are written to --keep.
"""

import argparse
import os
import random
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

TYPES = ["f32", "bf16", "f16", "f64", "i32", "i64", "i1", "index", "tensor<f32>",
         "tensor<?xf32>", "tensor<*xf32>", "!fsdp.token<tensor<4xf32>>"]
NUMBERS = ["0", "1", "-1", "2", "3", "7", "64", "-100", "2147483648",
           "99999999999999999999", "1.5", "-0.0", "1.0e+308", "nan"]
WORDS = ["nn.linear", "nn.add", "nn.relu", "nn.attention", "nn.split", "nn.concat",
         "nn.reshape", "nn.cross_entropy", "nn.batch_norm", "fsdp.call", "fsdp.get_param",
         "fsdp.get_buffer", "fsdp.set_buffer", "fsdp.module", "fsdp.param", "fsdp.forward",
         "fsdp.return", "fsdp.model", "fsdp.all_gather", "fsdp.unshard", "fsdp.wait",
         "unit", "kind", "init", "weight", "bias", "shard", "replicate", "group", "dtype",
         "causal", "num_heads", "dims", "sizes", "dim", "permutation", "reduction",
         "@weight", "@bias", "@\"0\"", "@root", "@transformer::@h", "%x", "%0", "%w"]
PUNCT = list("{}()<>[],:=%@#!\"-x")


def mutate(text, rng):
    """Returns one mutated variant of `text`."""
    if not text:
        return text
    lines = text.split("\n")
    kind = rng.randrange(10)
    if kind == 0:  # truncate anywhere
        return text[: rng.randrange(len(text))]
    if kind == 1:  # delete a line
        del lines[rng.randrange(len(lines))]
    elif kind == 2:  # duplicate a line
        i = rng.randrange(len(lines))
        lines.insert(rng.randrange(len(lines)), lines[i])
    elif kind == 3:  # swap two lines
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 4:  # change a number (shapes, attributes, indices)
        matches = list(re.finditer(r"-?\d+(\.\d+)?(e[+-]?\d+)?", text))
        if matches:
            m = rng.choice(matches)
            return text[: m.start()] + rng.choice(NUMBERS) + text[m.end():]
    elif kind == 5:  # change an element type
        matches = list(re.finditer(r"\b(f32|bf16|f16|i64|i32)\b", text))
        if matches:
            m = rng.choice(matches)
            return text[: m.start()] + rng.choice(TYPES) + text[m.end():]
    elif kind == 6:  # replace a word: op names, keywords, symbols, values
        matches = list(re.finditer(r"[%@]?[A-Za-z_][\w.]*", text))
        if matches:
            m = rng.choice(matches)
            return text[: m.start()] + rng.choice(WORDS) + text[m.end():]
    elif kind == 7:  # delete a character
        i = rng.randrange(len(text))
        return text[:i] + text[i + 1:]
    elif kind == 8:  # insert punctuation
        i = rng.randrange(len(text))
        return text[:i] + rng.choice(PUNCT) + text[i:]
    else:  # several mutations at once
        for _ in range(rng.randint(2, 4)):
            text = mutate(text, rng)
        return text
    return "\n".join(lines)


# Every variant that still verifies goes through the passes too, with the
# options of the i-th variant chosen from these in turn.
PIPELINES = [
    ["--fsdp-model-summary=output=/dev/null"],
    ["--fsdp-auto-wrap=policy=always", "--fsdp-build-train-step=optimizer=adamw clip-grad-norm=1.0"],
    ["--fsdp-auto-wrap=policy=size min-params=40", "--fsdp-build-train-step=momentum=0.9 grad-accum-steps=2"],
    ["--fsdp-auto-wrap=policy=module-kind kinds=Linear,Block", "--fsdp-build-train-step"],
    ["--fsdp-build-train-step=optimizer=adamw clip-grad-norm=1.0", "--fsdp-shard=world-size=4",
     "--fsdp-insert-collectives", "--fsdp-prefetch=forward-prefetch=true backward-prefetch=post"],
    ["--fsdp-auto-wrap=policy=always", "--fsdp-build-train-step",
     "--fsdp-shard=world-size=4 strategy=hybrid-shard shard-group-size=2", "--fsdp-insert-collectives"],
    ["--fsdp-mixed-precision=param-dtype=bf16 buffer-dtype=f16",
     "--fsdp-pipeline=world-size=4 auto-wrap-policy=size min-params=40 report=true"],
]


def run(fsdp_opt, variant, pipeline, timeout):
    """Runs fsdp-opt on one variant; returns None when it behaved, else why."""
    args = [fsdp_opt, "-"] + pipeline + ["-o", "/dev/null"]
    try:
        proc = subprocess.run(args, input=variant.encode(), capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "hang (no exit within %d s)" % timeout
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode < 0:
        return "killed by signal %d\n%s" % (-proc.returncode, stderr[-2000:])
    if proc.returncode not in (0, 1):
        return "exit code %d\n%s" % (proc.returncode, stderr[-2000:])
    if proc.returncode == 1 and "error:" not in stderr:
        return "exit code 1 without a diagnostic\n" + stderr[-2000:]
    return None if proc.returncode else ACCEPTED


# run()'s verdict for a variant that is valid IR and went through the passes.
ACCEPTED = "accepted"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fsdp-opt", required=True)
    parser.add_argument("--count", type=int, default=600, help="variants in all")
    parser.add_argument("--seed", type=int, default=20261121)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=int, default=20)
    parser.add_argument("--keep", help="directory for failing variants")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    seeds = [open(path).read() for path in args.inputs]
    variants = [mutate(seeds[i % len(seeds)], rng) for i in range(args.count)]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(
            lambda i: run(args.fsdp_opt, variants[i], PIPELINES[i % len(PIPELINES)], args.timeout),
            range(len(variants))))

    accepted = results.count(ACCEPTED)
    failures = [(i, why) for i, why in enumerate(results) if why and why != ACCEPTED]
    for i, why in failures:
        print("variant %d of %s: %s" % (i, args.inputs[i % len(seeds)], why))
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            with open(os.path.join(args.keep, "variant-%d.mlir" % i), "w") as f:
                f.write(variants[i])
    print("%d variants were still valid and went through the passes" % accepted)
    print("tried %d variants: %d misbehaved" % (len(variants), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
