"""Loss functions as users write them, imported and trained like torch:
cross_entropy with label smoothing, class weights, ignore_index and no
reduction, of class indices or class probabilities (the K-dimensional
form too), nll_loss of log_softmax (class weights, no reduction, the
K-dimensional form), distillation's KL divergence, binary
cross-entropy (with logits and pos_weight, and of probabilities), the
robust regression and margin losses, losses over F.one_hot targets,
transformers' LabelSmoother and timm's label-smoothing and soft-target
cross-entropies; and the element-wise ops losses and quantisers are built
from: sign, round (halves to even) under a straight-through estimator,
clamp by tensor bounds (the gradient reaching the bound taken), argmax and
a cat of its indices, max / min of a whole tensor, log2 / exp2 /
reciprocal, var_mean, bucketize (values on the boundaries), sort (either
order) and topk of the smallest, their values' gradient scattered back,
cdist (p = 2 and 1). Each model trains 2 ranks × STEPS steps of SGD with
momentum and is compared with plain torch on the same batches: the losses
within test_torch_import's LOSS_RTOL and every weight and momentum buffer
at the parity suite's bounds (assert_state_matches).

Run: PYTHONPATH=python:python/tests python3 -m pytest -q \
    python/tests/test_loss_import.py
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
F = torch.nn.functional

from fsdp_mlir import from_torch  # noqa: E402
from test_torch_import import (LOSS_RTOL, NUM_SAMPLES, PER_RANK,  # noqa: E402
                               emulated_cuda, torch_losses, train_imported)
from test_torch_oracle import assert_state_matches  # noqa: E402

CLASSES, FEATURES, LENGTH = 5, 8, 6
RANKS = 2


class Classifier(torch.nn.Module):
    """A two-layer classifier whose logits (over the last dim) `loss`
    reads with the batch's other inputs."""

    def __init__(self, loss, classes=CLASSES):
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, 16)
        self.fc2 = torch.nn.Linear(16, classes)
        self.loss = loss
        self.register_buffer("class_weight",
                             torch.tensor([1.0, 2.5, 0.5, 1.0, 3.0]))

    def forward(self, x, *targets):
        logits = self.fc2(F.gelu(self.fc1(x)))
        return self.loss(self, logits, *targets)


def features(rng, *shape):
    return rng.standard_normal((NUM_SAMPLES, *shape, FEATURES)).astype(
        np.float32)


def labels(rng, *shape, ignored=0.0):
    """Class ids, a fraction `ignored` of them -100; each rank's first
    sample keeps its first label, so no batch is all ignored (torch's mean
    is then 0/0)."""
    y = rng.integers(0, CLASSES, (NUM_SAMPLES, *shape))
    y = np.where(rng.random(y.shape) < ignored, -100, y)
    y.reshape(NUM_SAMPLES, -1)[:, 0] = rng.integers(0, CLASSES, NUM_SAMPLES)
    return y.astype(np.int64)


def classified(ignored=0.0):
    return lambda rng: [features(rng), labels(rng, ignored=ignored)]


def per_position(rng):
    """[N, L] labels of [N, L, F] features (a tagger or a segmenter)."""
    return [features(rng, LENGTH), labels(rng, LENGTH, ignored=0.25)]


def multi_hot(rng):
    """Multi-label targets: each class present with probability 0.4."""
    return [features(rng),
            (rng.random((NUM_SAMPLES, CLASSES)) < 0.4).astype(np.float32)]


def regression(rng):
    return [features(rng),
            2 * rng.standard_normal((NUM_SAMPLES, CLASSES)).astype(
                np.float32)]


def halves(rng):
    """Multiples of 1/2 in [-3, 3]: round's ties and bucketize's
    boundaries."""
    return [features(rng), (rng.integers(-6, 7, (NUM_SAMPLES, CLASSES))
                            / 2).astype(np.float32)]


def straight_through_round(m, z, y):
    """Quantisation-aware training's rounding: round(z) forward, z's
    gradient backward; and round of the data's ties, times z."""
    quantised = z + (torch.round(4 * z) / 4 - z).detach()
    return F.mse_loss(quantised, y) + (torch.round(y) * z).mean()


