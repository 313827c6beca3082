"""Shared fixtures of the end-to-end fsdp-run tests (test/Run).

The tools come from FSDP_OPT / FSDP_RUN / FSDP_COMPILE / FSDPRT_RUN (set by
CTest) and default to <repo>/build/bin. Everything here runs the real binaries: `fsdp` compiles an
example with --fsdp-pipeline, runs it with fsdp-run and reads back metrics,
checkpoints and the program description. Compiled programs and finished runs
are cached for the whole session (in tmp_path_factory), so the parity, bf16
and delay tests share their reference runs.
"""
import hashlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "python"))
from fsdp_mlir import driver  # noqa: E402  (the package of this repository)
EXAMPLES = REPO_ROOT / "examples"
MODELS = ("mlp", "nested_wrapped", "gpt2")

# The runtime's test-only delays of each collective, free and optimizer step.
DELAY_ENV = {"FSDPRT_DELAY_ALLGATHER_MS": "2",
             "FSDPRT_DELAY_REDUCE_SCATTER_MS": "2",
             "FSDPRT_DELAY_FREE_MS": "2",
             "FSDPRT_DELAY_OPTIMIZER_MS": "2"}


def _tool(env_var, name):
    path = Path(os.environ.get(env_var) or REPO_ROOT / "build" / "bin" / name)
    # The binaries may briefly disappear while they are being relinked.
    deadline = time.monotonic() + 120
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(2)
    if not path.exists():
        pytest.fail(f"{name} not found at {path} (set {env_var})")
    return path


def free_port():
    """A TCP port free on 127.0.0.1 now (for a rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(extra=None):
    """The caller's environment without the variables of a launch
    (driver._LAUNCH_VARS: a test under torchrun) or the delays (a shell
    with one set), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if k not in driver._LAUNCH_VARS and k not in DELAY_ENV}
    env.setdefault("FSDP_RUN_GRACE_SECONDS", "5")
    env.update(extra or {})
    return env


program_info = driver.program_info


def model_parameters(model):
    """{dotted name: shape} of the fsdp.param ops of examples/<model>.mlir,
    read from the source: a module's name is pushed on its `{`; the root
    module's name is not part of a parameter's name."""
    stack, params = [], {}
    for line in (EXAMPLES / f"{model}.mlir").read_text().splitlines():
        code = line.split("//", 1)[0]
        p = re.search(r'fsdp\.param @"?([^"\s:]+)"?\s*:\s*tensor<([^>]*)>', code)
        if p:
            modules = [n for n in stack if n is not None][1:]
            dims = p.group(2).split("x")[:-1]
            params[".".join(modules + [p.group(1)])] = tuple(int(d) for d in dims)
        m = re.search(r'fsdp\.module @"?([^"\s]+?)"?\s', code)
        first = True
        for ch in code:
            if ch == "{":
                stack.append(m.group(1) if m and first else None)
                first = False
            elif ch == "}":
                stack.pop()
    return params


read_metrics = driver.read_metrics


def load_full(path):
    from safetensors.numpy import load_file
    return load_file(str(path))


