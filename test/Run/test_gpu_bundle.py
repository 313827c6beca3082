"""The GPU lease kit, checked as far as a machine without a GPU can: it
builds within its size limit, its runner trains from a clean copy with only
the kit's libraries (scripts/gpu-bundle.sh checks that itself), and its
parity part, run on the CPU backend, passes against its own references and
fails when a reference is off, its queued-versus-synchronous check runs,
and its multirank part dry-runs.
"""
import json
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, clean_env

LIMIT = 48 * 1024 * 1024


@pytest.fixture(scope="module")
def kit(fsdp_run, tmp_path_factory):
    build = Path(fsdp_run).resolve().parents[1]
    if not (build / "runtime" / "unittests" / "fsdprt_cuda_unittests").exists():
        pytest.skip("the CUDA backend is not built: no kit")
    out = tmp_path_factory.mktemp("kit") / "gpu-bundle"
    proc = subprocess.run([str(REPO_ROOT / "scripts" / "gpu-bundle.sh"),
                           str(out)], capture_output=True, text=True,
                          timeout=900, env=clean_env({"BUILD_DIR": str(build)}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the same 5 losses as the reference" in proc.stdout, proc.stdout
    return out


def _lease(kit, out, **env):
    return subprocess.run([str(kit / "gpu-lease.sh")], capture_output=True,
                          text=True, timeout=600,
                          env=clean_env({"OUT": str(out), **env}))


def test_kit_fits_and_holds_what_the_lease_runs(kit):
    size = sum(f.stat().st_size for f in kit.rglob("*") if f.is_file())
    assert size <= LIMIT, f"{size} bytes"
    for name in ("bin/fsdprt-run", "bin/fsdprt-comm-check",
                 "bin/fsdprt_cuda_unittests", "bin/fsdprt_cuda_bench",
                 "lib/libfsdp_runtime.so.xz",
                 "python/torch_gpt2_step.py", "python/torch_reference.py",
                 "src/runtime.tar.xz", "manifest.json"):
        assert (kit / name).exists(), name
    models = ("char_gpt", "gpt2", "llama_tiny", "nested_wrapped",
              "gpt2_offload")
    for dtype in ("f32", "bf16"):
        assert (kit / "steps" / f"gpt2_124m-{dtype}-adamw.so").exists()
    assert (kit / "steps" / "gpt2_124m_unpadded-bf16-adamw.so").exists()
    # The fusions' A/B step calls the fused kernels (the option string took).
    fused = (kit / "steps" / "gpt2_124m_fused-bf16-adamw.so").read_bytes()
    for symbol in (b"fsdprt_add_layer_norm_forward",
                   b"fsdprt_add_layer_norm_backward",
                   b"fsdprt_linear_gelu_forward",
                   b"fsdprt_linear_gelu_backward"):
        assert symbol in fused, symbol
    plain = (kit / "steps" / "gpt2_124m-bf16-adamw.so").read_bytes()
    assert b"fsdprt_linear_gelu_forward" not in plain
    for dtype in ("f32", "bf16"):
        for model in models:
            for optimizer in ("adamw", "sgd"):
                step = f"{model}-{dtype}-{optimizer}"
                assert (kit / "steps" / f"{step}.so").exists()
                assert (kit / "reference" / f"{step}.safetensors").exists()
    try:  # the mixture of experts where transformers is installed
        import transformers  # noqa: F401
    except ImportError:
        return
    for dtype in ("f32", "bf16"):
        assert (kit / "steps" / f"mixtral_1b-{dtype}-adamw.so").exists()
        assert (kit / "reference" /
                f"mixtral_tiny-{dtype}-adamw.safetensors").exists()


def test_parity_part_on_cpu_passes_and_catches_a_wrong_reference(kit, tmp_path):
    pytest.importorskip("torch")  # the kit's comparison reads with torch
    proc = _lease(kit, tmp_path / "good", BACKEND="cpu",
                  PARTS="parity,async_vs_sync")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "good" / "results.json").read_text())
    # Every reference the kit holds (MobileNetV2's where torchvision is
    # installed) was run and compared.
    references = sorted(p.stem for p in (kit / "reference").glob("*.jsonl"))
    assert len(references) >= 20
    assert sorted(results["parity"]) == references
    assert all(r["ok"] for r in results["parity"].values()), results["parity"]
    assert [p["status"] for p in results["parts"]] == ["passed", "passed"]

    ref = kit / "reference" / "gpt2-f32-adamw.jsonl"
    original = ref.read_text()
    rows = [json.loads(line) for line in original.splitlines()]
    rows[0]["loss"] *= 1.001
    ref.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        proc = _lease(kit, tmp_path / "bad", BACKEND="cpu", PARTS="parity",
                      PARITY_ONLY="gpt2-f32-*")
    finally:
        ref.write_text(original)
    assert proc.returncode == 1
    results = json.loads((tmp_path / "bad" / "results.json").read_text())
    assert sorted(results["parity"]) == ["gpt2-f32-adamw", "gpt2-f32-sgd"]
    assert not results["parity"]["gpt2-f32-adamw"]["ok"]
    assert results["parity"]["gpt2-f32-sgd"]["ok"]


