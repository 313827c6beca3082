"""Tests of fsdp_mlir.plot (python -m fsdp_mlir.plot FILE... -o PNG).

Metrics come from real fsdp-run runs of examples/mlp.mlir and
examples/gpt2.mlir when the tools are built, else from rows written here.
Skipped when matplotlib is not importable (except the test of that error).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fsdp_mlir import driver, plot

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

try:
    import matplotlib  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False
needs_mpl = pytest.mark.skipif(not HAVE_MPL, reason="matplotlib missing")


def _synthetic(path, steps, scale):
    rows = [{"step": s, "loss": scale / s, "step_time_s": 0.01,
             "tokens_per_s": 1000.0 * s, "peak_bytes": 3 << 20,
             "comm_exposed_s": 0.001} for s in range(1, steps + 1)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def metrics_files(tmp_path_factory):
    """mlp.jsonl and gpt2.jsonl: 3 steps each at 2 ranks."""
    d = tmp_path_factory.mktemp("metrics")
    try:
        driver.find_tool("fsdp-opt"), driver.find_tool("fsdp-run")
    except driver.ToolNotFoundError:
        return [_synthetic(d / "mlp.jsonl", 3, 1.0),
                _synthetic(d / "gpt2.jsonl", 3, 4.0)]
    files = []
    for model, kw in (("mlp", {}), ("gpt2", {"wrap_kinds": "Block"})):
        prog = driver.compile(EXAMPLES / f"{model}.mlir",
                              d / f"{model}.prog.mlir", world_size=2, **kw)
        driver.run(prog, nproc=2, steps=3, metrics=d / f"{model}.jsonl")
        files.append(d / f"{model}.jsonl")
    return files


def _check_png(path):
    data = Path(path).read_bytes()
    assert len(data) > 1000 and data.startswith(PNG_MAGIC)


@needs_mpl
@pytest.mark.parametrize("count", [1, 2])
def test_figure_has_three_panels_one_line_per_file(metrics_files, count):
    files = metrics_files[:count]
    fig = plot.figure(files)
    try:
        assert len(fig.axes) == 3
        titles = [ax.get_title() for ax in fig.axes]
        assert titles == ["loss", "throughput", "peak memory"]
        for ax in fig.axes:
            assert len(ax.get_lines()) == count
            labels = [t.get_text() for t in ax.get_legend().get_texts()]
            assert labels == [f.name for f in files]
            for line in ax.get_lines():
                assert list(line.get_xdata()) == [1, 2, 3]
        rows = plot.load(files[0])
        mib = fig.axes[2].get_lines()[0].get_ydata()
        assert list(mib) == [r["peak_bytes"] / 2**20 for r in rows]
    finally:
        import matplotlib.pyplot as plt
        plt.close(fig)


@needs_mpl
@pytest.mark.parametrize("count", [1, 2])
def test_cli_writes_png(metrics_files, tmp_path, count):
    out = tmp_path / "sub" / "curves.png"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT / "python")] + [p for p in
                                      [env.get("PYTHONPATH")] if p])
    proc = subprocess.run(
        [sys.executable, "-m", "fsdp_mlir.plot",
         *map(str, metrics_files[:count]), "-o", str(out)],
        capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    _check_png(out)


@needs_mpl
def test_plot_function_writes_png(metrics_files, tmp_path):
    out = plot.plot(metrics_files, tmp_path / "c.png")
    _check_png(out)


@needs_mpl
def test_empty_file_is_a_clear_error(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(plot.PlotError, match="empty.jsonl: no metric rows"):
        plot.figure([empty])
    assert plot.main([str(empty), "-o", str(tmp_path / "x.png")]) == 1
    assert "no metric rows" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_bad_line_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1, "loss": 1.0}\nnot json\n')
    with pytest.raises(plot.PlotError, match="bad.jsonl:2: not a JSON line"):
        plot.load(bad)


def test_missing_matplotlib_is_a_clear_error(tmp_path, monkeypatch, capsys):
    f = _synthetic(tmp_path / "m.jsonl", 2, 1.0)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="needs matplotlib: .*pip install"):
        plot.figure([f])
    assert plot.main([str(f), "-o", str(tmp_path / "x.png")]) == 1
    assert "needs matplotlib" in capsys.readouterr().err
