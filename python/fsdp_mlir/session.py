"""fsdp_mlir.Session: train a compiled step in your own Python loop.

A session is one rank of the job: it opens a step library (what
fsdp-compile makes; the LLVM-free path) with fsdprt-run's options in this
process, through libfsdp_session.so's C API (ctypes: the package stays pure
Python), and takes one training step per `step(...)` call on the batch you
give it. It runs the same code as fsdprt-run's loop (runner/Trainer.h), so
fed fsdprt-run's batches (`batch(step)`) it trains bit for bit as fsdprt-run.
Under torchrun each process opens its own session (`torchrun
--nproc-per-node 2 train.py`); it reads torchrun's environment as
fsdprt-run does.

    from fsdp_mlir import Session
    with Session("step.so", save="ckpt") as s:
        for step, (ids, targets) in enumerate(my_batches()):
            metrics = s.step(ids, targets)      # numpy arrays or torch tensors
            print(step, metrics["loss"])
        s.save()

Inputs are this rank's rows of every micro-batch, in the model's forward
order, with the dtypes and shapes `inputs` lists; CPU torch tensors are read
through DLPack without a copy.
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from .driver import REPO_ROOT

_NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16,
          "i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8,
          "u8": np.uint8, "i1": np.bool_,
          # numpy has no bfloat16: its bits, as torch's .view(torch.int16)
          "bf16": np.uint16}


class SessionError(RuntimeError):
    """A session call failed; the message is the runtime's."""


@dataclass(frozen=True)
class InputSpec:
    """One model input as the step takes it on this rank."""
    dtype: str
    shape: tuple

    @property
    def numpy_dtype(self):
        return np.dtype(_NUMPY[self.dtype])


def _library_path() -> Path:
    value = os.environ.get("FSDP_SESSION_LIB")
    if value:
        return Path(value)
    return REPO_ROOT / "build" / "lib" / "libfsdp_session.so"


_LIB = None


def _lib():
    global _LIB
    if _LIB is not None:
        return _LIB
    path = _library_path()
    if not path.exists():
        raise SessionError(f"{path} not found: build it (scripts/build.sh) "
                           "or set FSDP_SESSION_LIB to libfsdp_session.so")
    # torch first, where it is installed: both load a libnccl.so.2, and the
    # process keeps the first; torch's CUDA library needs its own (newer)
    # one, which serves our runtime as well, while ours first would leave
    # a later `import torch` with undefined NCCL symbols.
    if "torch" not in sys.modules and importlib.util.find_spec("torch"):
        import torch  # noqa: F401
    # Global: the step libraries it opens call the runtime's fsdprt_*
    # functions, which they find among the process's global symbols.
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    i64, i32, p = ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p
    cstr, pcstr = ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)
    signatures = {
        "fsdp_session_last_error": ([], cstr),
        "fsdp_session_open": ([i32, ctypes.POINTER(cstr),
                               ctypes.POINTER(i64)], i32),
        "fsdp_session_close": ([i64], i32),
        "fsdp_session_report": ([i64, pcstr], i32),
        "fsdp_session_num_inputs": ([i64, i32, ctypes.POINTER(i32)], i32),
        "fsdp_session_input": ([i64, i32, i32, pcstr, ctypes.POINTER(i32),
                                ctypes.POINTER(ctypes.POINTER(i64))], i32),
        "fsdp_session_evaluate": ([i64, ctypes.POINTER(p), ctypes.POINTER(i64),
                                   i32, ctypes.POINTER(ctypes.c_double)], i32),
        "fsdp_session_step": ([i64, ctypes.POINTER(p), ctypes.POINTER(i64),
                               i32, pcstr], i32),
        "fsdp_session_generate": ([i64, ctypes.POINTER(i64), i64, i64, i64,
                                   ctypes.c_double, i64, ctypes.c_uint64,
                                   ctypes.POINTER(ctypes.POINTER(i64))], i32),
        "fsdp_session_batch": ([i64, i64, ctypes.POINTER(p),
                                ctypes.POINTER(i64), i32], i32),
        "fsdp_session_save": ([i64], i32),
        "fsdp_session_step_count": ([i64, ctypes.POINTER(i64)], i32),
        "fsdp_session_set_lr": ([i64, ctypes.c_double], i32),
    }
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    _LIB = lib
    return lib


def _check(status):
    if status != 0:
        raise SessionError(_lib().fsdp_session_last_error().decode())


def _as_array(value):
    """A contiguous numpy view of `value` (numpy array, CPU torch tensor
    through DLPack, or anything np.asarray takes)."""
    if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray):
        try:
            value = np.from_dlpack(value)
        except (TypeError, RuntimeError, BufferError):
            value = np.asarray(value)  # e.g. a tensor that needs a copy
    return np.ascontiguousarray(value)


