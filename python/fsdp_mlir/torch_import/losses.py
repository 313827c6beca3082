"""Loss modules around models that return predictions: from_torch imports
a module whose forward returns the training loss."""
import torch
import torch.nn.functional as F


class ClassifierLoss(torch.nn.Module):
    """A classifier returning logits (torchvision, timm) trained on its
    cross-entropy: forward(pixels, labels) is the loss. The classifier is
    the submodule `m` (its parameters are named `m.<name>`)."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.m = model

    def forward(self, pixels, labels):
        return F.cross_entropy(self.m(pixels), labels)


class HFLoss(torch.nn.Module):
    """A Hugging Face model trained on the loss it computes itself:
    forward(*inputs, labels) feeds `inputs` to the model's keyword
    arguments named by `names` and returns `.loss`; where `names` names
    every argument (a question-answering head's start_positions and
    end_positions) there is no `labels`."""

    def __init__(self, model: torch.nn.Module, names=("input_ids",)):
        super().__init__()
        self.m = model
        self.inputs = (names,) if isinstance(names, str) else tuple(names)

    def forward(self, *args):
        named = dict(zip(self.inputs, args))
        if len(args) > len(self.inputs):
            named["labels"] = args[len(self.inputs)]
        return self.m(**named).loss
