"""The model zoo: builders returning `fsdp_mlir.ir.Model`s (their `.text()`
is what fsdp-opt reads), and named presets of their hyper-parameters.

    from fsdp_mlir.models import build, gpt2
    text = gpt2(vocab=64, ctx=16, width=32, heads=4, layers=2).text()
    text = build("gpt2_124m").text()
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Tuple

from ..ir import Model
from .gpt2 import gpt2, gpt2_params
from .llama import llama, llama_params
from .mlp import mlp
from .nested_wrapped import (always_wrap_nested_wrapped, mixture_of_experts,
                             nested_wrapped)
from .transformer import (transformer_with_shared_params,
                          transformer_with_shared_params_count)

__all__ = ["MODELS", "PRESETS", "build", "mlp", "nested_wrapped",
           "always_wrap_nested_wrapped", "mixture_of_experts", "gpt2",
           "gpt2_params", "llama",
           "llama_params", "transformer_with_shared_params",
           "transformer_with_shared_params_count"]

MODELS: Dict[str, Callable[..., Model]] = {
    "mlp": mlp,
    "nested_wrapped": nested_wrapped,
    "always_wrap_nested_wrapped": always_wrap_nested_wrapped,
    "mixture_of_experts": mixture_of_experts,
    "gpt2": gpt2,
    "llama": llama,
    "transformer_with_shared_params": transformer_with_shared_params,
}

# name -> (builder, hyper-parameters); the model symbol is the preset name.
PRESETS: Dict[str, Tuple[str, Dict[str, Any]]] = {
    # GPT-2 small (124,439,808 parameters with the tied lm_head).
    "gpt2_124m": ("gpt2", dict(vocab=50257, ctx=1024, width=768, heads=12,
                               layers=12, batch=8)),
    # examples/char_gpt.mlir's model.
    "char_gpt": ("gpt2", dict(vocab=128, ctx=64, width=128, heads=4,
                              layers=4, batch=8)),
    # Small Llamas that train in seconds on a CPU.
    "llama_tiny": ("llama", dict(vocab=256, ctx=32, width=64, heads=4,
                                 kv_heads=2, layers=2, ffn=172, batch=4)),
    "llama_char": ("llama", dict(vocab=128, ctx=64, width=128, heads=4,
                                 kv_heads=2, layers=4, ffn=344, batch=8)),
}


def build(model: str, /, **overrides: Any) -> Model:
    """A model by builder or preset name; keywords override the preset's."""
    name = model
    if name in PRESETS:
        builder, params = PRESETS[name]
        kwargs = dict(params, name=name)
        kwargs.update(overrides)
        return MODELS[builder](**kwargs)
    if name in MODELS:
        return MODELS[name](**overrides)
    raise KeyError(f"unknown model {name!r}; known: "
                   + ", ".join(sorted(MODELS) + sorted(PRESETS)))
