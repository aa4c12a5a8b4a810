"""A few input values tens of times the input's scale, in a run they hurt (issue 41, public bug d4ml-006).

`StandardScaler` on a feature that is almost always 0 puts its few other rows `sqrt(n / k)`
standard deviations out (d4ml-006: 39, MNIST pixels, a VAE whose `exp(log_var)` overflows). The
per-batch statistics look normalized; the in-memory `x` given to `fit` shows the rows
(`tfguard.lint._outliers`), and the diagnosis names them only in a run training showed hurt.
"""

from __future__ import annotations

import numpy as np

from tfguard.lint._outliers import MAX_RATIO, lint_outliers

from . import user_programs as U

ALARMS = ("warning", "error")

_PIXELS = """
    from keras import ops
    y = ((digits_y - 4.5) / 2.9).astype("float32")[:, None]  # the digit, as a regression target
    if {standardize}:
        x = ((digits_x - digits_x.mean(0)) / np.where(digits_x.std(0) > 0, digits_x.std(0), 1)).astype("float32")
    else:
        x = (digits_x / 16.0).astype("float32")
    def gaussian_nll(y_true, out):  # a mean and a log-variance per example
        mean, log_var = out[:, 0], out[:, 1]
        return ops.mean(0.5 * (log_var + ops.square(y_true[:, 0] - mean) / ops.exp(log_var)))
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense({outputs})])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss={loss})
    model.fit(x, y, batch_size=32, epochs=3, verbose=0)
"""


def _program(standardize: bool, loss: str = "gaussian_nll") -> U.UserProgram:
    outputs = 2 if loss == "gaussian_nll" else 1
    return U.UserProgram(f"pixels_{standardize}_{loss}", None,
                         _PIXELS.format(standardize=standardize, loss=loss, outputs=outputs))


def _alarms(program: U.UserProgram, tmp_path) -> list:
    result = U.run(program, tmp_path)
    assert result.exit_code == 0, result.traceback
    return [f for d in result.diagnoses for f in d.findings if f.severity in ALARMS]


def test_standardized_rare_pixels_under_a_log_variance_are_named_first(tmp_path):
    # before: nonfinite alone; the batches' statistics are those of standardized data
    alarms = _alarms(_program(standardize=True), tmp_path)
    assert alarms and alarms[0].id == "unnormalized_input", [(f.id, f.message) for f in alarms]
    first = alarms[0]
    assert first.severity == "warning" and first.evidence["code"] == "extreme_outliers"
    assert first.evidence["ratio_to_rms"] > MAX_RATIO and first.evidence["mode_share"] > 0.99
    assert "in row(s) " in first.message and "MinMaxScaler" in first.suggestion
    assert "nonfinite" in [f.id for f in alarms[1:]]
    nonfinite = next(f for f in alarms if f.id == "nonfinite")
    assert nonfinite.cause == first.key, nonfinite.cause


def test_the_same_pixels_scaled_by_their_range_stay_quiet(tmp_path):
    assert _alarms(_program(standardize=False), tmp_path) == []


def test_the_same_standardized_pixels_in_a_run_they_do_not_hurt_stay_quiet(tmp_path):
    # the outliers are there (the check sees them), but a mean squared error trains on them
    alarms = _alarms(_program(standardize=True, loss="'mse'"), tmp_path)
    assert "unnormalized_input" not in [f.id for f in alarms], [(f.id, f.message) for f in alarms]


def test_heavy_tails_are_evidence_and_pixels_in_their_range_are_not():
    rng = np.random.default_rng(0)
    heavy = rng.lognormal(0.0, 1.5, size=(2000, 6)).astype("float32")
    heavy = (heavy - heavy.mean(0)) / heavy.std(0)
    (f,) = lint_outliers(heavy)  # evidence only: the diagnosis asks training whether it hurts
    assert f.severity == "info" and f.evidence["mode_share"] < 0.01
    assert lint_outliers(rng.normal(size=(5000, 8)).astype("float32")) == []
    assert lint_outliers(rng.integers(0, 3, size=(500, 4))) == []  # integers: ids or counts, not read
    assert lint_outliers(heavy[:50]) == []  # too few rows to judge a spread
