"""Each invariant check on a keras-io-shaped program with its bug, and on its healthy twin.

The programs (`tests/invariants/programs.py`) train for two short epochs
under `LiveDiagnosis`, as a user would add it; the finding must name the
bug's layer or variable, at the step it was found, and the twin must get
no invariant finding at all (no false alarm, BatchNormalization, Dropout
and a GAN without `call()` included).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from tests.firewall import foreign
from tests.invariants import programs
from tfguard.diagnose import LiveDiagnosis
from tfguard.diagnose._causes import INVARIANTS


def _fit(build, **fit):
    model, x, y = build()
    live = LiveDiagnosis()
    model.fit(x, y, epochs=2, batch_size=16, verbose=0, callbacks=[live], **fit)
    return model, live, [f for f in live.findings if f.id in INVARIANTS]


def test_distillation_teacher_trained_by_the_loss():
    _, live, found = _fit(lambda: programs.distiller(frozen=False))
    (finding,) = found
    assert finding.id == "trained_unused" and finding.severity == "warning"
    assert finding.where == "teacher" and finding.onset_step == 1
    assert finding.evidence["layers"] == ", ".join(  # Keras numbers layer names per process
        f"teacher/{layer.name}" for layer in live.model.teacher.layers)
    assert finding.evidence["variables"] == ", ".join(
        v.path for v in live.model.teacher.trainable_variables)
    assert finding.evidence["freeze"] == "teacher" and finding.evidence["attributes"] == "teacher"
    assert "`self.teacher.trainable = False`" in finding.suggestion


def test_recommender_tensordot_mixes_the_batch():
    _, _, found = _fit(lambda: programs.recommender(rowwise=False))
    (finding,) = found
    assert finding.id == "batch_dependence" and finding.severity == "error"
    assert finding.where == "recommender_net" and finding.onset_step == 1
    assert "layer_class" not in finding.evidence  # the mixing is in the model's own call
    assert finding.evidence["after_layer"].startswith("recommender_net/")
    assert finding.evidence["relative_change"] > 1e-4
    assert "tensordot" in finding.suggestion


def test_siamese_embeddings_collapsed():
    _, _, found = _fit(lambda: programs.siamese(dead=True))
    (finding,) = found
    assert finding.id == "collapsed_output" and finding.where == "Embedding"
    assert finding.evidence["spread"] == 0.0 and finding.onset_epoch == 0


@pytest.mark.parametrize("layer, code", [("dropout", "random_at_inference"),
                                         ("bn", "batch_statistics")])
def test_training_true_hardcoded(layer, code):
    model, _, found = _fit(lambda: programs.hardcoded_training(layer, hardcoded=True))
    (finding,) = found
    assert finding.id == "training_mode_leak" and finding.severity == "error"
    assert finding.evidence["code"] == code and finding.onset_step == 1
    assert finding.where.endswith(model.middle.name)


def test_a_loss_that_never_reads_y():
    _, _, found = _fit(lambda: programs.label_free_loss(ignores=True))
    (finding,) = found
    assert finding.id == "labels_ignored" and finding.onset_step == 1
    assert finding.evidence["relative_change"] == 0.0


def test_a_metric_that_never_reads_y():
    _, _, found = _fit(lambda: programs.label_free_metric(ignores=True))
    (finding,) = found
    assert (finding.id, finding.where, finding.severity) == ("labels_ignored", "top1", "warning")
    assert finding.evidence["code"] == "metric" and finding.evidence["ignoring"] == "top1"
    assert finding.evidence["agreeing_labels/accuracy"] == 1.0
    assert finding.evidence["other_labels/accuracy"] == 0.0


def test_a_rounded_gate_gets_no_gradient():
    _, _, found = _fit(lambda: programs.rounded_branch(rounded=True))
    (finding,) = found
    assert finding.id == "untrained_variable" and finding.onset_epoch == 0
    assert finding.evidence["variables"] == "gate/kernel, gate/bias"
    assert finding.evidence["read_at_inference"] == "gate/kernel, gate/bias"


HEALTHY = {
    "distiller_frozen_teacher": lambda: programs.distiller(frozen=True),
    "recommender_rowwise_dot": lambda: programs.recommender(rowwise=True),
    "siamese": lambda: programs.siamese(dead=False),
    "dropout_training_passed": lambda: programs.hardcoded_training("dropout", hardcoded=False),
    "batchnorm_training_passed": lambda: programs.hardcoded_training("bn", hardcoded=False),
    "loss_reads_y": lambda: programs.label_free_loss(ignores=False),
    "metric_reads_y": lambda: programs.label_free_metric(ignores=False),
    "soft_gate": lambda: programs.rounded_branch(rounded=False),
    "gan_without_call": lambda: (*foreign.gan(), None),
    "vae_without_call": lambda: (*foreign.vae(), None),
    "custom_train_step": foreign.custom_step,
    "stateful_custom_layer": lambda: (foreign.stateful_model(), *_classes()),
    "cnn_batchnorm_dropout": programs.healthy_cnn,
}


def _classes():
    rng = np.random.default_rng(0)
    return rng.normal(size=(64, 4)).astype("float32"), rng.integers(0, 3, 64)


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_twin_gets_no_invariant_finding(name):
    _, live, found = _fit(HEALTHY[name])
    assert found == []
    ran = {r["check"] for r in live._watch.records}
    if name == "gan_without_call":  # several optimizers: a GAN's losses leave some variables
        assert ran == set()          # without a gradient by design (a WGAN critic's output bias)
    elif name.endswith("without_call"):  # no call(): only the variables are checked, silently
        assert ran == {"untrained_variable"}
    else:  # a custom train_step or no labels: the loss is not the compiled one, not checked
        assert {"training_mode_leak", "batch_dependence", "labels_ignored",
                "untrained_variable", "collapsed_output"} - ran <= {"labels_ignored"}


def test_the_siamese_bias_that_cancels_in_a_distance_is_not_needed():
    """The embedding's last bias gets no gradient (it cancels in `a - p`), but nothing needs it."""
    _, live, found = _fit(lambda: programs.siamese(dead=False))
    (record,) = [r for r in live._watch.records if r["check"] == "untrained_variable"]
    assert found == [] and record["ok"]
    (bias,) = record["evidence"]["not_needed"]
    assert bias.endswith("/bias") and bias.startswith("dense")


def test_a_sampling_layer_that_samples_at_inference_is_only_a_remark():
    """keras-io's VAE `Sampling` layer draws noise in every mode: named, as `info`, not an alarm."""

    def build():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((4,))
        z_mean = keras.layers.Dense(2)(inputs)
        z_log_var = keras.layers.Dense(2)(inputs)
        z = foreign.Sampling(name="sampling")([z_mean, z_log_var])
        model = keras.Model(inputs, keras.layers.Dense(4)(z), name="vae_like")
        model.compile(optimizer="adam", loss="mse")
        x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
        return model, x, x

    _, _, found = _fit(build)
    (finding,) = found
    assert (finding.id, finding.severity, finding.where) == ("training_mode_leak", "info", "sampling")
