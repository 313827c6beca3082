"""Writes the fsdp.model of a torchvision classifier trained on its
cross-entropy (random weights), imported with fsdp_mlir.from_torch, for the
GPU lease kit's convolutional steps (scripts/gpu-bundle.sh):

    torchvision_step.py resnet50 --image 224 --batch 32 -o resnet50.mlir
    torchvision_step.py mobilenet_v2 --arg width_mult=0.25 --arg dropout=0.0 ...

--batch is one rank's micro-batch; --classes the classifier's width;
--arg NAME=VALUE (a Python literal) goes to the builder."""
import argparse
import ast

import torch
import torchvision

from fsdp_mlir import from_torch
from fsdp_mlir.torch_import import ClassifierLoss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="a torchvision.models builder (resnet50)")
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--arg", action="append", default=[],
                   help="NAME=VALUE for the builder (repeatable)")
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args()
    extra = {}
    for item in args.arg:
        name, _, value = item.partition("=")
        extra[name] = ast.literal_eval(value)
    torch.manual_seed(0)
    module = ClassifierLoss(getattr(torchvision.models, args.model)(
        num_classes=args.classes, **extra))
    example = (torch.zeros(args.batch, 3, args.image, args.image),
               torch.zeros(args.batch, dtype=torch.long))
    model = from_torch(module, example, name=args.model)
    with open(args.output, "w") as f:
        f.write(model.text())


if __name__ == "__main__":
    main()