def test_multirank_part_dry_runs_on_cpu(kit, tmp_path):
    """The multirank part (2-4 NCCL ranks on one GPU over loopback) on the
    CPU backend: the same ranks started by hand, over Gloo, match the
    kit's CPU references at 2 and 4 ranks, and a killed or stopped rank
    ends the other (the stop at the collective timeout, 5 s here)."""
    pytest.importorskip("torch")  # the kit's comparison reads with torch
    out = tmp_path / "multirank"
    proc = _lease(kit, out, BACKEND="cpu", PARTS="multirank",
                  MULTIRANK_STALL_TIMEOUT="5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = {c["check"]: c for c in json.loads(
        (out / "results.json").read_text())["multirank"]}
    parity = [name for name in checks if name.startswith("parity_")]
    assert len(parity) == 5 and "parity_gpt2_r4_hybrid-f32-sgd" in parity
    assert {"comm_check_2", "comm_check_4", "peer_KILL", "peer_STOP",
            "graph_replay_gpt2_r2-f32-sgd"} <= set(checks)
    assert all(c["status"] in ("passed", "skipped")
               for c in checks.values()), checks
    assert "rank 0 ended" in checks["peer_STOP"]["detail"]


def _results_table(tmp_path, results):
    """scripts/gpu-kit/results_table.py's lines for `results`."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    return subprocess.run(
        ["python3", str(REPO_ROOT / "scripts" / "gpu-kit" /
                        "results_table.py"), str(path)],
        capture_output=True, text=True, check=True).stdout.splitlines()


def test_results_table_states_the_goals_ratios(tmp_path):
    """scripts/gpu-kit/results_table.py on a lease's results.json (the
    2026-11-26 H100 numbers): a row per run present, MFU from the step
    time, ours with the device mark's parts, and the goals' ratios."""
    results = {
        "gpt2_124m_bf16": {"median_step_s": 0.0221, "peak_bytes": 5.10e9,
                           "device_peak_bytes": 5.37e9,
                           "gemm_workspace_bytes": 32 << 20,
                           "scratch_reserve_bytes": 201720064},
        "gpt2_124m_f32": {"median_step_s": 0.2036, "peak_bytes": 8.21e9,
                          "device_peak_bytes": 8.48e9},
        "torch_gpt2_124m": {
            "eager_bf16": {"median_step_s": 0.0481, "peak_bytes": 8.70e9},
            "compile_bf16": {"median_step_s": 0.0246, "peak_bytes": 5.56e9}}}
    out = _results_table(tmp_path, results)
    assert out[2] == ("| ours bf16, the step as one CUDA graph | 0.0221 s | "
                      "371k | 32.2% | 5.37 GB (arena 5.10 GB, workspace "
                      "32 MiB, scratch 202 MB) |"), out
    assert out[3] == "| ours f32 | 0.2036 s | 40k | 3.5% | 8.48 GB " \
        "(arena 8.21 GB) |", out
    assert len([l for l in out if l.startswith("| PyTorch")]) == 2, out
    assert out[-1] == ("bf16 step time: 0.46x PyTorch eager's, 0.90x "
                       "torch.compile's; peak memory 0.97x torch.compile's")


def test_results_table_states_batch_64_and_the_bar(tmp_path):
    """The quick kit's runs (PARTS=quick: no eager PyTorch): batch 64 rows
    at 64 x 1024 tokens a step, its ratio to torch.compile's, and tokens/s
    against issue 41's 500k (the 2026-11-28 H200 numbers)."""
    results = {
        "gpt2_124m_bf16-b64": {"median_step_s": 0.1335, "peak_bytes": 28.1e9,
                               "device_peak_bytes": 30.4e9},
        "torch_gpt2_124m_b64": {
            "compile_bf16": {"median_step_s": 0.1316, "peak_bytes": 37.2e9}}}
    out = _results_table(tmp_path, results)
    assert out[2] == ("| ours bf16, batch 64, one CUDA graph | 0.1335 s | "
                      "491k | 42.7% | 30.40 GB (arena 28.10 GB) |"), out
    assert out[3].startswith("| PyTorch torch.compile bf16, batch 64 | "
                             "0.1316 s | 498k |"), out
    assert out[-2] == ("batch 64 step time: 1.01x torch.compile's; peak "
                       "memory 0.82x torch.compile's"), out
    assert out[-1] == "batch 64: 491k tokens/s, 0.98x issue 41's bar (500k)"


