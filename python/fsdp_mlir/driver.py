"""Drive the fsdp-mlir tools from Python: compile with fsdp-opt, train with
fsdp-run (and make step libraries for LLVM-free training hosts with
fsdp-compile).

    from fsdp_mlir import driver
    prog = driver.compile("examples/mlp.mlir", "step.mlir", world_size=2)
    result = driver.run(prog, nproc=2, steps=5)
    print([row["loss"] for row in result.metrics])
    lib = driver.compile_library(prog, "step.so")  # fsdprt-run lib ... there

`compile` builds the same `--fsdp-pipeline="..."` string the lit tests write
by hand (option names as in include/fsdp/Pipelines/Pipelines.h)
and `run` the same fsdp-run command line as README.md documents. Every
failure raises an exception whose message holds the tool's diagnostics and a
one-line shell command that reproduces it.

The tools are found through FSDP_OPT / FSDP_RUN, else in build/bin/ of the
repository this package lives in (python/ of the repository), else on PATH.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

__all__ = [
    "CompileError",
    "RunError",
    "RunResult",
    "ToolNotFoundError",
    "compile",
    "compile_command",
    "compile_library",
    "find_tool",
    "pipeline_options",
    "program_info",
    "read_metrics",
    "report",
    "run",
    "run_command",
]

REPO_ROOT = Path(__file__).resolve().parents[2]

# Environment variable naming each tool.
_TOOL_ENV = {"fsdp-opt": "FSDP_OPT", "fsdp-run": "FSDP_RUN",
             "fsdp-compile": "FSDP_COMPILE", "fsdprt-run": "FSDPRT_RUN"}

# Variables of a multi-node launch (torchrun, mpirun, srun) that would make a
# local `--nproc N` run believe it is one rank of a bigger job.
_LAUNCH_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                "MASTER_ADDR", "MASTER_PORT", "FSDP_RUN_LOCAL_RANKS",
                "FSDPRT_STORE_FD", "FSDP_RUN_LAUNCHER_PID",
                "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT",
                "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE",
                "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                "SLURM_PROCID", "SLURM_NTASKS")


# -- errors -----------------------------------------------------------------
class ToolNotFoundError(FileNotFoundError):
    """fsdp-opt or fsdp-run could not be found."""


class _ToolError(RuntimeError):
    def __init__(self, what: str, returncode: int, stdout: str, stderr: str,
                 command: str):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.command = command
        status = (f"killed by signal {-returncode}" if returncode < 0
                  else f"exit status {returncode}")
        diagnostics = stderr.strip() or stdout.strip() or "(no output)"
        super().__init__(f"{what} failed ({status}):\n{diagnostics}\n"
                         f"reproduce with:\n  {command}")


class CompileError(_ToolError):
    """fsdp-opt (or fsdp-compile) rejected the model or the options.

    Attributes: returncode, stdout, stderr, command (one shell line),
    input_path (the file holding the IR that failed)."""

    def __init__(self, returncode, stdout, stderr, command, input_path,
                 tool="fsdp-opt"):
        self.input_path = Path(input_path)
        super().__init__(tool, returncode, stdout, stderr, command)


class RunError(_ToolError):
    """fsdp-run exited with a non-zero status (or timed out).

    Attributes: returncode, stdout, stderr, command (one shell line)."""

    def __init__(self, returncode, stdout, stderr, command):
        super().__init__("fsdp-run", returncode, stdout, stderr, command)


# -- tools --------------------------------------------------------------------
def find_tool(name: str) -> Path:
    """The path of `name` ("fsdp-opt" or "fsdp-run"): $FSDP_OPT / $FSDP_RUN,
    else <repo>/build/bin/<name>, else PATH."""
    var = _TOOL_ENV.get(name)
    if var and os.environ.get(var):
        value = os.environ[var]
        path = Path(value)
        if path.is_file() and os.access(path, os.X_OK):
            return path.resolve()
        found = shutil.which(value)
        if found:
            return Path(found)
        raise ToolNotFoundError(
            f"{var}={value} is not an executable file (unset it to search "
            f"{REPO_ROOT / 'build' / 'bin'} and PATH)")
    candidate = REPO_ROOT / "build" / "bin" / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    hint = f"set {var} to its path, " if var else ""
    raise ToolNotFoundError(
        f"{name} not found: {hint}build it into {candidate.parent} "
        f"(scripts/build.sh) or put it on PATH")


# -- compile ------------------------------------------------------------------
def _format_value(name: str, value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, (list, tuple)):
        text = ",".join(_format_value(name, v) for v in value)
    else:
        text = str(value)
    if not text or any(c.isspace() for c in text) or '"' in text:
        raise ValueError(f"fsdp-pipeline option {name}: bad value {value!r}")
    return text


def pipeline_options(*, world_size=1, sharding_strategy="full-shard",
                     auto_wrap_policy=None, wrap_kinds=None,
                     optimizer="adamw", lr=None, momentum=None,
                     clip_grad_norm=None, grad_accum_steps=None,
                     backward_prefetch=None, forward_prefetch=None,
                     param_dtype=None, shard_group_size=None, lower=True,
                     **extra) -> str:
    """The value of `--fsdp-pipeline=` for these options.

    world-size, sharding-strategy and optimizer are always written; the other
    options only when not None; `lower=true` last when `lower`. `wrap_kinds`
    (a string or a list) without `auto_wrap_policy` selects the module-kind
    policy. Any other pipeline option (min_params, limit_all_gathers, no_sync,
    report, reduce_dtype, weight_decay, ...) goes through **extra, its
    underscores turned into dashes. Booleans are true/false, lists are
    comma-separated."""
    if isinstance(wrap_kinds, str):
        wrap_kinds = [wrap_kinds]
    if wrap_kinds is not None and auto_wrap_policy is None:
        auto_wrap_policy = "module-kind"
    pairs = [("world-size", world_size),
             ("sharding-strategy", sharding_strategy),
             ("shard-group-size", shard_group_size),
             ("auto-wrap-policy", auto_wrap_policy),
             ("wrap-kinds", wrap_kinds),
             ("forward-prefetch", forward_prefetch),
             ("backward-prefetch", backward_prefetch),
             ("optimizer", optimizer),
             ("lr", lr),
             ("momentum", momentum),
             ("clip-grad-norm", clip_grad_norm),
             ("grad-accum-steps", grad_accum_steps),
             ("param-dtype", param_dtype)]
    pairs += [(key.replace("_", "-"), value) for key, value in extra.items()]
    if lower:
        pairs.append(("lower", True))
    seen = set()
    words = []
    for name, value in pairs:
        if value is None:
            continue
        if name in seen:
            raise ValueError(f"fsdp-pipeline option {name} given twice")
        seen.add(name)
        words.append(f"{name}={_format_value(name, value)}")
    return " ".join(words)


def compile_command(input_path, output, options: str,
                    fsdp_opt=None) -> list[str]:
    """The fsdp-opt argv compiling `input_path` to `output`."""
    tool = fsdp_opt or find_tool("fsdp-opt")
    return [str(tool), str(input_path), f"--fsdp-pipeline={options}",
            "-o", str(output)]


def _model_source(model) -> tuple[Path | None, str | None]:
    """(path, None) for a file, (None, text) for IR text."""
    if isinstance(model, os.PathLike):
        return Path(model), None
    if isinstance(model, bytes):
        model = model.decode()
    if isinstance(model, str):
        if "\n" not in model and (model.endswith(".mlir")
                                  or Path(model).is_file()):
            return Path(model), None
        return None, model
    for method in ("text", "to_mlir", "to_ir"):  # fsdp_mlir.ir.Model.text()
        if callable(getattr(model, method, None)):
            return None, getattr(model, method)()
    return None, str(model)


def _unique(path: Path) -> Path:
    if not path.exists():
        return path
    n = 1
    while path.with_name(f"{path.stem}.{n}{path.suffix}").exists():
        n += 1
    return path.with_name(f"{path.stem}.{n}{path.suffix}")


def compile(model, output=None, *, world_size=1,
            sharding_strategy="full-shard", auto_wrap_policy=None,
            wrap_kinds=None, optimizer="adamw", lr=None, momentum=None,
            clip_grad_norm=None, grad_accum_steps=None,
            backward_prefetch=None, forward_prefetch=None, param_dtype=None,
            shard_group_size=None, lower=True, **extra) -> Path:
    """Compile `model` (IR text, the path of a .mlir file, or an object with a
    `text()` method such as fsdp_mlir.ir.Model) with
    `fsdp-opt --fsdp-pipeline=...` into `output` (default: a file in a new
    temporary directory) and return the output path.

    fsdp-opt's stdout (the pre-launch report with report=True) and warnings
    are forwarded to sys.stdout / sys.stderr. On failure the input IR is
    written next to the output (`<output stem>.input.mlir`) and CompileError
    is raised with the diagnostics and a one-line command reproducing them."""
    options = pipeline_options(
        world_size=world_size, sharding_strategy=sharding_strategy,
        auto_wrap_policy=auto_wrap_policy, wrap_kinds=wrap_kinds,
        optimizer=optimizer, lr=lr, momentum=momentum,
        clip_grad_norm=clip_grad_norm, grad_accum_steps=grad_accum_steps,
        backward_prefetch=backward_prefetch,
        forward_prefetch=forward_prefetch, param_dtype=param_dtype,
        shard_group_size=shard_group_size, lower=lower, **extra)
    tool = find_tool("fsdp-opt")
    path, text = _model_source(model)
    if path is not None:
        if not path.is_file():
            raise FileNotFoundError(f"model file not found: {path}")
        text = path.read_text()
    if output is None:
        stem = path.stem if path is not None else "model"
        output = Path(tempfile.mkdtemp(prefix="fsdp-mlir-")) / \
            f"{stem}.{'lowered' if lower else 'step'}.mlir"
    output = Path(output).absolute()
    output.parent.mkdir(parents=True, exist_ok=True)

    # The input goes through stdin; only a failure writes it to a file.
    argv = compile_command("-", output, options, tool)
    proc = subprocess.run(argv, input=text, capture_output=True, text=True)
    if proc.returncode == 0:
        if proc.stdout:
            sys.stdout.write(proc.stdout)
        if proc.stderr:
            sys.stderr.write(proc.stderr)
        return output

    input_path = _unique(output.with_name(f"{output.stem}.input.mlir"))
    try:
        input_path.write_text(text)
    except OSError:
        input_path = Path(tempfile.mkdtemp(prefix="fsdp-mlir-")) / \
            "input.mlir"
        input_path.write_text(text)
    argv = compile_command(input_path, output, options, tool)
    # Diagnostics name the file the repro command reads, not "<stdin>".
    again = subprocess.run(argv, capture_output=True, text=True)
    if again.returncode != 0:
        proc = again
    raise CompileError(proc.returncode, proc.stdout, proc.stderr,
                       shlex.join(argv), input_path)


def compile_library(program, output=None, *, opt_level=None) -> Path:
    """Make the step library (.so) of a lowered `program` (what `compile`
    returns) with fsdp-compile, for fsdprt-run on hosts without LLVM (fsdp-run
    and `run` take it too); `output` defaults to `program` with suffix .so.
    Raises CompileError (tool "fsdp-compile") with its diagnostics and a
    command reproducing them."""
    program = Path(program).absolute()
    output = Path(output).absolute() if output else program.with_suffix(".so")
    argv = [str(find_tool("fsdp-compile")), str(program), "-o", str(output)]
    if opt_level is not None:
        argv.append(f"-O{int(opt_level)}")
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(proc.returncode, proc.stdout, proc.stderr,
                           shlex.join(argv), program, tool="fsdp-compile")
    return output


# -- report -------------------------------------------------------------------
_PROFILE_OPTIONS = ("gemm_gflops", "gemm_gflops_16bit", "memory_gbps",
                    "link_gbps", "link_latency_us", "op_overhead_us",
                    "host_link_gbps")


def report(model, *, profile: Mapping[str, float] | None = None,
           **options) -> dict:
    """What a run will cost, before it runs: fsdp-report's JSON for `model`
    compiled with `options` (those of `compile`, except `lower`) — the peak
    bytes per rank and their breakdown, every collective of a step, the
    rank-local units and the predicted step time. `machine` names the cost
    model's machine ("ci-cpu", the default, or "h100"; it is also compiled
    in when given to `compile`, for the runner's prediction), `profile`
    overrides its rates (keys: gemm_gflops, gemm_gflops_16bit: bf16 / f16
    GEMMs, memory_gbps, link_gbps, link_latency_us, op_overhead_us,
    host_link_gbps: CPU offload's copies). Compile errors raise
    CompileError."""
    options.pop("lower", None)
    machine = options.pop("machine", "ci-cpu")
    unknown = set(profile or {}) - set(_PROFILE_OPTIONS)
    if unknown:
        raise ValueError(f"unknown profile keys {sorted(unknown)}; known: "
                         + ", ".join(_PROFILE_OPTIONS))
    workdir = Path(tempfile.mkdtemp(prefix="fsdp-report-"))
    try:
        step = compile(model, workdir / "step.mlir", lower=False, **options)
        flags = ["json=true", f"machine={machine}"] + [
            f"{k.replace('_', '-')}={float(v)!r}"
            for k, v in (profile or {}).items()]
        argv = [str(find_tool("fsdp-opt")), str(step),
                f"--fsdp-report={' '.join(flags)}", "-o", os.devnull]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(proc.returncode, proc.stdout, proc.stderr,
                               shlex.join(argv), step)
        return json.loads(proc.stdout)["steps"][0]
    finally:
        if sys.exc_info()[0] is None:
            shutil.rmtree(workdir, ignore_errors=True)


# -- run ----------------------------------------------------------------------
@dataclass
class RunResult:
    """A finished fsdp-run: its exit status, output, the metric rows (one
    dict per step: step, loss, step_time_s, tokens_per_s, peak_bytes (the
    arena's), on CUDA [device_peak_bytes] (arena + GEMM workspace +
    per-call scratch reserve), [gemm_workspace_bytes] and
    [scratch_reserve_bytes] (the last two), comm_exposed_s, [grad_norm])
    and the one-line command; `save_dir` is the run's --save directory
    (None when it saved nothing)."""
    returncode: int
    stdout: str
    stderr: str
    metrics: list = field(default_factory=list)
    command: str = ""
    save_dir: Optional[Path] = None

    @property
    def losses(self) -> list:
        """The loss of each step, in order."""
        return [row["loss"] for row in self.metrics]

    def checkpoint(self, step: int) -> Path:
        """The full checkpoint saved after `step` (save_format "full"; a
        sharded one is this path without its suffix, a directory)."""
        if self.save_dir is None:
            raise ValueError("the run saved no checkpoints (run(save=...))")
        return Path(self.save_dir) / f"step-{step}.safetensors"

    def params(self, step: int) -> dict:
        """The parameters and buffers (not the optimizer state) of the full
        checkpoint saved after `step`, as numpy arrays (needs safetensors)."""
        from safetensors.numpy import load_file
        return {k: v for k, v in load_file(str(self.checkpoint(step))).items()
                if not k.startswith("optim.")}


_EVAL_AND_GENERATION_OPTIONS = ("eval_program", "eval_every", "eval_data",
                       "eval_batches", "generate", "prompt", "prompt_ids",
                       "temperature", "top_k", "num_samples")


def run_command(program, *, nproc=None, steps=10, data="synthetic",
                seed=None, batch_size=None, micro_batches=None, load=None,
                save=None, save_every=None, save_format=None, metrics=None,
                trace=None, backend="cpu", quiet=True, lr_schedule=None,
                warmup_steps=None, decay_steps=None, min_lr_ratio=None,
                fsdp_run=None, **eval_and_generation) -> list[str]:
    """The fsdp-run argv for these options (README.md lists them).
    `eval_and_generation` takes the evaluation's options (eval_program, eval_every,
    eval_data, eval_batches) and the sampler's (generate, prompt,
    prompt_ids, temperature, top_k, num_samples)."""
    unknown = set(eval_and_generation) - set(_EVAL_AND_GENERATION_OPTIONS)
    if unknown:
        raise TypeError(f"unknown fsdp-run options {sorted(unknown)}")
    argv = [str(fsdp_run or find_tool("fsdp-run")), str(program)]
    for flag, value in (("--nproc", nproc), ("--steps", steps),
                        ("--data", data), ("--seed", seed),
                        ("--batch-size", batch_size),
                        ("--micro-batches", micro_batches),
                        ("--load", load), ("--save", save),
                        ("--save-every", save_every),
                        ("--save-format", save_format),
                        ("--metrics", metrics), ("--trace", trace),
                        ("--backend", backend),
                        ("--lr-schedule", lr_schedule),
                        ("--warmup-steps", warmup_steps),
                        ("--decay-steps", decay_steps),
                        ("--min-lr-ratio", min_lr_ratio),
                        *((f"--{key.replace('_', '-')}", eval_and_generation[key])
                          for key in _EVAL_AND_GENERATION_OPTIONS
                          if key in eval_and_generation)):
        if value is not None:
            argv += [flag, str(value)]
    if quiet:
        argv.append("--quiet")
    return argv


def _shell_line(argv: Sequence[str], env: Mapping[str, str] | None) -> str:
    prefix = [f"{k}={shlex.quote(str(v))}" for k, v in (env or {}).items()]
    return " ".join(prefix + [shlex.join(argv)])


def read_metrics(path) -> list[dict]:
    """The rows of a metrics JSON-lines file ([] if it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number}: not JSON: {e}") from None
    return rows


