"""memory-budget=: the compiler chooses what each unit recomputes.

On the GPT-2 test model (dropout 0.1) at 2 CPU ranks, with a budget halfway
between the plain program's planned peak and whole-unit checkpointing's:
the report names a choice whose arena plan (a lowered program's budget
bounds the arena the runtime allocates) fits, the measured arena peak of
every rank stays within it, and training is bit-identical to the same
per-unit policies marked by hand (recomputation changes no number)."""
import re
import subprocess
import sys

import pytest

from conftest import EXAMPLES, REPO_ROOT, program_info

sys.path.insert(0, str(REPO_ROOT / "python"))
from fsdp_mlir import driver, models  # noqa: E402

STEPS = 3
OPTIONS = ("world-size=2 optimizer=adamw lr=3e-3 lower=true report=true")
MARKS = {"none": "unit", "selective": "unit<activation_checkpointing = "
         "selective>", "whole unit": "unit<activation_checkpointing = true>"}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("budget") / "gpt2_dropout.mlir"
    path.write_text(models.build("gpt2", dropout=0.1).text())
    return path


def compile(fsdp_opt, source, out, options):
    proc = subprocess.run([str(fsdp_opt), str(source),
                           f"--fsdp-pipeline={OPTIONS} {options}", "-o",
                           str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    peak = int(re.search(r"peak memory per rank: (\d+) bytes",
                         proc.stdout).group(1))
    return out, peak, proc.stdout


def choice_of(report):
    """{unit: policy} from the budget's lines of the report."""
    return dict(re.findall(r"^  recompute (\S+): (none|selective|whole unit)$",
                           report, re.M))


def marked_by_hand(source, choice, out):
    """`source` with every unit marked as `choice` says (auto-wrap none)."""
    text = source.read_text()
    for unit, policy in choice.items():
        name = unit.split(".")[-1] if unit != "(root)" else "root"
        pattern = (r'(fsdp\.module @"?' + re.escape(name) +
                   r'"? kind "\w+") \{')
        text, count = re.subn(pattern, r"\1 " + MARKS[policy] + " {", text,
                              count=1)
        assert count == 1, unit
    out.write_text(text)
    return out


def test_budget_run_fits_and_equals_hand_marked_units(fsdp, fsdp_opt, model,
                                                      tmp_path):
    wrap = "auto-wrap-policy=module-kind wrap-kinds=Block"
    _, plain, _ = compile(fsdp_opt, model, tmp_path / "plain.mlir", wrap)
    _, whole, _ = compile(fsdp_opt, model, tmp_path / "whole.mlir",
                          wrap + " activation-checkpointing=Block")
    budget = (plain + whole) // 2
    program, planned, report = compile(
        fsdp_opt, model, tmp_path / "budget.mlir",
        f"{wrap} memory-budget={budget}")
    choice = choice_of(report)
    arena = int(re.search(r"arena plan (\d+) bytes", report).group(1))
    print(f"plain {plain}, whole unit {whole}, budget {budget}, planned "
          f"{planned}, arena plan {arena}, choice {choice}")
    assert planned <= arena <= budget < plain
    assert f"memory budget: {budget} bytes" in report
    assert set(choice.values()) != {"none"}, choice

    hand = marked_by_hand(model, choice, tmp_path / "hand_source.mlir")
    by_hand, hand_peak, _ = compile(fsdp_opt, hand, tmp_path / "hand.mlir",
                                    "auto-wrap-policy=none")
    assert hand_peak == planned

    runs = [fsdp.run(p, nproc=2, steps=STEPS, seed=2)
            for p in (program, by_hand)]
    assert runs[0].losses == runs[1].losses
    measured = max(m["peak_bytes"] for m in runs[0].metrics)
    print(f"measured arena peak {measured} (arena plan {arena}, budget "
          f"{budget})")
    assert measured <= arena <= budget, (measured, arena, budget)


def test_python_compile_passes_the_budget(fsdp_opt, tmp_path, monkeypatch,
                                          capsys):
    """compile(..., memory_budget="20MiB"): the pipeline option, whose
    choice the report names and whose arena plan fits."""
    monkeypatch.setenv("FSDP_OPT", str(fsdp_opt))
    program = driver.compile(EXAMPLES / "char_gpt.mlir",
                             tmp_path / "char_gpt.mlir", world_size=2,
                             wrap_kinds="Block", memory_budget="20MiB",
                             report=True)
    report = capsys.readouterr().out
    assert "memory budget: 20971520 bytes (20.00 MiB)" in report
    assert re.search(r"recompute transformer\.h\.\d: (selective|whole unit)",
                     report)
    assert program_info(program)["estimate_bytes"] <= 20 * 2**20
