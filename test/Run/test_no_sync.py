"""Gradient accumulation with and without no_sync, as in PyTorch FSDP.

By default every micro-batch reduce-scatters its gradient into the sharded
gradient (more collectives, less memory); `no-sync=true` accumulates the
unsharded gradients and reduces them once after the last micro-batch. The
programs differ (collective counts, arena size) and both train like one rank
taking every rank's micro-batches (fsdp-run's sampler gives the global batch
of ranks x micro-batches either way)."""
import re
from pathlib import Path

import pytest

from conftest import program_info
from test_parity import PARAM_ATOL, compare_losses, compare_params

STEPS = 5
ACCUM = 2
# (model, strategy, ranks, optimizer)
CONFIGS = [("gpt2", "full-shard", 2, "adamw"),
           ("mlp", "hybrid-shard", 4, "sgd"),
           ("nested_wrapped", "shard-grad-op", 3, "adamw")]


def _reduce_scatters(program):
    return len(re.findall(r"call @fsdprt_reduce_scatter\(",
                          Path(program).read_text()))


def _peak(program):
    report = program_info(program)["report"]
    return int(re.search(r"live peak (\d+) bytes", report).group(1))


@pytest.mark.parametrize("config", CONFIGS,
                         ids=["-".join(map(str, c)) for c in CONFIGS])
def test_no_sync_and_default_differ_and_match_one_rank(fsdp, config):
    model, strategy, ranks, optimizer = config
    programs = {no_sync: fsdp.compile(model, world_size=ranks,
                                      strategy=strategy, optimizer=optimizer,
                                      grad_accum=ACCUM, no_sync=no_sync)
                for no_sync in (False, True)}
    units = len(program_info(programs[False])["units"])
    assert _reduce_scatters(programs[False]) == ACCUM * units
    assert _reduce_scatters(programs[True]) == units
    assert _peak(programs[False]) < _peak(programs[True])

    ref = fsdp.run(fsdp.reference(model, ranks * ACCUM, optimizer),
                   steps=STEPS, cache=True)
    for no_sync, program in programs.items():
        got = fsdp.run(program, nproc=ranks, steps=STEPS)
        what = f"{config} no_sync={no_sync}"
        problems = compare_losses(got.losses, ref.losses)
        problems += compare_params(got.params(STEPS), ref.params(STEPS),
                                   atol=PARAM_ATOL[optimizer])
        assert not problems, what + ":\n  " + "\n  ".join(problems)
