"""The draws of torch's f32 rounding that the architecture sweep's
gradient check measures its noise with (first_step_gradients.py)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from first_step_gradients import (one_ulp_apart,  # noqa: E402
                                  torch_f32_gradients)
from test_torch_import import PER_RANK  # noqa: E402


class ReluNet(torch.nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4, bias=False)
        self.relu = torch.nn.ReLU(inplace=True)  # as torchvision's blocks
        with torch.no_grad():
            self.fc.weight.copy_(torch.from_numpy(weight))

    def forward(self, x, y):
        return (self.relu(self.fc(x)) * y).sum()


def net_and_data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((PER_RANK, 3)).astype(np.float32)
    y = rng.standard_normal((PER_RANK, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    # Sample 0's input to unit 1 is exactly 2^-30: f32 rounds 0.5 + 2^-30
    # to 0.5 and the input to 0, where torch's ReLU passes no gradient.
    x[0] = [1.0, 1.0, 0.5]
    w[1] = [2.0 ** -30, 0.5, -1.0]
    return ReluNet(w), [x, y]


def test_torch_f32_runs_leave_torch_as_they_found_it():
    module, data = net_and_data()
    threads = torch.get_num_threads()
    runs = list(torch_f32_gradients(module, data))
    assert len(runs) == 8  # 2 convolution paths x 2 thread counts + 4
    assert torch.backends.mkldnn.enabled
    assert torch.get_num_threads() == threads
    # The runs' weights moved (one SGD step), the module's did not.
    assert all(not torch.equal(r["fc.weight"], module.fc.weight)
               for r in runs)
    # Inputs one ulp apart are other draws: not the default run again.
    default = runs[1]["fc.weight"]  # oneDNN on, 2 threads (the jittered
    # runs use torch's own thread count; any count is another draw too)
    assert any(not torch.equal(r["fc.weight"], default) for r in runs[4:])


def test_inputs_one_ulp_apart_are_each_one_ulp_away():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    labels = rng.integers(0, 5, 1000)
    moved, same = one_ulp_apart([x, labels], np.random.default_rng(1))
    steps = moved.view(np.int32).astype(np.int64) - x.view(np.int32)
    # Same-sign floats: adjacent values are adjacent bit patterns.
    assert moved.dtype == np.float32 and set(np.abs(steps)) == {1}
    assert 400 < (moved > x).sum() < 600  # up or down at random
    assert np.array_equal(same, labels)
