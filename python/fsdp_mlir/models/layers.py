"""The torch.nn layers the zoo is made of, as `Module`s with their forward.

Each takes the activation shape in front of the feature dimension (`act`):
a Linear applied to [B, T, C] gets act=[B, T]. Default initializers are
PyTorch's; the builders override them where the model's own init differs
(GPT-2, Llama).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from ..ir import Init, Module, tensor

SQRT5 = math.sqrt(5)


def linear(name: str, din: int, dout: int, act: Sequence[int],
           bias: bool = True, unit: bool = False,
           weight_init: Optional[Init] = None,
           bias_init: Optional[Init] = None) -> Module:
    """nn.Linear(din, dout, bias): weight kaiming_uniform(a=sqrt(5)), bias
    uniform(+-1/sqrt(din)) unless told otherwise."""
    m = Module(name, "Linear", unit=unit)
    w = m.param("weight", [dout, din], weight_init or Init.kaiming_uniform(SQRT5))
    b = None
    if bias:
        bound = 1 / math.sqrt(din)
        b = m.param("bias", [dout], bias_init or Init.uniform(-bound, bound))
    f = m.forward(tensor(*act, din))
    y = f.linear(f.args[0], f.get_param(w, "w"),
                 f.get_param(b, "b") if b is not None else None, name="y")
    f.ret(y)
    return m


def layer_norm(name: str, width: int, act: Sequence[int],
               eps: float = 1e-5) -> Module:
    """nn.LayerNorm(width): weight ones, bias zeros."""
    m = Module(name, "LayerNorm")
    w = m.param("weight", [width], Init.ones)
    b = m.param("bias", [width], Init.zeros)
    f = m.forward(tensor(*act, width))
    f.ret(f.layer_norm(f.args[0], f.get_param(w, "w"), f.get_param(b, "b"),
                       eps=eps, name="y"))
    return m


def rms_norm(name: str, width: int, act: Sequence[int], eps: float = 1e-6,
             kind: str = "RMSNorm") -> Module:
    """nn.RMSNorm(width, eps): weight ones."""
    m = Module(name, kind)
    w = m.param("weight", [width], Init.ones)
    f = m.forward(tensor(*act, width))
    f.ret(f.rms_norm(f.args[0], f.get_param(w, "w"), eps=eps, name="y"))
    return m


def embedding(name: str, num: int, width: int, ids_shape: Sequence[int],
              init: Optional[Init] = None) -> Module:
    """nn.Embedding(num, width): weight normal(0, 1) unless told otherwise."""
    m = Module(name, "Embedding")
    w = m.param("weight", [num, width], init or Init.normal(0.0, 1.0))
    f = m.forward(ids=tensor(*ids_shape, dtype="i64"))
    f.ret(f.embedding(f.args[0], f.get_param(w, "w"), name="e"))
    return m


def sequential(name: str, children: Sequence[Module],
               unit: bool = False) -> Module:
    """nn.Sequential: children "0", "1", ... called in order (their names
    are replaced by their positions)."""
    m = Module(name, "Sequential", unit=unit)
    for i, c in enumerate(children):
        c.name = str(i)
        m.add(c)
    first = children[0].fwd
    f = m.forward(first.args[0].type)
    h = f.args[0]
    for c in children:
        h = f.call(c, h)
    f.ret(h)
    return m
