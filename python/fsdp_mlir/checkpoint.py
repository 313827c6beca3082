"""Move training state between fsdp-mlir checkpoints and PyTorch Distributed
Checkpoint (DCP, `torch.distributed.checkpoint`), so that a run can go on
under FSDP2 (`fully_shard`) or torchtitan, and back.

    python -m fsdp_mlir.checkpoint to-dcp CKPT DCP_DIR --lr LR [--beta1 B1]
        [--beta2 B2] [--eps E] [--weight-decay WD] [--momentum M]
        [--dampening D] [--nesterov] [--beta2-decay B] [--eps1 E1]
        [--eps2 E2] [--clip-threshold D] [--layout torch|torchtitan]
    python -m fsdp_mlir.checkpoint from-dcp DCP_DIR OUT.safetensors
        --like CKPT_OR_PROGRAM [--step N] [--model-only]

**Ours.** `fsdp-run --save DIR` writes a full checkpoint
(`DIR/step-N.safetensors`: every parameter and buffer whole under its
PyTorch name, the optimizer state as `optim.<state>.<param>`, metadata
`format`, `model`, `step_count`, `optimizer`) or a sharded one
(`DIR/step-N/rank-<r>-of-<W>.safetensors`: each rank's flat shards
`<unit>/flat_param` and `<unit>/<state>`, whose metadata `units` records
every unit's flat layout: parameter names, shapes and offsets, padded and
shard sizes). `to-dcp` reads both (a sharded one is reassembled from shard
group 0's files); `from-dcp` writes the full format, which fsdp-run /
fsdprt-run `--load` at any world size.

**DCP, layout `torch`** (the default): `{"model": get_model_state_dict(m),
"optim": get_optimizer_state_dict(m, opt), "train_state": {"step": N}}`,
i.e. the keys `model.<fqn>`, `optim.state.<fqn>.<exp_avg|exp_avg_sq|step>`
(or `momentum_buffer` for SGD), `optim.param_groups.0.<lr|betas|...>` and
`train_state.step`, the optimizer state in torch.optim's own state-dict
layout (state names are the same on both sides; Adam's / AdamW's `step` is a
float32 scalar per parameter, the number of optimizer steps taken). An
FSDP2 job loads it as torch documents:

    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd, "train_state": {"step": 0}}
    dcp.load(state, checkpoint_id=DCP_DIR)
    set_state_dict(model, opt, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])

and DCP reshards the whole tensors onto its DTensor shards.

**Layout `torchtitan`**: torchtitan's CheckpointManager (2025-26) keeps
the model's entries at the top level (`<fqn>`), the optimizer as
`optimizer.state.<fqn>.<name>` / `optimizer.param_groups.<fqn>.<key>`
(torch's `StateDictOptions(flatten_optimizer_state_dict=True)`, which is
torchtitan's `get_flat_optim_state_dict`) and the step in
`train_state.step`. We write no `lr_scheduler` or `dataloader` entry
(there is none to convert): give torchtitan
`exclude_from_loading=["lr_scheduler", "dataloader"]` (and `train_state`
where its version saves more than the step).

`from-dcp` reads either layout, and any other DCP checkpoint whose model
entries are `model.<fqn>` or top-level tensors, with an optimizer under
`optim` or `optimizer` (nested or flattened) or none (model only: the
runner then starts the optimizer state at zero); other entries
(`lr_scheduler`, `dataloader`, ...) are ignored. The step count is
`train_state.step`, else the optimizer's `step` (every parameter's must
agree); an AdamW checkpoint whose two differ (GradScaler's skipped steps)
is refused, since our runner counts both alike.

**Why these arguments.** A DCP directory says neither which model it is
(our loader checks the checkpoint's `model` name) nor which of its
entries our model expects, so `from-dcp` takes a template with `--like`:
one of our checkpoints of the model (full file or sharded directory; a
seeded one is `fsdp-run step.mlir --steps 0 --save DIR`) or the lowered
program itself (`step.mlir`, its `fsdp.program` description). Names,
shapes and dtypes are compared against the DCP metadata before anything is
read, and every difference (missing, extra, other shape or dtype) is
reported in one error. `to-dcp` needs the optimizer's hyper-parameters,
which our checkpoints do not hold and which torch restores from the
checkpoint's `param_groups` (they override the ones the torch optimizer
was built with): the options are fsdp-pipeline's, with its defaults
(Adam / AdamW betas 0.9 / 0.999, eps 1e-8, weight decay 0.01 for AdamW and
0 for Adam; SGD weight decay 0, momentum 0), and `--lr` is required when there is optimizer state.

Not carried: learning-rate schedules (the base `lr` is written; torch's
LRScheduler keeps its own state), per-parameter groups (`param-groups`,
`no-decay-1d`: one group with `--weight-decay` is written; from-dcp
ignores param_groups), GradScaler state, rank-local units (an FSDP2 model
has no counterpart; FSDP's ignored modules, laid out as rank-local units,
are read as rank 0's copy, as torch's state dict holds them), the data
position beyond the step count. Both
directions run in one process, without a process group (DCP's
`no_dist=True`); they need torch and safetensors.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Checkpoint", "CheckpointMismatchError", "Template", "from_dcp",
           "main", "read_checkpoint", "read_template", "to_dcp"]

FULL_FORMAT = "fsdp-mlir-full"
SHARDED_FORMAT = "fsdp-mlir-sharded"
LAYOUTS = ("torch", "torchtitan")

# safetensors / program-description dtype names -> torch dtype attribute.
_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16",
           "F64": "float64", "I64": "int64", "I32": "int32", "I16": "int16",
           "I8": "int8", "U8": "uint8", "BOOL": "bool",
           "f32": "float32", "f16": "float16", "bf16": "bfloat16",
           "i64": "int64", "i32": "int32"}


class CheckpointMismatchError(ValueError):
    """A DCP checkpoint's entries differ from the model's: `differences`
    lists them, one line each (also in the message)."""

    def __init__(self, message, differences):
        super().__init__(message)
        self.differences = list(differences)


def _torch_dtype(name):
    import torch
    return getattr(torch, _DTYPES[name])


def _quiet_dcp():
    """DCP warns that a process-group-less call is taken to be one
    process: that is the intent here."""
    warnings.filterwarnings("ignore", message=".*torch.distributed is disabled")
    warnings.filterwarnings("ignore", message=".*assuming the intent is")


# -- our checkpoints -------------------------------------------------------------
@dataclass
class Checkpoint:
    """One of our checkpoints, whole: `tensors` holds parameters and buffers
    by name (torch tensors), `state[name][param]` the optimizer state."""
    model: str
    optimizer: str
    step_count: int
    tensors: dict
    state: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)


def _whole_state_kinds(shape):
    """torch.optim.Adafactor's state of a parameter (our whole state):
    row_var and col_var when it has two dimensions or more, else
    variance."""
    return ["row_var", "col_var"] if len(shape) >= 2 else ["variance"]


def _split_state(flat):
    """{name: tensor} of a full checkpoint -> (model tensors, state)."""
    tensors, state = {}, {}
    for key, value in flat.items():
        if key.startswith("optim."):
            kind, _, param = key[len("optim."):].partition(".")
            state.setdefault(kind, {})[param] = value
        else:
            tensors[key] = value
    return tensors, state


def _read_metadata(path):
    from safetensors import safe_open
    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def _shard_files(directory):
    files, world = {}, set()
    for p in Path(directory).iterdir():
        m = re.fullmatch(r"rank-(\d+)-of-(\d+)\.safetensors", p.name)
        if m:
            files[int(m.group(1))] = p
            world.add(int(m.group(2)))
    if not files:
        raise ValueError(f"{directory}: a directory without "
                         "rank-<r>-of-<W>.safetensors files")
    if len(world) != 1:
        raise ValueError(f"{directory}: holds files of world sizes "
                         f"{sorted(world)}")
    return files, world.pop()


def _check_format(path, meta, fmt):
    if meta.get("format") != fmt:
        raise ValueError(f"{path}: not an {fmt} checkpoint (format "
                         f"{meta.get('format')!r})")
    try:
        return int(meta["step_count"])
    except (KeyError, ValueError):
        raise ValueError(f"{path}: metadata step_count "
                         f"{meta.get('step_count')!r} is not an integer") \
            from None


def _units(meta, path):
    try:
        return json.loads(meta["units"])
    except (KeyError, ValueError) as e:
        raise ValueError(f"{path}: metadata 'units' is missing or not JSON "
                         f"({e})") from None


def read_checkpoint(path) -> Checkpoint:
    """Our full checkpoint file, or a sharded checkpoint directory
    reassembled from the files of shard group 0 (ranks 0 .. shard-1)."""
    from safetensors.torch import load_file
    path = Path(path)
    if not path.is_dir():
        meta = _read_metadata(path)
        step = _check_format(path, meta, FULL_FORMAT)
        tensors, state = _split_state(load_file(str(path)))
        return Checkpoint(meta.get("model", ""), meta.get("optimizer", "none"),
                          step, tensors, state, meta)

    import torch
    files, world = _shard_files(path)
    meta = _read_metadata(files[min(files)])
    step = _check_format(path, meta, SHARDED_FORMAT)
    shard = int(meta.get("shard", world))
    missing = [r for r in range(shard) if r not in files]
    if missing:
        raise ValueError(f"{path}: incomplete: no file of rank(s) {missing} "
                         f"(of {world})")
    parts = [load_file(str(files[r])) for r in range(shard)]
    tensors, state = {}, {}
    for unit in _units(meta, path):
        if unit.get("rank_local") and not unit.get("ignored"):
            raise ValueError(
                f"{path}: unit '{unit['name']}' is rank-local (a different "
                "copy on every rank), which an FSDP2 model has no "
                "counterpart for")
        key = unit["name"] or "_root"
        sharded = unit["shard_numel"] < unit["padded_numel"]

        def flat(suffix):
            name = f"{key}/{suffix}"
            pieces = parts if sharded else parts[:1]
            for s, part in enumerate(pieces):
                if name not in part:
                    raise ValueError(f"{path}: rank {s}'s file has no "
                                     f"tensor '{name}'")
            return torch.cat([part[name] for part in pieces])

        def scatter(values, into, prefix=""):
            for p in unit["params"]:
                n = 1
                for d in p["shape"]:
                    n *= d
                into[prefix + p["name"]] = values[
                    p["flat_offset"]:p["flat_offset"] + n].reshape(
                        p["shape"]).clone()

        scatter(flat("frozen_flat_param" if unit.get("frozen")
                     else "flat_param"), tensors)
        for s in unit["state"]:
            scatter(flat(s), state.setdefault(s, {}))
    # Buffers by their module names, and whole optimizer state (Adafactor's,
    # the same in every file) by torch's names.
    top, whole = _split_state({name: value for name, value in parts[0].items()
                               if "/" not in name})
    tensors.update(top)
    for kind, by_param in whole.items():
        state.setdefault(kind, {}).update(by_param)
    return Checkpoint(meta.get("model", ""), meta.get("optimizer", "none"),
                      step, tensors, state, meta)


# -- the model a DCP checkpoint must match -------------------------------------
@dataclass
class Template:
    """What our model expects: `entries` {name: (shape, dtype name)} of
    parameters and buffers, `state` {param: [state names]} of the
    parameters with optimizer state."""
    model: str
    optimizer: str
    entries: dict
    state: dict
    source: str = ""


def read_template(path) -> Template:
    """The template of one of our checkpoints (full file, sharded
    directory) or of a lowered program (.mlir with an fsdp.program
    description), read without the tensors' data."""
    path = Path(path)
    if path.is_dir():
        files, _ = _shard_files(path)
        meta = _read_metadata(files[min(files)])
        _check_format(path, meta, SHARDED_FORMAT)
        entries, state = {}, {}
        for unit in _units(meta, path):
            for p in unit["params"]:
                entries[p["name"]] = (tuple(p["shape"]), "F32")
                kinds = list(unit["state"])
                if unit.get("whole_state"):
                    kinds += _whole_state_kinds(p["shape"])
                if kinds:
                    state[p["name"]] = kinds
        from safetensors import safe_open
        with safe_open(str(files[min(files)]), framework="pt") as f:
            for name in f.keys():
                if "/" not in name:
                    s = f.get_slice(name)
                    entries[name] = (tuple(s.get_shape()), s.get_dtype())
        return Template(meta.get("model", ""), meta.get("optimizer", "none"),
                        entries, state, str(path))
    if path.suffix == ".mlir":
        from . import driver
        info = driver.program_info(path)
        entries, state = {}, {}
        for unit in info["units"]:
            for p in unit["params"]:
                # Checkpoints hold parameters in f32 whatever they compute in.
                entries[p["name"]] = (tuple(p["shape"]), "F32")
                kinds = [s["name"] for s in unit["state"]
                         if not s.get("whole")]
                if any(s.get("whole") for s in unit["state"]):
                    kinds += _whole_state_kinds(p["shape"])
                if kinds:
                    state[p["name"]] = kinds
        for b in info.get("buffers", []):
            entries[b["name"]] = (tuple(b["shape"]), b["dtype"].upper())
        return Template(info["model"], info.get("optimizer", "none"),
                        entries, state, str(path))
    meta = _read_metadata(path)
    _check_format(path, meta, FULL_FORMAT)
    from safetensors import safe_open
    entries, state = {}, {}
    with safe_open(str(path), framework="pt") as f:
        for name in f.keys():
            s = f.get_slice(name)
            if name.startswith("optim."):
                kind, _, param = name[len("optim."):].partition(".")
                state.setdefault(param, []).append(kind)
            else:
                entries[name] = (tuple(s.get_shape()), s.get_dtype())
    return Template(meta.get("model", ""), meta.get("optimizer", "none"),
                    entries, state, str(path))


