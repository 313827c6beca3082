"""The run-time assertions of an exported graph that the IR states.

F.one_hot checks that its class labels lie below num_classes; torch.export
writes the check as _assert_async(all(labels < C)). The importer turns
it into nn.id_range on the labels, which the runner applies to each batch it
loads, so a label out of range stops the run as it stops torch (the one-hot
built from comparisons would otherwise give that row zeros). The other
assertions (one_hot's labels >= 0, which the range implies; an assert in a
model's forward) do not change any value and are dropped."""
from __future__ import annotations

from typing import Optional, Tuple


def _name(node) -> str:
    return getattr(getattr(node, "target", None), "__name__", "")


def checked_id_bound(assertion) -> Optional[Tuple[object, int]]:
    """(labels node, C) where `assertion` checks all labels < C, else
    None."""
    condition = assertion.args[0] if assertion.args else None
    if _name(condition) not in ("all.default", "all.dims", "all.dim"):
        return None
    comparison = condition.args[0]
    if _name(comparison) != "lt.Scalar" or len(comparison.args) != 2:
        return None
    labels, bound = comparison.args
    if isinstance(bound, bool) or not isinstance(bound, int) or bound <= 0:
        return None
    return labels, bound
