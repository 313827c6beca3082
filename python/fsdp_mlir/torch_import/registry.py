"""The ATen op table: ATen overload name ("add.Tensor") → its handler,
assembled from the op families (ops_*.py, one per kind of op; the handler
signature is in common.py). To support an op, add its handler to the
family it belongs to; an overload claimed by two families is an error at
import."""
from __future__ import annotations

from typing import Callable, Dict, List

from . import (ops_attention, ops_conv, ops_layout, ops_linear, ops_losses,
               ops_pointwise, ops_reductions, ops_resample, ops_rounding,
               ops_routing, ops_scatter, ops_spectral)

_FAMILIES = (ops_linear, ops_conv, ops_pointwise, ops_rounding, ops_layout,
             ops_attention, ops_reductions, ops_losses, ops_resample,
             ops_routing, ops_scatter, ops_spectral)


def _assemble() -> Dict[str, Callable]:
    table: Dict[str, Callable] = {}
    for family in _FAMILIES:
        twice = table.keys() & family.OPS.keys()
        if twice:
            raise AssertionError(f"{family.__name__} maps {sorted(twice)} "
                                 "again")
        table.update(family.OPS)
    return table


_OPS: Dict[str, Callable] = _assemble()


def supported_ops() -> List[str]:
    """The ATen overloads the importer translates ("add.Tensor", ...),
    sorted. Others are decomposed first when PyTorch's decompositions break
    them into these (importer._decompose_unhandled), else reported."""
    return sorted(_OPS)
