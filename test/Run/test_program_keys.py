"""The program description's keys cannot drift: what the compiler writes is
what runtime/include/fsdp/rt/ProgramKeys.def lists (the runner refuses any
other key; runtime/runner/unittests/ProgramTest.cpp checks it reads every
required one). Here, from the compiler's side: programs that between them use
every optional part of the description (clipping, dynamic loss scaling, a
schedule, eval outputs, buffers, rank-local units, post-forward groups,
Adafactor's whole state)
write only table keys,
every required key of each object they write, and every key of the table."""
import re
import subprocess
from pathlib import Path

import pytest

from fsdp_mlir import driver

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "runtime/include/fsdp/rt/ProgramKeys.def"

# Which table object each JSON object of the description is.
CHILDREN = {
    "program": {"lr_schedule": "lr_schedule", "units": "unit",
                "buffers": "buffer", "inputs": "input", "loss": "loss",
                "grad_norm": "grad_norm", "loss_scale": "loss_scale",
                "outputs": "output"},
    "unit": {"params": "param", "state": "state"},
    "param": {"init": "init"},
    "buffer": {"init": "init"},
}


def table():
    rows = re.findall(r"^FSDPRT_PROGRAM_KEY\((\w+), (\w+), (REQUIRED|OPTIONAL)\)",
                      TABLE.read_text(), re.M)
    assert len(rows) > 60, "ProgramKeys.def did not parse"
    return {(obj, key): presence for obj, key, presence in rows}


def written(description):
    """{(object, key)} the description holds, and the objects it holds."""
    keys, objects = set(), set()

    def walk(value, obj):
        objects.add(obj)
        for key, child in value.items():
            keys.add((obj, key))
            kind = CHILDREN.get(obj, {}).get(key)
            if kind is None:
                continue
            for item in child if isinstance(child, list) else [child]:
                walk(item, kind)

    walk(description, "program")
    return keys, objects


PROGRAMS = {
    # clipping (grad_norm), dynamic loss scaling, a schedule
    "gpt2-f16": ("gpt2", dict(world_size=2, param_dtype="f16",
                              loss_scale="dynamic", clip_grad_norm=1.0,
                              lr_schedule="cosine", warmup_steps=2)),
    # an eval program's outputs
    "gpt2-eval": ("gpt2", dict(world_size=2, mode="eval")),
    # Adafactor's whole (replicated) state: its numel
    "gpt2-adafactor": ("gpt2", dict(world_size=2, optimizer="adafactor")),
    # hand-marked units, a rank-local one among them
    "nested": ("nested_wrapped", dict(world_size=2, auto_wrap_policy="none")),
}


# BatchNorm's running statistics: buffers.
BATCH_NORM = ROOT / "test/Conversion/convert-fsdp-to-rt-batch-norm.mlir"


@pytest.fixture(scope="module")
def descriptions(fsdp, tmp_path_factory):
    out = {name: driver.program_info(fsdp.compile(model, **kw))
           for name, (model, kw) in PROGRAMS.items()}
    lowered = tmp_path_factory.mktemp("keys") / "batch_norm.mlir"
    subprocess.run([str(fsdp.opt), str(BATCH_NORM),
                    "--fsdp-pipeline=world-size=1 sharding-strategy=no-shard "
                    "optimizer=sgd grad-accum-steps=2",
                    "--convert-fsdp-to-rt", "-o", str(lowered)],
                   check=True, capture_output=True, timeout=300)
    out["batch-norm"] = driver.program_info(lowered)
    # reshard_after_forward = 2 at 4 ranks: the post-forward groups.
    pairs = (ROOT / "examples/nested_wrapped.mlir").read_text().replace(
        'fsdp.module @"2" kind "Linear" unit {',
        'fsdp.module @"2" kind "Linear" unit<reshard_after_forward = 2> {')
    out["pairs"] = driver.program_info(driver.compile(
        pairs, tmp_path_factory.mktemp("keys") / "pairs.mlir", world_size=4,
        auto_wrap_policy="none"))
    assert out["pairs"]["post_forward_group"] == 2
    return out


def test_the_compiler_writes_only_table_keys_and_every_required_one(
        descriptions):
    rows = table()
    for name, description in descriptions.items():
        keys, objects = written(description)
        assert keys <= set(rows), (name, sorted(keys - set(rows)))
        missing = {(o, k) for (o, k), p in rows.items()
                   if p == "REQUIRED" and o in objects} - keys
        assert not missing, (name, sorted(missing))


def test_every_key_of_the_table_is_written_by_some_program(descriptions):
    seen = set()
    for description in descriptions.values():
        seen |= written(description)[0]
    # ignore_id: only with a cross-entropy ignore_index (masked-LM labels),
    # which the example models do not have; ProgramTest reads it.
    unwritten = set(table()) - seen - {("input", "ignore_id")}
    assert not unwritten, sorted(unwritten)