# -- ours -> DCP -----------------------------------------------------------------
def _param_group(optimizer, hyper):
    """torch.optim's own param-group entries (every key this torch version
    writes) for our hyper-parameters, without "params"."""
    import torch
    dummy = [torch.nn.Parameter(torch.zeros(1))]
    if optimizer in ("adam", "adamw"):
        cls = torch.optim.AdamW if optimizer == "adamw" else torch.optim.Adam
        opt = cls(dummy, lr=hyper["lr"], betas=(hyper["beta1"], hyper["beta2"]),
                  eps=hyper["eps"], weight_decay=hyper["weight_decay"])
    elif optimizer == "sgd":
        opt = torch.optim.SGD(
            dummy, lr=hyper["lr"], momentum=hyper["momentum"],
            dampening=hyper["dampening"], nesterov=hyper["nesterov"],
            weight_decay=hyper["weight_decay"])
    elif optimizer == "adafactor":
        opt = torch.optim.Adafactor(
            dummy, lr=hyper["lr"], beta2_decay=hyper["beta2_decay"],
            eps=(hyper["eps1"], hyper["eps2"]), d=hyper["d"],
            weight_decay=hyper["weight_decay"])
    else:
        # Lion: torch.optim has none, so there is no torch param group to
        # write beside its state.
        raise ValueError(f"no torch optimizer for {optimizer!r}: convert a "
                         "checkpoint of sgd, adam, adamw or adafactor")
    group = dict(opt.state_dict()["param_groups"][0])
    group.pop("params")
    group.pop("param_names", None)
    return group


