"""From a torch.nn.Module to an `fsdp.model`: torch.export + unflatten.

    from fsdp_mlir.torch_import import from_torch, save_weights
    model = from_torch(module, example_inputs)   # an fsdp_mlir.ir.Model
    save_weights(module, model, "weights.safetensors")

or `python -m fsdp_mlir.torch_import pkg.mod:factory -o model.mlir` (see
__main__.py). Where to look: importer.py (export, the module tree,
constant folding, tied parameters, the report of what is unsupported),
registry.py (the op table; `supported_ops()` lists it), ops_*.py (the
handlers, one file per kind of op), weights.py (save_weights), losses.py
(loss modules: a classifier's cross-entropy, a Hugging Face model's
own loss). The user's guide is
docs/Python.md.
"""
from .common import UnsupportedModelError
from .importer import from_torch
from .losses import ClassifierLoss, HFLoss
from .registry import supported_ops
from .weights import save_weights
from .wrap_policy import or_policy

__all__ = ["from_torch", "save_weights", "supported_ops", "or_policy",
           "ClassifierLoss", "HFLoss", "UnsupportedModelError"]
