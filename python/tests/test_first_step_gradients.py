"""The draws of torch's f32 rounding that the architecture sweep's
gradient check measures its noise with (first_step_gradients.py)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from first_step_gradients import (ReluCalls, f64_gradients,  # noqa: E402
                                  flipped_references, float64_copy,
                                  near_zero_relu_inputs, one_ulp_apart,
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


def test_a_flipped_relu_element_crosses_the_kink():
    """relu(x) with given elements flipped: x where x < 0, 0 where x > 0,
    the gradient passing where turned on and not where turned off; in
    place too, as torchvision's ReLU(inplace=True)."""
    for in_place in (False, True):
        x = torch.tensor([-2.0, -1.0, 1.0, 2.0], dtype=torch.float64,
                         requires_grad=True)
        with ReluCalls({0: torch.tensor([1, 2])}) as calls:
            y = torch.nn.functional.relu(x * 1.0, inplace=in_place)
        y.backward(torch.ones(4, dtype=torch.float64))
        assert y.tolist() == [0.0, -1.0, 0.0, 2.0]
        assert x.grad.tolist() == [0.0, 1.0, 0.0, 1.0]
        assert calls.inputs[0].tolist() == [-2.0, -1.0, 1.0, 2.0]


def test_near_zero_relu_inputs_are_found_and_flipped_in_float64():
    """The ReLU input f32 rounds to zero (exactly 2^-30) is the one found
    near zero, and torch's f32 run is the float64 run with it taken the
    other way: it lost that element's gradient (unit 1's weights), the
    other units' gradients stay float64's."""
    module, data = net_and_data()
    exact = float64_copy(module)
    start = {k: p.detach().double().clone()
             for k, p in module.named_parameters()}
    near = near_zero_relu_inputs(module, exact, data)
    assert {c: i.tolist() for c, i in near.items()} == {0: [1]}  # [0, 1]
    f64 = f64_gradients(exact, data, start)["fc.weight"]
    flipped, = [r["fc.weight"] for r in
                flipped_references(exact, data, start, near)]
    f32 = next(iter(torch_f32_gradients(module, data)))["fc.weight"]
    lr = 0.05  # test_torch_import.OPTIMIZERS["sgd"]["lr"]
    f32 = (start["fc.weight"] - f32.double()) / lr
    assert (f32 - f64)[1].abs().max() > 0.1  # the gradient f32 lost
    # f32 noise of the step read back through f32 weights: |w|·6e-8 / lr.
    assert torch.allclose(f32, flipped, rtol=0, atol=1e-5)
    assert torch.equal(flipped[[0, 2, 3]], f64[[0, 2, 3]])