_DEFAULT_HYPER = dict(beta1=0.9, beta2=0.999, eps=1e-8, momentum=0.0,
                      dampening=0.0, nesterov=False, beta2_decay=-0.8,
                      eps1=None, eps2=1e-3, d=1.0)


def to_dcp(checkpoint, dcp_dir, *, lr=None, beta1=None, beta2=None, eps=None,
           weight_decay=None, momentum=None, dampening=None, nesterov=None,
           beta2_decay=None, eps1=None, eps2=None, clip_threshold=None,
           layout="torch"):
    """Writes our checkpoint (full file or sharded directory) as a DCP
    checkpoint in `dcp_dir` (which must not hold one), single-process.
    The hyper-parameters are fsdp-pipeline's (None: its default; `lr` has
    none and is required when the checkpoint holds optimizer state).
    Returns a summary dict: model, step, entries, optimizer, layout."""
    import torch
    import torch.distributed.checkpoint as dcp
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
    dcp_dir = Path(dcp_dir)
    if dcp_dir.exists() and any(dcp_dir.iterdir()):
        raise FileExistsError(f"{dcp_dir} exists and is not empty")
    ckpt = read_checkpoint(checkpoint)
    model = {name: t.contiguous() for name, t in sorted(ckpt.tensors.items())}
    if layout == "torch":
        sd = {"model": model}
    else:
        sd = dict(model)
    optimizer = ckpt.optimizer if ckpt.state else "none"
    if ckpt.state:
        if lr is None:
            raise ValueError(
                f"{checkpoint} holds {ckpt.optimizer} state: pass the "
                "learning rate (--lr; a checkpoint does not record it), and "
                "any other hyper-parameter that is not fsdp-pipeline's "
                "default, since torch restores them from param_groups")
        hyper = dict(_DEFAULT_HYPER, lr=lr,
                     weight_decay=0.01 if optimizer == "adamw" else 0.0)
        for key, value in (("beta1", beta1), ("beta2", beta2), ("eps", eps),
                           ("weight_decay", weight_decay),
                           ("momentum", momentum), ("dampening", dampening),
                           ("nesterov", nesterov),
                           ("beta2_decay", beta2_decay), ("eps1", eps1),
                           ("eps2", eps2), ("d", clip_threshold)):
            if value is not None:
                hyper[key] = value
        group = _param_group(optimizer, hyper)
        params = sorted({p for by_param in ckpt.state.values()
                         for p in by_param})
        steps = ckpt.step_count
        if "optimizer_steps" in ckpt.metadata:  # GradScaler skipped some
            steps = int(ckpt.metadata["optimizer_steps"])
        state = {}
        for p in params:
            entry = {}
            if optimizer in ("adam", "adamw", "adafactor"):
                entry["step"] = torch.tensor(float(steps), dtype=torch.float32)
            for kind in sorted(ckpt.state):
                if p in ckpt.state[kind]:
                    entry[kind] = ckpt.state[kind][p].contiguous()
            state[p] = entry
        if layout == "torch":
            sd["optim"] = {"state": state,
                           "param_groups": [dict(group, params=params)]}
        else:
            flat = {}
            for p, entry in state.items():
                for kind, value in entry.items():
                    flat[f"state.{p}.{kind}"] = value
            for p in params:
                for key, value in group.items():
                    flat[f"param_groups.{p}.{key}"] = value
            sd["optimizer"] = flat
    sd["train_state"] = {"step": ckpt.step_count}
    _quiet_dcp()
    dcp_dir.mkdir(parents=True, exist_ok=True)
    dcp.save(sd, checkpoint_id=str(dcp_dir), no_dist=True)
    return dict(model=ckpt.model, step=ckpt.step_count, entries=len(model),
                optimizer=optimizer, layout=layout)


