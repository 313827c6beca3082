"""The importer's mixture-of-experts routing (ops_routing.py) beyond what
the Mixtral models of the architecture sweep train: torch._grouped_mm maps
onto nn.grouped_matmul as transformers' fallback does (import only: torch
2.15 has no CPU backward for it to train against), and an index_put other
than the inverse of a permutation joins the one report of unsupported
constructs.

Run: PYTHONPATH=python:python/tests python3 -m pytest -q python/tests/test_routing_import.py
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from fsdp_mlir import from_torch  # noqa: E402
from fsdp_mlir.torch_import import UnsupportedModelError  # noqa: E402


class GroupedExperts(torch.nn.Module):
    """Rows sorted by expert times each expert's [8, 4] weights, the
    segment ends a run-time input."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 4, 8))

    def forward(self, x, ends):
        return torch._grouped_mm(x, self.w.transpose(-2, -1), ends).sum()


def test_grouped_mm_is_a_grouped_matmul_over_the_run_time_offsets():
    model = from_torch(GroupedExperts(),
                       [torch.randn(8, 8),
                        torch.tensor([3, 8], dtype=torch.int32)])
    text = model.text()
    assert ("nn.grouped_matmul %" in text and
            "(tensor<8x8xf32>, tensor<2x8x4xf32>, tensor<2xi32>) -> "
            "tensor<8x4xf32>" in text), text


class Scatter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x, idx):
        out = torch.zeros(8)
        out[idx] = self.proj(x).sum(-1)  # LINE-INDEX-PUT
        return out.sum()


def test_index_put_of_run_time_values_is_reported():
    with pytest.raises(UnsupportedModelError) as e:
        from_torch(Scatter(), [torch.randn(3, 4),
                               torch.tensor([0, 5, 2])])
    message = str(e.value)
    assert ("index_put other than an arange put by a permutation"
            in message), message
    line = next(i for i, text in enumerate(open(__file__).read()
                                           .splitlines(), 1)
                if "LINE-INDEX-PUT" in text and "out[idx]" in text)
    assert f'test_routing_import.py", line {line}' in message, message
