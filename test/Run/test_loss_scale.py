"""Dynamic loss scaling (loss-scale=dynamic) as torch.amp.GradScaler.

In f32 a power-of-two scale changes nothing, bit for bit. In f16 the first
step overflows (2^16 times the loss cotangent is past f16's 65504), is
skipped on every rank and the scale backs off; the scale then follows
GradScaler's rule (checked against a replica of it, from the skip flags the
run reports), skipped steps leave the weights as they were, the others train,
and a resumed run continues the scaler where it stopped."""
import math

import numpy as np
import pytest

STEPS = 4


def _program(fsdp, **kw):
    return fsdp.compile("gpt2", world_size=2, optimizer="adamw", **kw)


def test_f32_scaling_changes_nothing(fsdp):
    plain = fsdp.run(_program(fsdp, clip_grad_norm=1.0), nproc=2, steps=STEPS)
    scaled = fsdp.run(_program(fsdp, clip_grad_norm=1.0, loss_scale="dynamic"),
                      nproc=2, steps=STEPS)
    assert scaled.losses == plain.losses
    assert [m["grad_norm"] for m in scaled.metrics] == \
        [m["grad_norm"] for m in plain.metrics]
    a, b = scaled.params(STEPS), plain.params(STEPS)
    for name in b:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert [(m["loss_scale"], m["skipped"]) for m in scaled.metrics] == \
        [(65536.0, False)] * STEPS
    assert "loss_scale" not in plain.metrics[0]


def _replay_grad_scaler(metrics, interval, init=65536.0):
    """The scale of every step by GradScaler.update()'s rule, given which
    steps were skipped."""
    scale, good, scales = init, 0, []
    for m in metrics:
        scales.append(scale)
        if m["skipped"]:
            scale, good = scale * 0.5, 0
        else:
            good += 1
            if good == interval:
                scale, good = scale * 2.0, 0
    return scales


@pytest.fixture(scope="module")
def f16(fsdp):
    return _program(fsdp, param_dtype="f16", loss_scale="dynamic", lr=1e-2)


def test_f16_overflow_skips_and_recovers(fsdp, f16):
    run = fsdp.run(f16, nproc=2, steps=12,
                   extra_args=["--loss-scale-growth-interval", "4"])
    m = run.metrics
    assert m[0]["skipped"], "2^16 x the loss cotangent must overflow f16"
    assert [r["loss_scale"] for r in m] == _replay_grad_scaler(m, 4)
    assert [r["skipped_steps"] for r in m] == \
        list(np.cumsum([r["skipped"] for r in m]))
    assert 1 < m[-1]["skipped_steps"] < len(m)
    assert all(math.isfinite(r["loss"]) for r in m)
    # The steps that were not skipped trained (the data is random tokens,
    # so the loss itself stays near ln 64).
    initial = fsdp.run(f16, nproc=2, steps=0).params(0)
    trained = run.params(12)
    assert all(np.all(np.isfinite(v)) for v in trained.values())
    assert any(not np.array_equal(trained[n], initial[n]) for n in initial)


def test_a_skipped_step_leaves_the_weights(fsdp, f16):
    initial = fsdp.run(f16, nproc=2, steps=0).params(0)
    after = fsdp.run(f16, nproc=2, steps=1)
    assert after.metrics[0]["skipped"]
    for name, value in after.params(1).items():
        np.testing.assert_array_equal(value, initial[name], err_msg=name)


def test_resume_continues_the_scaler(fsdp, f16):
    args = ["--loss-scale-growth-interval", "2"]
    whole = fsdp.run(f16, nproc=2, steps=8, extra_args=args)
    first = fsdp.run(f16, nproc=2, steps=4, extra_args=args)
    rest = fsdp.run(f16, nproc=2, steps=8, extra_args=args,
                    load=first.save_dir / "step-4.safetensors")
    assert rest.losses == whole.losses[4:]
    assert [(r["loss_scale"], r["skipped_steps"]) for r in rest.metrics] == \
        [(r["loss_scale"], r["skipped_steps"]) for r in whole.metrics[4:]]


def test_scaler_options_need_a_scaled_program(fsdp):
    run = fsdp.run(_program(fsdp), nproc=2, steps=1, check=False,
                   extra_args=["--loss-scale-init", "1024"])
    assert run.returncode != 0
    assert "need a program compiled with loss-scale=dynamic" in run.stderr