def clamp_by_tensors(m, z, y):
    """Bounds computed from the parameters: where z leaves [low, high]
    the gradient reaches the bound (the row's mean) instead."""
    centre = z.mean(-1, keepdim=True)
    return torch.clamp(z, min=centre - 0.3, max=centre + y.abs()).pow(
        2).mean()


def soft_targets(rng):
    """Mixup's targets: two one-hot labels mixed by λ ~ U(0, 1)."""
    a, b = (np.eye(CLASSES, dtype=np.float32)[rng.integers(0, CLASSES,
                                                           NUM_SAMPLES)]
            for _ in range(2))
    lam = rng.random((NUM_SAMPLES, 1)).astype(np.float32)
    return [features(rng), lam * a + (1 - lam) * b]


def sample_weighted(rng):
    return [features(rng), labels(rng, ignored=0.2),
            rng.random(NUM_SAMPLES).astype(np.float32)]


def distillation(m, z, y, temperature=2.0):
    """Hinton et al.'s distillation: KL(teacher ‖ student) of the softened
    distributions (batchmean, times T²) plus the hard-label loss. The
    teacher is the student's own logits at another temperature, detached."""
    student = F.log_softmax(z / temperature, dim=-1)
    teacher = F.softmax(z.detach() * 1.5 / temperature, dim=-1)
    return (F.kl_div(student, teacher, reduction="batchmean")
            * temperature ** 2 + F.cross_entropy(z, y))


def _hf_label_smoother(m, z, y):
    """transformers' Trainer with label_smoothing_factor: LabelSmoother
    over per-token logits, -100 labels clamped to 0 and masked out."""
    from transformers.trainer_pt_utils import LabelSmoother
    return LabelSmoother(epsilon=0.1)({"logits": z}, y)


def _timm_loss(name, **kw):
    timm_loss = pytest.importorskip("timm.loss")
    loss = getattr(timm_loss, name)(**kw)
    return lambda m, z, y: loss(z, y)


