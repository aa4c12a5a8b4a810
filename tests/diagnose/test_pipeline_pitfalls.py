"""Seed 003's pitfalls on real runs: input-bound training, Python in the pipeline, out of memory.

* The same model fed by a slow pipeline (a `py_function` that sleeps, no
  prefetch) and by a fixed one: every recorded step measures its wait for
  data (`perf/input_wait_fraction`); `input_bound` fires on the first with
  the slow stage named, not on the second.
* A script that runs out of memory under `tfguard run`: the report names the
  error, the batch size, the largest layer and the fixes; the run is not healthy.
"""

from __future__ import annotations

import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from tfguard import _tags
from tfguard.attach import run_script
from tfguard.diagnose import LiveDiagnosis, diagnose
from tfguard.diagnose._thresholds import Thresholds
from tfguard.lint import lint_dataset

SYMPTOMS_SHOWN = ("input_bound", "python_in_pipeline")
"""The symptoms whose buggy program lives here (a timed pipeline needs its own setup), not in programs.py."""


def slow_decode(x):
    time.sleep(0.004)  # a decoder written in Python, element by element
    return x


def _data():
    rng = np.random.default_rng(0)
    return rng.random((256, 16), dtype=np.float32), (np.arange(256) % 4).astype("int64")


def slow_pipeline():
    x, y = _data()
    return tf.data.Dataset.from_tensor_slices((x, y)).map(
        lambda a, b: (tf.py_function(slow_decode, [a], tf.float32), b)).map(
        lambda a, b: (tf.ensure_shape(a, [16]), b)).batch(16)


def fast_pipeline():
    x, y = _data()
    return tf.data.Dataset.from_tensor_slices((x, y)).cache().batch(16).prefetch(tf.data.AUTOTUNE)


def _train(ds):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.Dense(4, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    live = LiveDiagnosis(scalars_every=2, lint=lint_dataset(ds))
    model.fit(ds, epochs=2, verbose=0, callbacks=[live])
    return live


def test_a_slow_pipeline_is_input_bound_with_its_stage_named_and_a_fast_one_is_not():
    slow = _train(slow_pipeline())
    fast = _train(fast_pipeline())
    slow_wait = slow.recorder.signals().series(_tags.INPUT_WAIT_FRACTION)
    fast_wait = fast.recorder.signals().series(_tags.INPUT_WAIT_FRACTION)
    assert slow_wait is not None and fast_wait is not None and len(slow_wait) >= 10
    # waiting is most of a slow step, well under the rule's threshold for a fast one
    limit = Thresholds().input_wait_max
    assert np.median(slow_wait.values) > limit > 2 * np.median(fast_wait.values)
    diagnosis = diagnose(slow.recorder.signals())
    (bound,) = diagnosis.by_id("input_bound")
    assert bound.severity == "warning" and bound.evidence["stage_code"] == "python_map"
    assert "ParallelMapDatasetV2" in bound.where or "MapDataset" in bound.where
    assert "slow_decode" in " ".join(f.message for f in diagnosis.by_id("python_in_pipeline"))
    # the static cause is listed first and the wait names it
    ids = diagnosis.ids
    assert ids.index("python_in_pipeline") < ids.index("input_bound")
    assert not diagnose(fast.recorder.signals()).by_id("input_bound")


OOM_SCRIPT = """
import numpy as np
import keras
from sklearn.datasets import load_digits

x, y = load_digits(return_X_y=True)
x = (x / 16.0).reshape(-1, 8, 8, 1).astype("float32")
model = keras.Sequential([keras.Input((8, 8, 1)),
                          keras.layers.UpSampling2D(size=(4096, 4096), name="upsample"),
                          keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(10, activation="softmax")])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
model.fit(x, y, epochs=1, batch_size=256, verbose=0)
"""


def test_running_out_of_memory_is_reported_with_the_batch_size_and_the_fixes(tmp_path):
    script = Path(tmp_path) / "train.py"
    script.write_text(OOM_SCRIPT)
    result = run_script(script, logdir=tmp_path / "runs", report=tmp_path / "report.json")
    assert result.exit_code == 1 and isinstance(result.exception, tf.errors.ResourceExhaustedError)
    (diagnosis,) = result.diagnoses
    status = diagnosis.status
    assert status["state"] == "out_of_memory" and not diagnosis.healthy
    detail = status["detail"]
    assert detail["batch_size"] == 256 and detail["largest_layer"] == "upsample"
    assert detail["parameters"] == model_parameters()
    text = status["text"]
    assert "ran out of memory" in text and "batch size 256" in text
    assert "halve the batch size" in text and "clear_session" in text and "memory_growth" in text


def model_parameters() -> int:
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.UpSampling2D(size=(4096, 4096)),
                              keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(10, activation="softmax")])
    return model.count_params()
