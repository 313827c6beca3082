"""fsdp_mlir: Python tools around the fsdp-mlir compiler.

`fsdp_mlir.ir` emits the textual `fsdp.model` IR that fsdp-opt parses;
`fsdp_mlir.models` builds the model zoo with it (PyTorch module names and
initializers). Compile and train the result with the fsdp-opt and fsdp-run
tools (see docs/Python.md).
"""

__version__ = "0.1.0"


def from_torch(module, example_inputs, **options):
    """fsdp_mlir.torch_import.from_torch (imported on first use: it needs
    torch)."""
    from .torch_import import from_torch as convert
    return convert(module, example_inputs, **options)


def save_weights(module, model, path):
    """fsdp_mlir.torch_import.save_weights."""
    from .torch_import import save_weights as save
    return save(module, model, path)


def __getattr__(name):
    # fsdp_mlir.Session (imported on first use: it loads libfsdp_session.so).
    if name in ("Session", "SessionError"):
        from . import session
        return getattr(session, name)
    raise AttributeError(f"module 'fsdp_mlir' has no attribute {name!r}")