def test_results_table_puts_the_lean_norms_beside_the_default(tmp_path):
    """The quick kit's lean-norm runs (FSDPRT_NORM_KERNELS=lean) at batch 8
    and 64 each get their row after the default kernels' row."""
    run = {"median_step_s": 0.0200, "peak_bytes": 5.10e9,
           "device_peak_bytes": 5.99e9}
    results = {"gpt2_124m_bf16": run, "gpt2_124m_bf16-lean": run,
               "gpt2_124m_bf16-b64": dict(run, median_step_s=0.1275),
               "gpt2_124m_bf16-b64lean": dict(run, median_step_s=0.1250)}
    out = _results_table(tmp_path, results)
    assert out[3] == ("| ours bf16, lean norm kernels (FSDPRT_NORM_KERNELS="
                      "lean) | 0.0200 s | 410k | 35.6% | 5.99 GB (arena "
                      "5.10 GB) |"), out
    assert out[4].startswith("| ours bf16, batch 64, one CUDA graph | "
                             "0.1275 s |"), out
    assert out[5].startswith("| ours bf16, batch 64, lean norm + "
                             "cross-entropy | 0.1250 s | 524k |"), out


def test_results_table_puts_the_lean_cross_entropy_run_beside_the_step(
        tmp_path):
    """The kit's bf16:leanxent run (FSDPRT_XENT_KERNELS=lean): its row, and
    its step time against the default kernels'."""
    results = {
        "gpt2_124m_bf16": {"median_step_s": 0.0220, "peak_bytes": 5.10e9},
        "gpt2_124m_bf16-leanxent": {"median_step_s": 0.0216,
                                    "peak_bytes": 5.10e9}}
    out = _results_table(tmp_path, results)
    assert out[3].startswith("| ours bf16, lean cross-entropy kernels "
                             "(FSDPRT_XENT_KERNELS=lean) | 0.0216 s | "), out
    assert out[-1] == ("lean cross-entropy kernels: 0.982x the default "
                       "kernels' step time"), out
