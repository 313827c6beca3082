"""python -m fsdp_mlir.torch_import pkg.mod:factory -o model.mlir [--weights W]

Imports a torch.nn.Module into an `fsdp.model` (fsdp_mlir.from_torch).
`factory` is a callable in an importable module (or a file path,
path/to/file.py:factory) returning (module, example_inputs): the module in
the mode to train (train() for dropout) and one rank's micro-batch of
inputs. --weights writes the module's current weights as a full checkpoint
for `fsdp-run --load`, so the first loss equals torch's. Unsupported models
exit with status 1 listing every unsupported construct and its source line.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path

from . import UnsupportedModelError, from_torch, save_weights


def load_factory(spec: str):
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise SystemExit(f"error: '{spec}' is not MODULE:FACTORY or "
                         "FILE.py:FACTORY")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(
            Path(target).stem, target)
        if module_spec is None:
            raise SystemExit(f"error: cannot load {target}")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    if not hasattr(module, attr):
        raise SystemExit(f"error: {target} has no '{attr}'")
    return getattr(module, attr)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.torch_import",
        description=__doc__.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("factory", help="MODULE:FACTORY or FILE.py:FACTORY "
                        "returning (module, example_inputs)")
    parser.add_argument("-o", "--output", required=True,
                        help="the fsdp.model .mlir to write")
    parser.add_argument("--weights", help="also write the module's weights "
                        "(safetensors, for fsdp-run --load)")
    parser.add_argument("--name", help="the fsdp.model symbol (default: the "
                        "class name, lower case)")
    args = parser.parse_args(argv)
    module, example_inputs = load_factory(args.factory)()
    try:
        model = from_torch(module, example_inputs, name=args.name)
    except UnsupportedModelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    Path(args.output).write_text(model.text())
    print(f"wrote {args.output}: model @{model.name}, "
          f"{model.num_params():,} parameters")
    if args.weights:
        save_weights(module, model, args.weights)
        print(f"wrote {args.weights}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