# -- DCP -> ours -----------------------------------------------------------------
@dataclass
class _DcpEntries:
    """A DCP checkpoint's entries sorted by what they are to us: each value
    the DCP key (a flattened state-dict path) and its storage metadata."""
    model: dict = field(default_factory=dict)     # fqn -> (key, md)
    state: dict = field(default_factory=dict)     # (fqn, name) -> (key, md)
    train_step: tuple = None                      # (key, md)
    optimizer: bool = False


def _classify(metadata):
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    mapping = metadata.planner_data or {}
    out = _DcpEntries()
    for key, md in metadata.state_dict_metadata.items():
        path = tuple(mapping.get(key, (key,)))
        is_tensor = isinstance(md, TensorStorageMetadata)
        head = path[0]
        if head == "model" and len(path) == 2:
            out.model[path[1]] = (key, md)
        elif head in ("optim", "optimizer"):
            out.optimizer = True
            if len(path) == 4 and path[1] == "state":
                out.state[(path[2], path[3])] = (key, md)
            elif len(path) == 2 and str(path[1]).startswith("state."):
                fqn, _, name = path[1][len("state."):].rpartition(".")
                out.state[(fqn, name)] = (key, md)
        elif head == "train_state" and path[-1] == "step":
            out.train_step = (key, md)
        elif len(path) == 1 and is_tensor:
            out.model[head] = (key, md)  # torchtitan: the model at the top
    return out


