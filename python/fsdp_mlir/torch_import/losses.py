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
