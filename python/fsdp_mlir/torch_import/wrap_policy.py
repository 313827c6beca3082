"""Which modules of an imported torch model become FSDP units, by any rule.

`from_torch(module, example, auto_wrap_policy=policy)` marks the units the
policy picks in the IR (`fsdp.module ... unit`), which the compiler takes
as hand-marked units (compile without `wrap_kinds` / `auto_wrap_policy`).
A policy is any of:

- **FSDP1's own policies**, used through torch's code so they choose what
  FSDP1 would: `ModuleWrapPolicy({Block})`, `CustomPolicy(fn)` (its lambda
  returns True or a dict of per-unit settings), and the function policies
  (`functools.partial(lambda_auto_wrap_policy, lambda_fn=...)`,
  `size_based_auto_wrap_policy`, `_or_policy`, or your own
  `fn(module, recurse, nonwrapped_numel)`), run by FSDP1's
  `_recursive_wrap` with a recorder in place of the FSDP class. Matching is
  whatever the policy says: `isinstance` holds, the modules being torch's.
- **A callable `fn(path, module)`**, as FSDP2 users call `fully_shard` in a
  loop with their own condition: visited for every submodule (the root is
  always a unit), returning False / None (not a unit), True (a unit), or a
  dict of per-unit settings.
- `or_policy(*policies)`: a unit when any policy makes it one (the first
  policy's settings win), FSDP1's `_or_policy` for any of the above.

Per-unit settings: `reshard_after_forward` (a bool, or an int N: reshard
to groups of N ranks after the forward, FSDP2's argument), or
FSDP1's `sharding_strategy` (FULL_SHARD: reshard after forward,
SHARD_GRAD_OP: keep the gathered parameters until the backward);
`mp_policy` (FSDP2's name) or `mixed_precision` (FSDP1's): an FSDP2
MixedPrecisionPolicy or FSDP1 MixedPrecision, the unit's own mixed
precision (mixed_precision.py); `activation_checkpointing`: True, the
unit recomputes its forward in its backward (`checkpoint_wrapper` around
it), or "selective", only its cheap ops (the matmuls' and attention's
results are kept: PyTorch's selective activation checkpointing);
`modules_to_forward_prefetch` / `modules_to_backward_prefetch`: the units
(torch modules or their paths) whose all-gathers this unit issues once its
own is done, in order, as FSDP2's `set_modules_to_forward_prefetch` /
`set_modules_to_backward_prefetch` (prefetching further ahead than the
next unit). Any other setting is an error naming it and the module.
"""
from __future__ import annotations

import inspect
import sys
import warnings
from typing import Any, Callable, Dict, Optional

from .common import UnsupportedModelError
from .mixed_precision import unit_precision

Settings = Dict[str, Any]


class _OrPolicy:
    def __init__(self, policies):
        self.policies = policies


def or_policy(*policies) -> _OrPolicy:
    """A unit where any of `policies` makes one."""
    if not policies:
        raise ValueError("or_policy needs at least one policy")
    return _OrPolicy(policies)


def units_of(root, policy, ignored=frozenset()) -> Dict[str, Settings]:
    """{module path: its unit settings} for every non-root module `policy`
    makes a unit of, in `root` (a torch module). `ignored`: FSDP's ignored
    modules with all their descendants, which no policy wraps (FSDP1 hands
    them to its policies, which skip them)."""
    if isinstance(policy, _OrPolicy):
        units: Dict[str, Settings] = {}
        for p in policy.policies:
            for path, settings in units_of(root, p, ignored).items():
                units.setdefault(path, settings)
        return units
    paths = {id(m): path for path, m in root.named_modules()}
    modules = {id(m): m for m in root.modules()}
    chosen = _torch_policy_units(root, policy, ignored)
    if chosen is None:
        if not callable(policy):
            raise TypeError(f"auto_wrap_policy {policy!r} is neither a torch "
                            "FSDP policy nor a callable")
        chosen = {}
        for path, m in root.named_modules():
            if path and m not in ignored:
                answer = policy(path, m)
                if answer:
                    chosen[id(m)] = {} if answer is True else dict(answer)
    return {paths[key]: _checked(paths[key], modules[key], settings)
            for key, settings in chosen.items() if paths[key]}


