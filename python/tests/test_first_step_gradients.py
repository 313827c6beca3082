"""The architecture sweep's gradient check (first_step_gradients.py) on a
net small enough to work out by hand: loss = Σ relu(x Wᵀ) · y, so row j
of W's gradient is Σ_n [x_n·W_j > 0] y_nj x_n."""
from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from first_step_gradients import (f64_gradients, relu_kinks,  # noqa: E402
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


def start_of(module):
    return {k: p.detach().double().clone()
            for k, p in module.named_parameters()}


def test_a_flipped_relu_moves_one_row_by_its_sample():
    module, (x, y) = net_and_data()
    exact = copy.deepcopy(module).double()
    start = start_of(module)
    plain = f64_gradients(exact, [x, y], start)["fc.weight"]
    want = np.zeros((4, 3))
    for n in range(PER_RANK):
        for j in range(4):
            if float(x[n].astype(np.float64) @ start["fc.weight"][j].numpy()) > 0:
                want[j] += float(y[n, j]) * x[n].astype(np.float64)
    # Sums of 4 float64 products of O(1) values: rounding ~1e-15.
    assert np.abs(plain.numpy() - want).max() < 1e-12
    flipped = f64_gradients(exact, [x, y], start, (("relu", 0), (0, 1)))
    moved = flipped["fc.weight"].numpy() - plain.numpy()
    # The input 2^-30 was passed; flipped it is blocked: row 1 loses
    # sample 0's term, no other row moves.
    expected = np.zeros((4, 3))
    expected[1] = -float(y[0, 1]) * x[0].astype(np.float64)
    assert np.abs(moved - expected).max() < 1e-12


def test_the_relu_input_f32_rounds_to_zero_is_the_first_kink():
    module, data = net_and_data()
    kinks = relu_kinks(module, copy.deepcopy(module).double(), data)
    assert kinks, "no ReLU input within f32 error of zero"
    (name, call), index = kinks[0]
    assert (name, call, tuple(int(i) for i in index)) == ("relu", 0, (0, 1))


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
