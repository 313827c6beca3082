"""A unit's own mixed precision from PyTorch's policy objects: FSDP2's
`MixedPrecisionPolicy` (fully_shard's `mp_policy`) or FSDP1's
`MixedPrecision` (a CustomPolicy's `mixed_precision` kwarg), as the fields
of `#fsdp.unit<param_dtype = ..., reduce_dtype = ..., output_dtype = ...,
cast_forward_inputs = ...>`.

Every field is written out, so the unit keeps PyTorch's meaning whatever
the compile's model-wide policy says: a `param_dtype` of None (no cast)
becomes the unit's own parameters' dtype without input casting, and a
`reduce_dtype` of None the dtype PyTorch then reduces in (FSDP1: the param
dtype; FSDP2 from torch 2.15: the parameters' own dtype, before it the
param dtype).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

from .common import UnsupportedModelError

_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}

# The fields taken per unit; the others must keep their defaults (FSDP1's
# buffer_dtype and keep_low_precision_grads are the compile's model-wide
# options; cast_root_forward_inputs concerns the root, which no policy
# wraps; FSDP1 reads _module_classes_to_ignore only from its top-level
# argument).
_FSDP2 = ("param_dtype", "reduce_dtype", "output_dtype", "cast_forward_inputs")
_FSDP1 = ("param_dtype", "reduce_dtype", "cast_forward_inputs",
          "cast_root_forward_inputs", "_module_classes_to_ignore")


def unit_precision(path: str, module, policy) -> Dict[str, Any]:
    """The #fsdp.unit fields of `policy` for the unit at `path` (`module`,
    a torch module)."""
    try:
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy
    except ImportError as e:
        raise UnsupportedModelError(
            f"unit '{path}': mixed precision needs torch.distributed.fsdp "
            f"({e})") from e
    fsdp2 = isinstance(policy, MixedPrecisionPolicy)
    if not fsdp2 and not isinstance(policy, MixedPrecision):
        raise UnsupportedModelError(
            f"the wrap policy gives unit '{path}' mixed precision "
            f"{policy!r}: a torch.distributed.fsdp MixedPrecisionPolicy or "
            "MixedPrecision")
    _check_defaults(path, policy, _FSDP2 if fsdp2 else _FSDP1)

    def dtype(field, value):
        name = str(value).replace("torch.", "")
        if name not in _DTYPES:
            raise UnsupportedModelError(
                f"the wrap policy gives unit '{path}' {field}={value}: "
                "float32, bfloat16 or float16")
        return _DTYPES[name]

    own = _own_dtype(module)
    param = policy.param_dtype
    if param is None:
        fields = {"param_dtype": own, "cast_forward_inputs": False}
    else:
        fields = {"param_dtype": dtype("param_dtype", param),
                  "cast_forward_inputs": bool(policy.cast_forward_inputs)}
    if policy.reduce_dtype is not None:
        fields["reduce_dtype"] = dtype("reduce_dtype", policy.reduce_dtype)
    else:
        fields["reduce_dtype"] = own if fsdp2 and _reduces_in_own_dtype() \
            else fields["param_dtype"]
    if fsdp2 and policy.output_dtype is not None:
        fields["output_dtype"] = dtype("output_dtype", policy.output_dtype)
    return fields


def _check_defaults(path, policy, taken):
    """Fields outside `taken` must have their default value."""
    for field in dataclasses.fields(policy):
        if field.name in taken:
            continue
        if getattr(policy, field.name) != field.default:
            raise UnsupportedModelError(
                f"the wrap policy gives unit '{path}' a {type(policy).__name__}"
                f" with {field.name}={getattr(policy, field.name)!r}, which "
                "units do not take (per unit: " + ", ".join(
                    f for f in taken if not f.startswith("_")) + "; "
                "buffer_dtype and keep_low_precision_grads are the compile's "
                "model-wide options)")


def _own_dtype(module) -> str:
    """The dtype of the module's floating-point parameters (f32 without
    any)."""
    for p in module.parameters():
        if p.is_floating_point():
            return _DTYPES.get(str(p.dtype).replace("torch.", ""), "f32")
    return "f32"


def _reduces_in_own_dtype() -> bool:
    """FSDP2's reduce_dtype=None reduces in the parameters' own dtype from
    torch 2.15 (before: in param_dtype)."""
    import torch
    return torch.__version__ >= "2.15"
