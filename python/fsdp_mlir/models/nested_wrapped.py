"""NestedWrappedModule of PyTorch's FSDP tests
(torch/testing/_internal/common_fsdp.py) and its always-wrap variant."""

from __future__ import annotations

from ..ir import Model, Module, tensor
from .layers import linear, sequential


def _tree(batch: int, always: bool) -> Module:
    #   nn.Sequential(Linear(8, 4),
    #                 wrap(nn.Sequential(wrap(Linear(4, 16)), Linear(16, 16))),
    #                 wrap(Linear(16, 4)),
    #                 Linear(4, 8))
    act = [batch]
    inner = sequential("1", [linear("0", 4, 16, act, unit=True),
                             linear("1", 16, 16, act, unit=always)],
                       unit=True)
    module = sequential("module", [linear("0", 8, 4, act, unit=always),
                                   inner,
                                   linear("2", 16, 4, act, unit=True),
                                   linear("3", 4, 8, act, unit=always)],
                        unit=always)
    root = Module("root", "NestedWrappedModule", unit=True)
    root.add(module)
    f = root.forward(tensor(batch, 8))
    y = f.call(module, f.args[0], name="y")  # the loss: output.sum()
    f.ret(f.reduce_sum(y, [0, 1], name="loss"))
    return root


def nested_wrapped(batch: int = 4, name: str = "nested_wrapped") -> Model:
    """NestedWrappedModule with its manual wrapping plus the root FSDP that
    _test_fsdp_parity adds: 4 units, 496 parameters; loss output.sum()."""
    root = _tree(batch, always=False)
    header = ["NestedWrappedModule of PyTorch's FSDP tests "
              "(torch/testing/_internal/common_fsdp.py)",
              "with its manual wrapping and a root unit: 4 units, "
              f"{root.num_params()} parameters.",
              f"Input: a ({batch}, 8) batch; loss: output.sum(). "
              "Initializers are nn.Linear's defaults."]
    return Model(name, root, header)


def always_wrap_nested_wrapped(batch: int = 4,
                               name: str = "always_wrap_nested_wrapped"
                               ) -> Model:
    """AlwaysWrapNestedWrappedModule: the same tree wrapped with
    always_wrap_policy, so every module (containers included) is a unit."""
    root = _tree(batch, always=True)
    header = ["AlwaysWrapNestedWrappedModule of PyTorch's FSDP tests: "
              "NestedWrappedModule",
              "with always_wrap_policy, every module an FSDP unit "
              f"(8 units, {root.num_params()} parameters).",
              f"Input: a ({batch}, 8) batch; loss: output.sum(). "
              "Initializers are nn.Linear's defaults."]
    return Model(name, root, header)


def mixture_of_experts(batch: int = 4, name: str = "mixture_of_experts"
                       ) -> Model:
    """MixtureOfExperts of PyTorch's FSDP tests: NestedWrappedModule's input
    and loss around Sequential(Linear(8, 12), shared, expert, Linear(12, 8)),
    shared = Linear(12, 23) its own unit, expert = Linear(23, 12) a
    rank-local unit (FSDP(expert, new_group([rank])): different on every
    rank, gradient not reduced); the root owns module.0 and module.3.
    3 units, 799 parameters."""
    act = [batch]
    expert = linear("2", 23, 12, act)
    expert.unit = expert.rank_local = True
    module = sequential("module", [linear("0", 8, 12, act),
                                   linear("1", 12, 23, act, unit=True),
                                   expert,
                                   linear("3", 12, 8, act)])
    root = Module("root", "MixtureOfExperts", unit=True)
    root.add(module)
    f = root.forward(tensor(batch, 8))
    y = f.call(module, f.args[0], name="y")  # the loss: output.sum()
    f.ret(f.reduce_sum(y, [0, 1], name="loss"))
    header = ["MixtureOfExperts of PyTorch's FSDP tests "
              "(torch/testing/_internal/common_fsdp.py): 3 units, "
              f"{root.num_params()} parameters.",
              "module.1 (shared, Linear(12, 23)) is a unit; module.2 (the "
              "expert, Linear(23, 12)) a rank-local unit: whole on every "
              "rank, initialised per rank, its gradient not reduced (PyTorch: "
              "FSDP(expert, process_group=new_group([rank]))). The root holds "
              "module.0 and module.3.",
              f"Input: a ({batch}, 8) batch; loss: output.sum(). "
              "Initializers are nn.Linear's defaults."]
    return Model(name, root, header)
