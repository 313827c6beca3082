"""save_weights: a torch module's weights as the full checkpoint that
`fsdp-run --load` starts from, so the first loss of the imported model
equals torch's."""
from __future__ import annotations

from ..ir import Model


def save_weights(module, model: Model, path) -> None:
    """The module's parameters and persistent buffers (by fully-qualified
    name) as a full checkpoint at step 0, which `fsdp-run --load` reads."""
    import torch
    from safetensors.torch import save_file
    tensors = {}
    for name, p in module.named_parameters():
        tensors[name] = p.detach().to(torch.float32).contiguous().clone()
    modules = dict(module.named_modules())
    for name, b in module.named_buffers():
        owner, _, leaf = name.rpartition(".")
        if leaf not in modules[owner]._non_persistent_buffers_set:
            tensors[name] = b.detach().contiguous().clone()
    save_file(tensors, str(path), metadata={
        "format": "fsdp-mlir-full", "model": model.name, "step_count": "0",
        "optimizer": "none"})
