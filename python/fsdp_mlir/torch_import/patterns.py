"""Rewrites of the exported graphs before translation, where a construct
is built from ops the importer does not map one by one but whose whole
has a mapping: Hugging Face's drop path, floor(rand(shape) + keep) (BEiT,
DINOv2, ConvNeXt, Swin, FocalNet, CvT, Data2Vec-Vision: a per-sample keep
mask, 1 where the uniform draw is at least 1 − keep), becomes
bernoulli(keep) of a fresh tensor, which ops_pointwise maps as stochastic
depth's mask (timm's and torchvision's). A draw used otherwise is an
nn.random draw (ops_pointwise)."""
from __future__ import annotations


def _is(node, name: str) -> bool:
    return (getattr(node, "op", None) == "call_function"
            and str(node.target) == f"aten.{name}")


def _uniform_plus_keep(node):
    """(rand node, keep) when `node` is rand(shape) + keep (either order),
    keep a number in (0, 1]."""
    if not _is(node, "add.Tensor") or len(node.args) != 2 or node.kwargs:
        return None
    a, b = node.args
    rand, keep = (a, b) if _is(a, "rand.default") else (b, a)
    if (_is(rand, "rand.default") and isinstance(keep, (int, float))
            and 0 < keep <= 1 and len(rand.users) == 1):
        return rand, float(keep)
    return None


def rewrite_drop_paths(graph) -> None:
    """floor(rand(shape) + keep) → bernoulli(zeros(shape), keep)."""
    import torch
    aten = torch.ops.aten
    for floor in list(graph.nodes):
        if not _is(floor, "floor.default"):
            continue
        found = _uniform_plus_keep(floor.args[0])
        if found is None or len(floor.args[0].users) != 1:
            continue
        total, (rand, keep) = floor.args[0], found
        with graph.inserting_before(floor):
            zeros = graph.call_function(aten.zeros.default,
                                        tuple(rand.args), dict(rand.kwargs))
            zeros.meta = dict(rand.meta)
            mask = graph.call_function(aten.bernoulli.p, (zeros, keep))
            mask.meta = dict(floor.meta)
        floor.replace_all_uses_with(mask)
        for dead in (floor, total, rand):
            graph.erase_node(dead)