def _torch_policy_units(root, policy,
                        ignored) -> Optional[Dict[int, Settings]]:
    """FSDP1's choice for its own policy kinds (by id of module), else
    None."""
    try:
        from torch.distributed.fsdp import wrap
    except ImportError:
        return None
    if isinstance(policy, wrap._Policy):
        targets = policy._run_policy(root, ignored_modules=set(ignored),
                                     root_kwargs={})
        return {id(m): dict(kwargs) for m, kwargs in targets.items()}
    if not _is_function_policy(policy):
        return None
    chosen: Dict[int, Settings] = {}

    def record(module, **kwargs):
        chosen[id(module)] = {}
        return module  # the tree stays as it is

    wrap._recursive_wrap(root, auto_wrap_policy=policy, wrapper_cls=record,
                         ignored_modules=set(ignored),
                         ignored_params={p for m in ignored
                                         for p in m.parameters()},
                         only_wrap_children=True)
    return chosen


def _is_function_policy(policy) -> bool:
    try:
        params = inspect.signature(policy).parameters
    except (TypeError, ValueError):
        return False
    return {"module", "recurse", "nonwrapped_numel"} <= set(params)


def _checked(path: str, module, settings: Settings) -> Settings:
    """The settings the compiler takes per unit, from FSDP2's or FSDP1's
    names; anything else is an error."""
    out: Settings = {}
    for key, value in settings.items():
        if key == "reshard_after_forward":
            if not isinstance(value, int) or (
                    not isinstance(value, bool) and value < 1):
                raise UnsupportedModelError(
                    f"the wrap policy gives unit '{path}' reshard_after_forward"
                    f"={value!r}: a bool or an int >= 1 (the ranks to "
                    "reshard to after the forward)")
            out[key] = value
        elif key == "sharding_strategy":
            name = getattr(value, "name", str(value))
            if name not in ("FULL_SHARD", "SHARD_GRAD_OP"):
                raise UnsupportedModelError(
                    f"the wrap policy gives unit '{path}' sharding_strategy "
                    f"{name}: per unit, FULL_SHARD or SHARD_GRAD_OP (the "
                    "job's strategy sets the rest)")
            out["reshard_after_forward"] = name == "FULL_SHARD"
        elif key in ("mp_policy", "mixed_precision"):
            if value is not None:
                out["mixed_precision"] = unit_precision(path, module, value)
        elif key == "activation_checkpointing":
            out[key] = _checkpointing(
                value, f"the wrap policy gives unit '{path}' ")
        elif key in _PREFETCH_LISTS:
            out[key] = list(value)
        else:
            raise UnsupportedModelError(
                f"the wrap policy gives unit '{path}' the setting '{key}', "
                "which units do not take (per unit: reshard_after_forward, "
                "sharding_strategy, mp_policy / mixed_precision, "
                "activation_checkpointing, modules_to_forward_prefetch, "
                "modules_to_backward_prefetch)")
    return out


def _checkpointing(value, where: str):
    """An activation checkpointing setting: False, True (the whole unit)
    or "selective"; anything else is an error starting with `where`."""
    if not isinstance(value, bool) and value != "selective":
        raise UnsupportedModelError(
            f"{where}activation_checkpointing={value!r}: a bool or "
            "\"selective\"")
    return value


# A unit's setting -> the IR module's list it fills.
_PREFETCH_LISTS = {"modules_to_forward_prefetch": "forward_prefetch",
                   "modules_to_backward_prefetch": "backward_prefetch"}


