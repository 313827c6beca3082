"""Plot fsdp-run metrics: loss, tokens/s and peak memory per step.

    python -m fsdp_mlir.plot metrics.jsonl [more.jsonl ...] -o curves.png

One figure, three panels (loss, tokens/s, peak memory in MiB) against the
step; with several files, one line per file labelled with its name. Uses
matplotlib's Agg backend (no display needed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["PANELS", "PlotError", "load", "figure", "plot", "main"]

# (metric key, panel title, y label, scale applied to the values)
PANELS = (("loss", "loss", "loss", 1.0),
          ("tokens_per_s", "throughput", "tokens/s", 1.0),
          ("peak_bytes", "peak memory", "MiB", 1.0 / (1 << 20)))


class PlotError(ValueError):
    """A metrics file that cannot be plotted."""


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "fsdp_mlir.plot needs matplotlib: python3 -m pip install "
            "matplotlib") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def load(path) -> list[dict]:
    """The rows of a metrics JSON-lines file; PlotError if it has none."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise PlotError(f"{path}: cannot read: {e.strerror}") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise PlotError(f"{path}:{number}: not a JSON line: {e}") from None
        if not isinstance(row, dict):
            raise PlotError(f"{path}:{number}: not a JSON object")
        rows.append(row)
    if not rows:
        raise PlotError(f"{path}: no metric rows")
    return rows


def _labels(paths):
    names = [Path(p).name for p in paths]
    if len(set(names)) == len(names):
        return names
    return [str(p) for p in paths]  # same names in different directories


def figure(paths):
    """A matplotlib Figure with the three panels for these metrics files."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise PlotError("no metrics files given")
    series = [load(p) for p in paths]
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 3.8),
                             constrained_layout=True)
    for label, rows in zip(_labels(paths), series):
        for ax, (key, _, _, scale) in zip(axes, PANELS):
            points = [(row.get("step", i + 1), row[key] * scale)
                      for i, row in enumerate(rows)
                      if isinstance(row.get(key), (int, float))]
            steps = [s for s, _ in points]
            values = [v for _, v in points]
            ax.plot(steps, values, label=label,
                    marker="." if len(points) < 50 else None)
    from matplotlib.ticker import MaxNLocator
    for ax, (_, title, ylabel, _) in zip(axes, PANELS):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    return fig


def plot(paths, output) -> Path:
    """Write the figure for these metrics files to `output` (PNG, PDF, SVG:
    by its extension) and return its path."""
    fig = figure(paths)
    plt = _pyplot()
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(output, dpi=100)
    finally:
        plt.close(fig)
    return output


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.plot",
        description="Plot loss, tokens/s and peak memory per step of "
                    "fsdp-run --metrics files.")
    parser.add_argument("metrics", nargs="+", help="metrics .jsonl files")
    parser.add_argument("-o", "--output", default="curves.png",
                        help="image to write (default: curves.png)")
    args = parser.parse_args(argv)
    try:
        out = plot(args.metrics, args.output)
    except (ImportError, PlotError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
