"""FSDP's ignored modules and parameters at import.

`from_torch(module, example, ignored_modules=[...])` (FSDP1's
`ignored_modules` / `ignored_states` of modules) or `ignored_params=[...]`
(FSDP2's `fully_shard(ignored_params=)`, FSDP1's `ignored_states` of
parameters) marks the modules holding them as ignored units
(`#fsdp.unit<ignored = local | all_reduce>`): their parameters are whole on
every rank, never gathered, start as the module's weights on every rank and
their gradients stay local (torch's behaviour), or with
`ignored_grad_sync="all_reduce"` are averaged over all ranks as DDP would.

As torch/distributed/fsdp/_init_utils.py: an ignored module's descendants
are ignored too, and the wrap policy wraps none of them. A parameter is
ignored through the module that declares it: the IR's unit of ignoring is a
module, so ignored parameters must make up whole subtrees (as
`ignored_params=set(m.parameters())` does); anything else is an error
naming the parameter.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set

from .common import UnsupportedModelError

GRAD_SYNCS = ("local", "all_reduce")


def ignored_roots(root, ignored_modules: Optional[Iterable] = None,
                  ignored_params: Optional[Iterable] = None) -> List[str]:
    """The paths of the outermost modules of `root` whose parameters FSDP
    ignores, in module order."""
    if ignored_modules is not None and ignored_params is not None:
        raise ValueError("ignored_modules and ignored_params are mutually "
                         "exclusive (as FSDP1's ignored_modules and "
                         "ignored_states): give one")
    paths = {id(m): path for path, m in root.named_modules()}
    chosen: Set[int] = set()
    for m in ignored_modules or ():
        if id(m) not in paths:
            raise ValueError(f"ignored module {type(m).__name__} is not a "
                             f"submodule of {type(root).__name__}")
        chosen.add(id(m))
    if ignored_params is not None:
        chosen |= _modules_of_params(root, ignored_params)
    outermost = []
    for path, m in root.named_modules():
        if id(m) in chosen and not any(
                path == p or path.startswith(p + ".") if p else True
                for p in outermost):
            outermost.append(path)
    return outermost


def _modules_of_params(root, params) -> Set[int]:
    """The modules whose whole subtree's parameters are all in `params`."""
    wanted = {id(p) for p in params}
    names = {id(p): n for n, p in root.named_parameters()}
    for p in params:
        if id(p) not in names:
            raise ValueError(f"an ignored parameter of shape "
                             f"{tuple(p.shape)} is not a parameter of "
                             f"{type(root).__name__}")
    covered: Set[int] = set()
    modules: Set[int] = set()
    for _, m in root.named_modules():
        own = list(m.parameters())
        if own and all(id(p) in wanted for p in own):
            modules.add(id(m))
            covered |= {id(p) for p in own}
    for pid in wanted - covered:
        name = names[pid]
        owner = name.rpartition(".")[0] or "(root)"
        raise UnsupportedModelError(
            f"ignored parameter '{name}': module '{owner}' also has "
            "parameters that are not ignored; the compiler ignores whole "
            "modules' parameters (ignore all of that module's, or none)")
    return modules


def mark_ignored(modules: Dict[str, object], root, paths: List[str],
                 grad_sync: str) -> frozenset:
    """Marks the IR modules at `paths` ignored with `grad_sync`; returns
    the torch modules the wrap policy must skip (them and their
    descendants)."""
    if grad_sync not in GRAD_SYNCS:
        raise ValueError(f"ignored_grad_sync={grad_sync!r}: expected "
                         "'local' (torch's: gradients not reduced) or "
                         "'all_reduce' (averaged over all ranks, as DDP)")
    skipped = set()
    for path in paths:
        ir = modules.get(path)
        if ir is None:
            raise UnsupportedModelError(
                f"ignored module '{path}' is not a module of the exported "
                "program (torch.export inlined it); ignore its parent or "
                "its children")
        ir.unit = True
        ir.ignored = grad_sync
        skipped |= set(root.get_submodule(path).modules())
    return frozenset(skipped)