class Session:
    """One rank's training of the step library `library`; keyword options
    are fsdprt-run's (`save="ckpt"` is `--save ckpt`, `resume="latest"`,
    `cuda_graphs=False`, ...), `args` any further command-line words."""

    def __init__(self, library, *args: str, quiet: bool = True, **options):
        argv = [str(library)]
        for key, value in options.items():
            if value is None or value is False:
                continue
            flag = "--" + key.replace("_", "-")
            argv += [flag] if value is True else [flag, str(value)]
        if quiet:
            argv.append("--quiet")
        argv += [str(a) for a in args]
        words = (ctypes.c_char_p * len(argv))(*[a.encode() for a in argv])
        handle = ctypes.c_int64()
        _check(_lib().fsdp_session_open(len(argv), words,
                                        ctypes.byref(handle)))
        self._handle = handle.value
        self.inputs: List[InputSpec] = self._specs(0)
        self.eval_inputs: List[InputSpec] = \
            self._specs(1) if options.get("eval_program") else []

    # -- training ------------------------------------------------------------
    def step(self, *batch) -> dict:
        """One optimizer step on this rank's `batch` (one array per model
        input); the step's metrics (loss averaged over the ranks, step time,
        peak bytes, ...), the same dict on every rank."""
        arrays = self._checked(batch, self.inputs)
        text = ctypes.c_char_p()
        _check(_lib().fsdp_session_step(self._handle, *_pointers(arrays),
                                        len(arrays), ctypes.byref(text)))
        return json.loads(text.value)

    def evaluate(self, *batch) -> float:
        """The eval program's loss (`eval_program=`, compiled with
        mode=eval) on this rank's `batch` (as `eval_inputs` lists), averaged
        over the ranks, of the weights now; nothing is trained. Every rank
        calls it."""
        if not self.eval_inputs:
            raise SessionError("no eval program: open the session with "
                               "eval_program=EVAL.so (mode=eval)")
        arrays = self._checked(batch, self.eval_inputs)
        loss = ctypes.c_double()
        _check(_lib().fsdp_session_evaluate(self._handle, *_pointers(arrays),
                                            len(arrays), ctypes.byref(loss)))
        return loss.value

    def generate(self, prompt: Sequence[int], new_tokens: int, *,
                 num_samples: int = 1, temperature: float = 1.0,
                 top_k: int = 0, seed: int = 0) -> List[List[int]]:
        """`num_samples` continuations of the token ids `prompt` by
        `new_tokens` tokens, through the eval program (`eval_program=`, which
        returns "logits") with the weights now, drawn as `fsdprt-run
        --generate` draws them (temperature 0: greedy; top_k 0: the whole
        vocabulary). Every rank calls it and gets the same tokens."""
        if not self.eval_inputs:
            raise SessionError("no eval program: open the session with "
                               "eval_program=EVAL.so (mode=eval)")
        ids = (ctypes.c_int64 * len(prompt))(*[int(t) for t in prompt])
        out = ctypes.POINTER(ctypes.c_int64)()
        _check(_lib().fsdp_session_generate(
            self._handle, ids, len(prompt), new_tokens, num_samples,
            float(temperature), top_k, seed, ctypes.byref(out)))
        return [[out[s * new_tokens + t] for t in range(new_tokens)]
                for s in range(num_samples)]

    def batch(self, step: int) -> List[np.ndarray]:
        """fsdprt-run's batch of `step` for this rank (from `data=`,
        synthetic without it): what its loop would feed."""
        arrays = [np.empty(s.shape, s.numpy_dtype) for s in self.inputs]
        _check(_lib().fsdp_session_batch(self._handle, step,
                                         *_pointers(arrays), len(arrays)))
        return arrays

    def save(self) -> None:
        """A checkpoint of the current step in `save=`'s directory (call it
        on every rank)."""
        _check(_lib().fsdp_session_save(self._handle))

    def set_lr(self, lr: Optional[float]) -> None:
        """The learning rate from the next step on (None: the compiled
        schedule's again)."""
        _check(_lib().fsdp_session_set_lr(
            self._handle, math.nan if lr is None else float(lr)))

    @property
    def step_count(self) -> int:
        """Optimizer steps taken, a loaded checkpoint's included."""
        n = ctypes.c_int64()
        _check(_lib().fsdp_session_step_count(self._handle, ctypes.byref(n)))
        return n.value

    @property
    def report(self) -> str:
        """The pre-launch report: collectives in order, memory plan."""
        text = ctypes.c_char_p()
        _check(_lib().fsdp_session_report(self._handle, ctypes.byref(text)))
        return text.value.decode()

    # -- lifetime --------------------------------------------------------------
    def close(self) -> None:
        if getattr(self, "_handle", None):
            handle, self._handle = self._handle, None
            _check(_lib().fsdp_session_close(handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _specs(self, program: int) -> List[InputSpec]:
        count = ctypes.c_int32()
        _check(_lib().fsdp_session_num_inputs(self._handle, program,
                                              ctypes.byref(count)))
        specs = []
        for i in range(count.value):
            dtype, rank = ctypes.c_char_p(), ctypes.c_int32()
            shape = ctypes.POINTER(ctypes.c_int64)()
            _check(_lib().fsdp_session_input(self._handle, program, i,
                                             ctypes.byref(dtype),
                                             ctypes.byref(rank),
                                             ctypes.byref(shape)))
            specs.append(InputSpec(dtype.value.decode(),
                                   tuple(shape[d] for d in range(rank.value))))
        return specs

    @staticmethod
    def _checked(batch: Sequence, specs: List[InputSpec]) -> List[np.ndarray]:
        if len(batch) != len(specs):
            described = ", ".join(f"{s.dtype} {list(s.shape)}" for s in specs)
            raise SessionError(f"the model takes {len(specs)} inputs "
                               f"({described}), the call was given "
                               f"{len(batch)}")
        arrays = []
        for i, (value, spec) in enumerate(zip(batch, specs)):
            a = _as_array(value)
            if a.shape != spec.shape or a.dtype != spec.numpy_dtype:
                raise SessionError(
                    f"input {i} is {a.dtype} {list(a.shape)}, the program "
                    f"takes {spec.dtype} {list(spec.shape)} (this rank's "
                    f"rows of every micro-batch)")
            arrays.append(a)
        return arrays


def _pointers(arrays):
    """The C arrays of data pointers and byte sizes of `arrays`."""
    pointers = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    sizes = (ctypes.c_int64 * len(arrays))(*[a.nbytes for a in arrays])
    return pointers, sizes