def _shape(md):
    return tuple(md.size)


def _fmt(shape):
    return "[" + ", ".join(map(str, shape)) + "]"


def _differences(entries, template):
    """Every way the DCP checkpoint's model and optimizer entries differ
    from the template's, one line each."""
    import torch
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    lines = []
    ours, theirs = template.entries, entries.model
    for name in sorted(set(ours) - set(theirs)):
        lines.append(f"missing: {name} {_fmt(ours[name][0])}")
    for name in sorted(set(theirs) - set(ours)):
        md = theirs[name][1]
        shape = _fmt(_shape(md)) if isinstance(
            md, TensorStorageMetadata) else "(not a tensor)"
        lines.append(f"extra: {name} {shape}")
    for name in sorted(set(ours) & set(theirs)):
        shape, dtype = ours[name]
        md = theirs[name][1]
        if not isinstance(md, TensorStorageMetadata):
            lines.append(f"not a tensor: {name}")
            continue
        if _shape(md) != shape:
            lines.append(f"shape: {name} is {_fmt(_shape(md))} in the DCP "
                         f"checkpoint, {_fmt(shape)} in the model")
        want = _torch_dtype(dtype)
        got = md.properties.dtype
        # A floating-point tensor is widened to our f32 (exactly, from
        # bf16/f16); anything else must be what the model holds.
        if got != want and not (got.is_floating_point and
                                want.is_floating_point and
                                torch.finfo(got).bits <= torch.finfo(want).bits):
            lines.append(f"dtype: {name} is {got} in the DCP checkpoint, "
                         f"{want} in the model")
    if entries.optimizer:
        # Only the state of parameters both sides hold with one shape: a
        # missing, extra or reshaped parameter is reported once, above.
        both = {n for n in set(ours) & set(theirs)
                if isinstance(theirs[n][1], TensorStorageMetadata) and
                _shape(theirs[n][1]) == ours[n][0]}
        want = {(p, s) for p, kinds in template.state.items() for s in kinds
                if p in both}
        have = {k for k in entries.state if k[1] != "step" and k[0] in both}
        for p, s in sorted(want - have):
            lines.append(f"missing optimizer state: {s} of {p}")
        for p, s in sorted(have - want):
            lines.append(f"extra optimizer state: {s} of {p}")
        for p, s in sorted(want & have):
            md = entries.state[(p, s)][1]
            if not isinstance(md, TensorStorageMetadata) or \
                    _shape(md) != ours[p][0]:
                got = _fmt(_shape(md)) if isinstance(
                    md, TensorStorageMetadata) else "not a tensor"
                lines.append(f"shape: optimizer state {s} of {p} is {got}, "
                             f"the parameter is {_fmt(ours[p][0])}")
    return lines


