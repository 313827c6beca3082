"""A multi-layer perceptron: Linear -> ReLU -> ... -> Linear, MSE loss."""

from __future__ import annotations

from typing import Sequence

from ..ir import Model, Module, tensor
from .layers import linear


def mlp(sizes: Sequence[int] = (16, 32, 32, 4), batch: int = 8,
        name: str = "mlp") -> Model:
    """fc1..fcN = nn.Linear(sizes[i], sizes[i+1]) with ReLU between them,
    trained on a (batch, sizes[0]) input against (batch, sizes[-1]) targets
    with the mean squared error (examples/mlp.mlir is the default)."""
    sizes = list(sizes)
    if len(sizes) < 2:
        raise ValueError("mlp needs at least an input and an output size")
    root = Module("root", "MLP")
    layers = [root.add(linear(f"fc{i + 1}", din, dout, [batch]))
              for i, (din, dout) in enumerate(zip(sizes, sizes[1:]))]
    f = root.forward(x=tensor(batch, sizes[0]),
                     target=tensor(batch, sizes[-1]))
    h = f.args[0]
    for i, layer in enumerate(layers):
        h = f.call(layer, h)
        if i + 1 < len(layers):
            h = f.relu(h)
    f.ret(f.mse_loss(h, f.args[1], name="loss"))
    arch = " -> ReLU -> ".join(f"Linear({a}, {b})"
                               for a, b in zip(sizes, sizes[1:]))
    header = [f"A {len(layers)}-layer perceptron: {arch},",
              f"trained on a ({batch}, {sizes[0]}) batch against "
              f"({batch}, {sizes[-1]}) targets with the mean squared error.",
              f"{root.num_params()} parameters; initializers are "
              "nn.Linear's defaults."]
    return Model(name, root, header)