class Fsdp:
    """Compiles and runs programs, caching both for the session."""

    def __init__(self, opt, run, workdir, compiler=None, aot_run=None):
        self.opt, self.run_tool, self.workdir = opt, run, Path(workdir)
        self.compiler, self.aot_run_tool = compiler, aot_run
        self._compiled = {}
        self._libraries = {}
        self._runs = {}

    # -- compiling ---------------------------------------------------------
    def options(self, model, world_size, strategy="full-shard",
                backward_prefetch="pre", forward_prefetch=False,
                optimizer="adamw", grad_accum=1, param_dtype=None,
                shard_group_size=None, lr=None, **extra):
        """The --fsdp-pipeline value (fsdp_mlir.driver's spelling); `extra`
        options (no_sync, loss_scale, ...) pass through to it."""
        hybrid = strategy.startswith("hybrid")
        return driver.pipeline_options(
            world_size=world_size, sharding_strategy=strategy,
            backward_prefetch=backward_prefetch,
            forward_prefetch=forward_prefetch, optimizer=optimizer,
            momentum=0.9 if optimizer == "sgd" else None,
            shard_group_size=(shard_group_size or 2) if hybrid else None,
            grad_accum_steps=grad_accum if grad_accum != 1 else None,
            param_dtype=param_dtype, lr=lr,
            wrap_kinds=["Block"] if model == "gpt2" else None, **extra)

    def compile(self, model, **kw):
        opts = self.options(model, **kw)
        if opts in self._compiled.get(model, {}):
            return self._compiled[model][opts]
        digest = hashlib.sha1(f"{model} {opts}".encode()).hexdigest()[:12]
        out = self.workdir / "programs" / f"{model}-{digest}.mlir"
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = driver.compile_command(EXAMPLES / f"{model}.mlir", out, opts,
                                     self.opt)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
        self._compiled.setdefault(model, {})[opts] = out
        return out

    def library(self, program):
        """The step library fsdp-compile makes of a lowered `program`."""
        if program not in self._libraries:
            out = Path(program).with_suffix(".so")
            cmd = [str(self.compiler), str(program), "-o", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=300)
            assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
            self._libraries[program] = out
        return self._libraries[program]

    def reference(self, model, ranks, optimizer, **kw):
        """The 1-rank no-shard program seeing the same global batch as
        `ranks` ranks: one micro-batch per rank."""
        return self.compile(model, world_size=1, strategy="no-shard",
                            optimizer=optimizer, grad_accum=ranks, **kw)

    # -- running -----------------------------------------------------------
    def run(self, program, nproc=None, steps=5, save_format="full",
            save=True, save_every=None, load=None, seed=None, env=None,
            extra_args=(), check=True, timeout=600, cache=False, tool=None,
            backend=None, quiet=True):
        """Runs `program` with fsdp-run, or with `tool` (e.g. fsdprt-run),
        on `backend` (default: $FSDP_RUN_BACKEND or cpu)."""
        tool = tool or self.run_tool
        backend = backend or os.environ.get("FSDP_RUN_BACKEND", "cpu")
        key = (str(tool), str(program), nproc, steps, save_format, save, save_every,
               str(load), seed, tuple(sorted((env or {}).items())),
               tuple(extra_args), backend, quiet)
        if cache and key in self._runs:
            return self._runs[key]
        digest = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
        rundir = self.workdir / "runs" / digest
        n = 0
        while rundir.exists():  # uncached repeats get their own directory
            n += 1
            rundir = self.workdir / "runs" / f"{digest}-{n}"
        rundir.mkdir(parents=True)
        metrics = rundir / "metrics.jsonl"
        save_dir = rundir / "ckpt" if save else None
        cmd = driver.run_command(
            program, nproc=nproc, steps=steps, metrics=metrics,
            backend=backend, save=save_dir,
            save_format=save_format if save else None, save_every=save_every,
            load=load, seed=seed, fsdp_run=tool, quiet=quiet)
        cmd += list(extra_args)
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=timeout, env=clean_env(env))
        result = driver.RunResult(
            proc.returncode, proc.stdout, proc.stderr,
            read_metrics(metrics) if metrics.exists() else [],
            driver._shell_line(cmd, env), save_dir)
        if check:
            assert proc.returncode == 0, (
                f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stderr}")
        if cache:
            self._runs[key] = result
        return result


# Lines that tests want in the report (the memory table): printed in the
# terminal summary, so they show without -s too.
_REPORT_LINES = []


@pytest.fixture(scope="session")
def report_lines():
    return _REPORT_LINES


def pytest_terminal_summary(terminalreporter):
    if _REPORT_LINES:
        terminalreporter.section("fsdp-run report")
        for line in _REPORT_LINES:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def fsdp_opt():
    return _tool("FSDP_OPT", "fsdp-opt")


@pytest.fixture(scope="session")
def fsdp_run():
    return _tool("FSDP_RUN", "fsdp-run")


@pytest.fixture(scope="session")
def fsdp_compile():
    return _tool("FSDP_COMPILE", "fsdp-compile")


@pytest.fixture(scope="session")
def fsdprt_run():
    return _tool("FSDPRT_RUN", "fsdprt-run")


@pytest.fixture(scope="session")
def fsdp(fsdp_opt, fsdp_run, fsdp_compile, fsdprt_run, tmp_path_factory):
    return Fsdp(fsdp_opt, fsdp_run, tmp_path_factory.mktemp("fsdp"),
                compiler=fsdp_compile, aot_run=fsdprt_run)