def from_dcp(dcp_dir, output, *, like, step=None, model_only=False):
    """Writes the DCP checkpoint in `dcp_dir` as our full checkpoint
    `output` for the model of `like` (one of our checkpoints or a lowered
    program). Raises CheckpointMismatchError listing every difference
    between the two before reading any tensor. `step` overrides the step
    count; `model_only` leaves the optimizer state out (the runner starts
    it at zero). Returns a summary dict: model, step, entries,
    optimizer_state (whether optimizer state was converted)."""
    import torch
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import save_file
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata
    _quiet_dcp()
    template = read_template(like)
    if not (Path(dcp_dir) / ".metadata").is_file():
        raise FileNotFoundError(f"{dcp_dir}: no DCP checkpoint there (no "
                                ".metadata file)")
    reader = dcp.FileSystemReader(str(dcp_dir))
    metadata = reader.read_metadata()
    entries = _classify(metadata)
    if model_only or not entries.state:
        # Model only: the runner starts the optimizer state at zero.
        entries.optimizer = False
        entries.state = {}
    differences = _differences(entries, template)
    if entries.optimizer and not template.state:
        differences.append(f"the DCP checkpoint holds optimizer state, "
                           f"model '{template.model}' has none "
                           f"(optimizer {template.optimizer!r}; "
                           "--model-only leaves it out)")
    if differences:
        raise CheckpointMismatchError(
            f"DCP checkpoint {dcp_dir} does not match model "
            f"'{template.model}' of {template.source}: "
            f"{len(differences)} difference(s):\n  " +
            "\n  ".join(differences), differences)

    # Preallocated tensors under the DCP keys themselves: DCP flattens a
    # state dict by joining its path with dots, so a flat dict of the
    # checkpoint's keys plans the same reads, and the whole tensors gather
    # whatever sharding the checkpoint was saved with.
    def empty(md):
        return torch.empty(_shape(md), dtype=md.properties.dtype)

    sd = {key: empty(md) for key, md in entries.model.values()}
    want_state = [(p, s) for p, kinds in template.state.items()
                  for s in kinds] if entries.optimizer else []
    for p, s in want_state:
        key, md = entries.state[(p, s)]
        sd[key] = empty(md)
    step_keys = {}
    if entries.optimizer:
        for (p, s), (key, md) in entries.state.items():
            if s == "step" and p in template.state:
                sd[key] = empty(md) if isinstance(
                    md, TensorStorageMetadata) else 0
                step_keys[p] = key
    if entries.train_step is not None:
        key, md = entries.train_step
        sd[key] = empty(md) if isinstance(md, TensorStorageMetadata) else 0
    dcp.load(sd, storage_reader=reader, no_dist=True)

    opt_steps = {int(float(sd[key])) for key in step_keys.values()}
    if len(opt_steps) > 1:
        raise ValueError(f"{dcp_dir}: the parameters' optimizer steps differ "
                         f"({sorted(opt_steps)}); ours are one count")
    train_step = None
    if entries.train_step is not None:
        train_step = int(sd[entries.train_step[0]])
    if step is None:
        step = train_step if train_step is not None else \
            (opt_steps.pop() if opt_steps else None)
        if step is None:
            raise ValueError(f"{dcp_dir}: holds no train_state.step and no "
                             "optimizer step: pass the step count (--step)")
        if opt_steps and train_step is not None and \
                opt_steps != {train_step}:
            raise ValueError(
                f"{dcp_dir}: train_state.step {train_step} differs from the "
                f"optimizer's step {sorted(opt_steps)[0]} (skipped steps?); "
                "our AdamW counts its steps by the training step: pass "
                "--step to choose one")

    out = {}
    for name, (shape, dtype) in template.entries.items():
        out[name] = sd[entries.model[name][0]].to(
            _torch_dtype(dtype)).contiguous()
    for p, s in want_state:
        out[f"optim.{s}.{p}"] = sd[entries.state[(p, s)][0]].to(
            torch.float32).contiguous()
    meta = {"format": FULL_FORMAT, "model": template.model,
            "step_count": str(step),
            "optimizer": template.optimizer if want_state else "none",
            "converted_from": f"dcp:{dcp_dir}"}
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    save_file(out, str(tmp), metadata=meta)
    os.replace(tmp, output)
    return dict(model=template.model, step=step,
                entries=len(template.entries),
                optimizer_state=bool(want_state))


