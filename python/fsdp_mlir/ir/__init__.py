"""A small emitter of `fsdp.model` IR text.

A model is a tree of `Module`s, as in PyTorch: each holds parameters, child
modules and its forwards (one for each signature it is called on). A
forward is written op by op on a `Forward`, whose methods are the `nn` ops
(result types inferred the way the dialect infers them) plus `call` and
`get_param`; values are SSA names with their tensor types. `Model.text()` prints the syntax fsdp-opt parses
(docs/Dialects/*.md, build/docs/Dialects/*Ops.md)::

    root = Module("root", "MLP")
    fc1 = root.add(Module("fc1", "Linear"))
    w = fc1.param("weight", [32, 16], Init.kaiming_uniform(math.sqrt(5)))
    f = fc1.forward(x=tensor(8, 16))
    f.ret(f.linear(f.args[0], f.get_param(w), name="y"))

Symbol paths (`@transformer::@wte::@weight`) are computed from the tree, so
`call` and `get_param` take the Module or Param object.

The package has two parts: model.py, the tree (`Model`, `Module`, `Param`,
`Buffer`) and the printing of the whole model, and forward.py, `Forward`,
the op builder of one module's forward; types.py holds what both use
(`TensorType`, `Value`, `Init`, the literal forms).
"""

from .forward import Forward
from .model import Buffer, Model, Module, Param
from .types import (DTYPES, Init, TensorType, Value,  # noqa: F401
                    fmt_float, symbol, tensor)

__all__ = ["TensorType", "tensor", "Init", "Value", "Param", "Buffer",
           "Module", "Forward", "Model", "fmt_float", "symbol"]