def _prefetched(path: str, listed, paths: Dict[int, str],
                units: Dict[str, Settings]):
    """The paths of a prefetch list's units (torch modules or paths); one
    that is not a unit is an error."""
    out = []
    for entry in listed:
        target = entry if isinstance(entry, str) else paths.get(id(entry))
        if target not in units or not target:
            raise UnsupportedModelError(
                f"the wrap policy gives unit '{path}' a prefetch of "
                f"{entry if isinstance(entry, str) else type(entry).__name__!r}"
                ", which is not an FSDP unit below the root")
        out.append(target)
    return out


def mark_units(modules, root, policy: Callable, ignored=frozenset()) -> None:
    """Marks the IR modules (`modules`: path -> ir.Module) that `policy`
    picks in the torch module `root` (outside the `ignored` modules) as
    units with their settings."""
    units = units_of(root, policy, ignored)
    paths = {id(m): p for p, m in root.named_modules()}
    for path, settings in units.items():
        ir = modules[path]
        ir.unit = True
        for key, field in _PREFETCH_LISTS.items():
            if key in settings:
                setattr(ir, field, _prefetched(path, settings[key], paths,
                                               units))
        if "reshard_after_forward" in settings:
            ir.reshard_after_forward = settings["reshard_after_forward"]
        ir.mixed_precision = settings.get("mixed_precision", {})
        ir.activation_checkpointing = settings.get("activation_checkpointing",
                                                   False)


def mark_checkpointed(modules, root, check_fn: Callable) -> None:
    """`apply_activation_checkpointing(root, check_fn=check_fn)`: every
    module below the root that `check_fn` picks recomputes its forward in
    its backward, or only its cheap ops where `check_fn` returns
    "selective" (PyTorch's selective checkpointing context). Checkpointing
    applies to units here, so a picked module that is not one is an error
    naming it."""
    for path, module in root.named_modules():
        picked = check_fn(module) if path else False
        if not picked:
            continue
        ir = modules.get(path)
        if ir is None or not ir.unit or ir.ignored:
            raise UnsupportedModelError(
                f"activation checkpointing picks '{path}' "
                f"({type(module).__name__}), which is not an FSDP unit: "
                "checkpointing applies to units; wrap it (auto_wrap_policy)")
        if isinstance(picked, str):  # a misspelt policy is not True
            _checkpointing(picked, f"check_fn gives '{path}' ")
        ir.activation_checkpointing = (
            "selective" if picked == "selective" else True)


def hf_gradient_checkpointing(modules, root) -> Optional[Callable]:
    """transformers' `activation_checkpointing_enable()` (named
    `gradient_checkpointing_enable()` before v5) as activation
    checkpointing: the check_fn picking the layers it set to checkpoint
    (GradientCheckpointingLayers with `gradient_checkpointing` on, in
    training mode), when each is an FSDP unit here; else None. torch.export
    traces through torch.utils.checkpoint, so without this those layers
    would keep their activations for the backward; where one is not a unit
    a warning says so and nothing is checkpointed."""
    layers = sys.modules.get("transformers.modeling_layers")
    if layers is None:  # no transformers model was built
        return None
    picked = {path: m for path, m in root.named_modules()
              if path and isinstance(m, layers.GradientCheckpointingLayer)
              and m.gradient_checkpointing and m.training}
    if not picked:
        return None
    loose = [path for path in picked
             if path not in modules or not modules[path].unit
             or modules[path].ignored]
    if loose:
        kind = type(picked[loose[0]]).__name__
        warnings.warn(
            f"gradient checkpointing is enabled on {len(picked)} layers, "
            f"but {len(loose)} of them ('{loose[0]}', ...) are no FSDP unit: "
            "checkpointing applies to units, so none is checkpointed; wrap "
            f"them (auto_wrap_policy picking {kind}) or pass "
            "activation_checkpointing=", stacklevel=3)
        return None
    chosen = {id(m) for m in picked.values()}
    return lambda module: id(module) in chosen