def _mlir_unescape(s: str) -> str:
    """An MLIR string attribute's body: `\\\\` is a backslash, `\\XX` hex."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\":
            if s[i + 1] == "\\":
                out.append("\\")
                i += 2
            else:
                out.append(chr(int(s[i + 1:i + 3], 16)))
                i += 3
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def program_info(program) -> dict:
    """The program description of a lowered `program` (its `fsdp.program`
    attribute, the JSON fsdp-run reads): the units, the arena's and each
    buffer's bytes, the compile-time report, ..."""
    path = Path(program)
    m = re.search(r'fsdp\.program = "((?:[^"\\]|\\.)*)"', path.read_text())
    if m is None:
        raise ValueError(f"{path} has no fsdp.program attribute (is it a "
                         "lowered program?)")
    return json.loads(_mlir_unescape(m.group(1)))


def run(program, *, nproc=None, steps=10, data="synthetic", seed=None,
        batch_size=None, micro_batches=None, load=None, save=None,
        save_every=None, save_format=None, metrics=None, trace=None,
        backend="cpu", env=None, quiet=True, timeout=None, lr_schedule=None,
        warmup_steps=None, decay_steps=None,
        min_lr_ratio=None, fsdp_run=None, **eval_and_generation) -> RunResult:
    """Train the lowered `program` (or a step library, with `fsdp_run` a
    runner of them such as fsdprt-run) with fsdp-run and return a
    RunResult.
    With `generate=N` (and the sampler's options, see run_command) an eval
    program (or a decode step with a KV cache, models/kv_cache.py) samples
    N tokens instead; the metrics rows are then the samples: {"sample",
    "prompt", "tokens", "seconds"} (seconds: the generation loop's).

    `metrics=None` writes the metrics to a temporary file (removed after it
    was read; kept when the run fails, for the reproduce command). `env` adds variables to the environment; with `nproc` the
    variables of an outer torchrun / mpirun / srun launch are removed. A
    non-zero exit (or `timeout` seconds elapsing) raises RunError."""
    program = Path(program)
    if not program.is_file():
        raise FileNotFoundError(f"program not found: {program}")
    tmpdir = None
    if metrics is None:
        tmpdir = tempfile.mkdtemp(prefix="fsdp-run-")
        metrics_path = Path(tmpdir) / "metrics.jsonl"
    else:
        metrics_path = Path(metrics)
    argv = run_command(program, nproc=nproc, steps=steps, data=data,
                       seed=seed, batch_size=batch_size,
                       micro_batches=micro_batches, load=load, save=save,
                       save_every=save_every, save_format=save_format,
                       metrics=metrics_path, trace=trace, backend=backend,
                       quiet=quiet, lr_schedule=lr_schedule,
                       warmup_steps=warmup_steps, decay_steps=decay_steps,
                       min_lr_ratio=min_lr_ratio, fsdp_run=fsdp_run,
                       **eval_and_generation)
    env = {str(k): str(v) for k, v in (env or {}).items()}
    full_env = dict(os.environ)
    if nproc is not None:
        for var in _LAUNCH_VARS:
            full_env.pop(var, None)
    full_env.update(env)
    command = _shell_line(argv, env)
    for path in (metrics_path, trace):
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    # On failure the temporary metrics directory stays, so that the
    # reproduce command runs as it is.
    try:
        proc = subprocess.run(argv, capture_output=True, text=True,
                              env=full_env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise RunError(-9, out, err + f"\ntimed out after {timeout} s",
                       command) from None
    if proc.returncode != 0:
        raise RunError(proc.returncode, proc.stdout, proc.stderr, command)
    rows = read_metrics(metrics_path)
    if tmpdir is not None:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return RunResult(proc.returncode, proc.stdout, proc.stderr, rows, command,
                     Path(save) if save is not None else None)
