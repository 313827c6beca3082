"""fsdp_mlir: Python tools around the fsdp-mlir compiler.

`fsdp_mlir.ir` emits the textual `fsdp.model` IR that fsdp-opt parses;
`fsdp_mlir.models` builds the model zoo with it (PyTorch module names and
initializers). Compile and train the result with the fsdp-opt and fsdp-run
tools (see docs/Python.md).
"""

__version__ = "0.1.0"