CASES = {
    "label_smoothing": (
        lambda m, z, y: F.cross_entropy(z, y, label_smoothing=0.1),
        classified()),
    "class_weights": (
        lambda m, z, y: F.cross_entropy(z, y, weight=m.class_weight),
        classified(ignored=0.2)),
    "class_weights_label_smoothing": (
        lambda m, z, y: F.cross_entropy(z, y, weight=m.class_weight,
                                        label_smoothing=0.2),
        classified(ignored=0.2)),
    # ignore_index a class id: its targets count for nothing.
    "ignore_a_class": (
        lambda m, z, y: F.cross_entropy(z, y, ignore_index=2,
                                        label_smoothing=0.1),
        classified()),
    "sum_label_smoothing": (
        lambda m, z, y: F.cross_entropy(z, y, reduction="sum",
                                        label_smoothing=0.05) / 4,
        classified(ignored=0.2)),
    "per_sample_weights": (
        lambda m, z, y, w: (F.cross_entropy(z, y, reduction="none")
                            * w).mean(),
        sample_weighted),
    # The K-dimensional form: logits [N, C, L], targets [N, L].
    "per_position_weights_smoothing": (
        lambda m, z, y: F.cross_entropy(z.transpose(1, 2), y,
                                        weight=m.class_weight,
                                        label_smoothing=0.1),
        per_position),
    "hf_label_smoother": (_hf_label_smoother, per_position),
    # Mixup's targets as torchvision's references train them: class
    # probabilities, smoothed and weighted; and per position (K-dim).
    "probability_targets": (
        lambda m, z, y: F.cross_entropy(z, y, label_smoothing=0.1,
                                        weight=m.class_weight),
        soft_targets),
    "probability_targets_per_position": (
        lambda m, z, y: F.cross_entropy(
            z.transpose(1, 2), F.softmax(3 * y[..., :CLASSES], -1)
            .transpose(1, 2), reduction="sum") / 10,
        lambda rng: [features(rng, LENGTH), rng.standard_normal(
            (NUM_SAMPLES, LENGTH, CLASSES)).astype(np.float32)]),
    "nll_of_log_softmax": (
        lambda m, z, y: F.nll_loss(F.log_softmax(z, dim=-1), y),
        classified(ignored=0.2)),
    # nll_loss picks each target's log-probability (torch's
    # decomposition): class weights, no reduction, ignored targets, and
    # the K-dimensional form.
    "nll_weighted_and_unreduced": (
        lambda m, z, y: F.nll_loss(F.log_softmax(z, dim=-1), y,
                                   weight=m.class_weight)
        + F.nll_loss(F.log_softmax(z, dim=-1), y, reduction="none").mean(),
        classified(ignored=0.2)),
    "nll_per_position": (
        lambda m, z, y: F.nll_loss(F.log_softmax(z, dim=-1).transpose(1, 2),
                                   y, weight=m.class_weight,
                                   reduction="sum") / 10,
        per_position),
    "distillation_kl_div": (distillation, classified()),
    "bce_with_logits_pos_weight": (
        lambda m, z, y: F.binary_cross_entropy_with_logits(
            z, y, pos_weight=m.class_weight), multi_hot),
    "binary_cross_entropy": (
        lambda m, z, y: F.binary_cross_entropy(torch.sigmoid(z), y),
        multi_hot),
    "smooth_l1": (lambda m, z, y: F.smooth_l1_loss(z, y, beta=0.5),
                  regression),
    "huber": (lambda m, z, y: F.huber_loss(z, y, delta=0.7), regression),
    "l1": (lambda m, z, y: F.l1_loss(z, y), regression),
    "soft_margin_of_signs": (
        lambda m, z, y: F.soft_margin_loss(z, torch.sign(y)), regression),
    "multi_margin": (lambda m, z, y: F.multi_margin_loss(z, y),
                     classified()),
    # F.one_hot checks its labels' range (torch.all of a comparison): here
    # the argmax's, so nn.id_range bounds a computed value, not an input.
    "argmax_picked": (
        lambda m, z, y: (z * F.one_hot(z.argmax(-1), CLASSES)).sum(-1).mean()
        + z.argmin(-1).float().mean() * z.mean(), classified()),
    # The extremes' positions concatenated (an integer cat, as PhiMoE's
    # chosen experts) and gathered: the gradient reaches those entries.
    "cat_of_indices": (
        lambda m, z, y: torch.gather(z, -1, torch.cat(
            [z.argmax(-1, keepdim=True), z.argmin(-1, keepdim=True)],
            -1)).pow(2).mean(), classified()),
    "whole_tensor_max_min": (
        lambda m, z, y: z.max() - 2 * z.min() + (z - y).abs().max(),
        regression),
    "log2_exp2_reciprocal": (
        lambda m, z, y: (torch.log2(z.abs() + 1) + torch.exp2(0.5 * z)
                         + torch.reciprocal(z.abs() + 1) - y).pow(2).mean(),
        regression),
    "var_mean": (
        lambda m, z, y: sum(v.mean() for v in torch.var_mean(z - y, -1)),
        regression),
    "bucketize": (
        lambda m, z, y: (z * torch.bucketize(y, torch.tensor(
            [-1.0, 0.0, 0.5, 2.0]))).mean() + (z * torch.bucketize(
                y, torch.tensor([-1.0, 0.0, 0.5, 2.0]), right=True)).mean(),
        halves),
    # Sorted values carry their gradient back to where they came from.
    "sorted_values": (
        lambda m, z, y: ((torch.sort(z - y, descending=True).values
                          - torch.sort(z * y).values)
                         * torch.arange(1.0, CLASSES + 1)).mean(),
        regression),
    "topk_smallest": (
        lambda m, z, y: (z - y).topk(2, largest=False).values.pow(2).mean(),
        regression),
    # Prototypes: each sample's distance to every class prototype (5
    # columns of fc2's weight), p = 2 and 1 (torch's cdist for small
    # inputs), and to every sample of the batch, itself included: distance
    # 0, where the gradient is 0, not NaN.
    "cdist_prototypes": (
        lambda m, z, y: F.cross_entropy(
            -torch.cdist(z, m.fc2.weight[:, :5])
            - 0.1 * torch.cdist(z, m.fc2.weight[:, 5:10], p=1)
            - torch.cdist(z, z.detach()).mean(-1, keepdim=True), y),
        classified()),
    "round_straight_through": (straight_through_round, halves),
    "clamp_by_tensors": (clamp_by_tensors, regression),
    "mse_of_one_hot": (
        lambda m, z, y: F.mse_loss(F.softmax(z, dim=-1),
                                   F.one_hot(y, CLASSES).float()),
        classified()),
    # Labels computed in the step (the classes in reverse order): their
    # range is checked where one_hot, the weighted cross-entropy and
    # gather read them, not as the batch loads.
    "one_hot_of_computed_labels": (
        lambda m, z, y: F.mse_loss(F.softmax(z, dim=-1),
                                   F.one_hot(CLASSES - 1 - y, CLASSES).float()),
        classified()),
    "weighted_cross_entropy_of_computed_labels": (
        lambda m, z, y: F.cross_entropy(z, CLASSES - 1 - y,
                                        weight=m.class_weight),
        classified()),
    "multi_margin_of_computed_labels": (
        lambda m, z, y: F.multi_margin_loss(z, CLASSES - 1 - y),
        classified()),
    # Advanced indexing by labels beside a constant arange (a policy
    # gradient's log_probs[arange(N), actions]); negative labels count from
    # the end; per position with two broadcast aranges; a sliced dimension
    # between two indexed ones (torch puts the indices' shape first).
    "picked_by_arange_and_labels": (
        lambda m, z, y: -F.log_softmax(z, -1)[torch.arange(z.shape[0]),
                                              y].mean(),
        classified()),
    "picked_by_negative_labels": (
        lambda m, z, y: -F.log_softmax(z, -1)[torch.arange(z.shape[0]),
                                              y - CLASSES].mean(),
        classified()),
    "picked_per_position": (
        lambda m, z, y: -F.log_softmax(z, -1)[
            torch.arange(z.shape[0])[:, None], torch.arange(LENGTH),
            y.clamp(min=0)].mean(),
        per_position),
    "picked_across_a_sliced_dimension": (
        lambda m, z, y: (F.log_softmax(z, -1)[
            torch.arange(z.shape[0]), :, y[:, 0].clamp(min=0)]
            * torch.linspace(-1, 1, LENGTH)).sum(),
        per_position),
    "timm_label_smoothing": (
        _timm_loss("LabelSmoothingCrossEntropy", smoothing=0.1),
        classified()),
    "timm_soft_target": (_timm_loss("SoftTargetCrossEntropy"),
                         soft_targets),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loss_trains_like_torch(tmp_path, case):
    trains_like_torch(tmp_path, case)


@pytest.mark.parametrize("case", ["class_weights_label_smoothing",
                                  "distillation_kl_div"])
def test_loss_trains_like_torch_on_emulated_cuda(tmp_path, case):
    """The CUDA backend's kernels (on the host emulation) for the ops the
    losses are built from: log_softmax's max, exp, sums and masks."""
    trains_like_torch(tmp_path, case, runner=emulated_cuda())


def imported_case(case):
    """The case's classifier (seeded), imported, and its data."""
    loss, make_data = CASES[case]
    torch.manual_seed(0)
    module = Classifier(loss)
    data = make_data(np.random.default_rng(3))
    model = from_torch(module, [torch.from_numpy(d[:PER_RANK])
                                for d in data])
    return module, model, data


def trains_like_torch(tmp_path, case, runner=None):
    module, model, data = imported_case(case)
    got, saved = train_imported(tmp_path, module, model, data, RANKS, "sgd",
                                runner=runner)
    want = torch_losses(module, data, RANKS, "sgd")
    for a, b in zip(got, want, strict=True):
        assert math.isclose(a, b, rel_tol=LOSS_RTOL, abs_tol=1e-6), (got,
                                                                     want)
    assert_state_matches(saved, {n: p.detach().numpy()
                                 for n, p in module.named_parameters()})


def test_cross_entropy_of_indices_without_weights_stays_fused():
    """The fused nn.cross_entropy (one kernel, no [N, C] one-hot; a target
    out of range reported) serves cross_entropy of class indices, mean or
    sum, without class weights, label smoothing adding its term beside it;
    class weights take torch's formula over log_softmax."""
    data = classified()(np.random.default_rng(3))
    example = [torch.from_numpy(d[:PER_RANK]) for d in data]

    def imported(loss):
        return from_torch(Classifier(loss), example).text()
    plain = imported(lambda m, z, y: F.cross_entropy(z, y))
    smoothed = imported(CASES["label_smoothing"][0])
    weighted = imported(CASES["class_weights"][0])
    assert plain.count("nn.cross_entropy") == 1 and "nn.exp" not in plain
    assert smoothed.count("nn.cross_entropy") == 1 and "nn.exp" in smoothed
    assert "nn.cross_entropy" not in weighted and "nn.exp" in weighted


def torch_refuses_label(case, bad):
    """The case's classifier, imported, and its data with label 5 set to
    `bad`, which torch's own forward refuses."""
    module, model, data = imported_case(case)
    data[1][5] = bad
    with pytest.raises((IndexError, RuntimeError)):
        module(*map(torch.from_numpy, data))
    return module, model, data


@pytest.mark.parametrize("case, bad, ignored", [
    # The fused nn.cross_entropy's targets.
    ("label_smoothing", CLASSES + 2, " and not the ignore_index -100"),
    # The one-hot of the composite cross-entropy (class weights; no
    # reduction) and F.one_hot's labels, through nn.id_range.
    ("class_weights", CLASSES + 2, " and not the ignore_index -100"),
    ("per_sample_weights", -3, " and not the ignore_index -100"),
    ("mse_of_one_hot", CLASSES, ""),
    ("nll_of_log_softmax", CLASSES + 2, " and not the ignore_index -100"),
    # torch.gather by the labels (the margin loss picks each label's logit).
    ("multi_margin", CLASSES + 2, "")])
def test_out_of_range_target_is_reported(tmp_path, case, bad, ignored):
    """A class index outside the logits stops the run before its first
    step, as torch raises, whichever way the loss reads it: fsdp-run
    checks the targets as it loads them. Without the check the one-hot
    forms would count such a target as ignored."""
    module, model, data = torch_refuses_label(case, bad)
    with pytest.raises(Exception, match=rf"holds id {bad} at element 5, "
                       rf"outside \[0, 5\)") as refusal:
        train_imported(tmp_path, module, model, data, RANKS, "sgd")
    assert (ignored in str(refusal.value)) and (
        ignored or "ignore_index" not in str(refusal.value))


@pytest.mark.parametrize("case, backend, bad", [
    ("one_hot_of_computed_labels", "cpu", -1),
    ("one_hot_of_computed_labels", "cuda_emu", -1),
    ("weighted_cross_entropy_of_computed_labels", "cpu", -1),
    ("multi_margin_of_computed_labels", "cpu", -1),
    ("picked_by_arange_and_labels", "cpu", CLASSES)])
def test_out_of_range_computed_label_stops_the_step(tmp_path, case, backend,
                                                   bad):
    """A label computed in the step (CLASSES - 1 - y, out of range for a
    -1 in the data; an index torch reads from the end when negative, out
    of range at CLASSES), which no loader check sees, stops the run at its
    first step, as torch raises, naming the line that reads it; on the
    CUDA emulation the device's verdict is read at the step's end. The
    other rank exits with an error too (the runner's failing-rank rule)."""
    module, model, data = torch_refuses_label(case, bad)
    runner = emulated_cuda() if backend == "cuda_emu" else None
    with pytest.raises(Exception, match=r"test_loss_import\.py:\d+: "
                       r"nn\.id_range: index 5 at position \d+ is outside "
                       r"\[0, 5\)"):
        train_imported(tmp_path, module, model, data, RANKS, "sgd",
                       runner=runner)