# -- the command line ----------------------------------------------------------
def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.checkpoint",
        description="Convert between fsdp-mlir checkpoints and PyTorch "
                    "Distributed Checkpoint (DCP) directories.")
    sub = parser.add_subparsers(dest="command", required=True)
    to = sub.add_parser("to-dcp", help="ours (full file or sharded "
                        "directory) -> a DCP directory")
    to.add_argument("checkpoint")
    to.add_argument("dcp_dir")
    to.add_argument("--lr", type=float,
                    help="the learning rate (required with optimizer state)")
    to.add_argument("--beta1", type=float)
    to.add_argument("--beta2", type=float)
    to.add_argument("--eps", type=float)
    to.add_argument("--weight-decay", type=float)
    to.add_argument("--momentum", type=float)
    to.add_argument("--dampening", type=float)
    to.add_argument("--nesterov", action="store_true", default=None)
    to.add_argument("--beta2-decay", type=float)
    to.add_argument("--eps1", type=float)
    to.add_argument("--eps2", type=float)
    to.add_argument("--clip-threshold", type=float)
    to.add_argument("--layout", choices=LAYOUTS, default="torch")
    back = sub.add_parser("from-dcp", help="a DCP directory -> our full "
                          "checkpoint")
    back.add_argument("dcp_dir")
    back.add_argument("output")
    back.add_argument("--like", required=True,
                      help="one of our checkpoints of the model, or its "
                           "lowered program (.mlir)")
    back.add_argument("--step", type=int,
                      help="the step count (default: the checkpoint's)")
    back.add_argument("--model-only", action="store_true",
                      help="leave the optimizer state out (the runner "
                           "starts it at zero)")
    args = parser.parse_args(argv)
    try:
        if args.command == "to-dcp":
            done = to_dcp(args.checkpoint, args.dcp_dir, lr=args.lr,
                          beta1=args.beta1, beta2=args.beta2, eps=args.eps,
                          weight_decay=args.weight_decay,
                          momentum=args.momentum, dampening=args.dampening,
                          nesterov=args.nesterov,
                          beta2_decay=args.beta2_decay, eps1=args.eps1,
                          eps2=args.eps2,
                          clip_threshold=args.clip_threshold,
                          layout=args.layout)
            print(f"wrote DCP checkpoint {args.dcp_dir} ({done['layout']} "
                  f"layout): model '{done['model']}', step {done['step']}, "
                  f"{done['entries']} tensors, optimizer {done['optimizer']}")
        else:
            done = from_dcp(args.dcp_dir, args.output, like=args.like,
                            step=args.step, model_only=args.model_only)
            state = "with" if done["optimizer_state"] else "without"
            print(f"wrote {args.output}: model '{done['model']}', step "
                  f"{done['step']}, {done['entries']} tensors, {state} "
                  "optimizer state")
    except (ValueError, FileExistsError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"error: the conversion needs torch and safetensors ({e})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
