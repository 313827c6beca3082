"""CPU offload (fsdp-pipeline cpu-offload, PyTorch FSDP's
CPUOffload(offload_params=True)): sharded parameters, reduced gradients and
optimizer state live in a host buffer, the optimizer runs on a host stream,
copies move shards to the device before their all-gathers and gradients to
the host after their reduction. On the CPU backend the same schedule runs
with host copies, so an offloaded run must give exactly the checkpoints of
the same program without offload (the same kernels in the same order),
under delay injection too (a missing dependency between the copy streams,
the collectives and the host optimizer would lose the race), and the arena
(device memory) must shrink by the parameter shards and optimizer state."""
import pytest

from conftest import load_full, program_info

STEPS = 4
# (model, strategy, ranks, optimizer, extra pipeline options)
CONFIGS = [("nested_wrapped", "full-shard", 2, "adamw", {}),
           ("gpt2", "full-shard", 2, "sgd",
            {"grad_accum": 2, "clip_grad_norm": 1.0}),
           ("gpt2", "shard-grad-op", 2, "adamw", {"param_dtype": "bf16"}),
           ("mlp", "hybrid-shard", 4, "adamw", {}),
           ("mlp", "full-shard", 1, "adamw", {})]
DELAYS = {"FSDPRT_DELAY_OFFLOAD_MS": "2", "FSDPRT_DELAY_OPTIMIZER_MS": "2"}


def _offloaded_bytes(info, ranks):
    """The device bytes offload saves: the optimizer state, and on more
    than one rank the parameter shards (one rank computes on the whole
    flat parameter, copied to the device for the step)."""
    return sum(u["shard_numel"] * 4 * (len(u["state"]) + (ranks > 1))
               for u in info["units"])


@pytest.mark.parametrize("config", CONFIGS,
                         ids=["-".join(map(str, c[:4])) for c in CONFIGS])
def test_offload_equals_the_device_resident_run(fsdp, config):
    model, strategy, ranks, optimizer, extra = config
    programs = {offload: fsdp.compile(model, world_size=ranks,
                                      strategy=strategy, optimizer=optimizer,
                                      cpu_offload=offload or None, **extra)
                for offload in (False, True)}
    plain, offloaded = (program_info(programs[o]) for o in (False, True))
    assert not plain["cpu_offload"] and offloaded["cpu_offload"]
    assert offloaded["arena_bytes"] <= (plain["arena_bytes"]
                                        - _offloaded_bytes(plain, ranks))
    assert offloaded["host_bytes"] >= _offloaded_bytes(plain, 2)
    assert "cpu offload: host memory per rank" in offloaded["report"]

    ref = fsdp.run(programs[False], nproc=ranks, steps=STEPS)
    for env in (None, DELAYS):
        got = fsdp.run(programs[True], nproc=ranks, steps=STEPS, env=env)
        assert got.losses == ref.losses, env
        want, have = (load_full(r.checkpoint(STEPS)) for r in (ref, got))
        assert want.keys() == have.keys()
        for name in want:
            assert (want[name] == have[name]).all(), (name, env)


def test_offloaded_sharded_checkpoint_resumes_either_way(fsdp):
    """A sharded checkpoint of an offloaded run (read from the host buffer)
    resumes an offloaded and a device-resident run alike."""
    programs = {o: fsdp.compile("gpt2", world_size=2, optimizer="adamw",
                                cpu_offload=o or None) for o in (False, True)}
    whole = fsdp.run(programs[False], nproc=2, steps=STEPS)
    half = fsdp.run(programs[True], nproc=2, steps=STEPS // 2,
                    save_format="sharded")
    for program in programs.values():
        resumed = fsdp.run(program, nproc=2, steps=STEPS,
                           load=half.checkpoint(STEPS // 2).with_suffix(""))
        want, have = (load_full(r.checkpoint(STEPS))
                      for r in (whole, resumed))
        for name in want:
            assert (want[name] == have[name]).all(), (name, program)
