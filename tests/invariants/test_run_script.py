"""`tfguard run` on an unmodified keras-io-shaped script: the invariant finding, first, in its report.

The script is the collaborative-filtering example's `RecommenderNet` with
`ops.tensordot(u, m, 2)` on stand-in ratings; it knows nothing of tfguard.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from tfguard.attach import run_script

SCRIPT = '''
import numpy as np
import keras
from keras import layers, ops

class RecommenderNet(keras.Model):
    def __init__(self, num_users, num_movies, embedding_size, **kwargs):
        super().__init__(**kwargs)
        self.user_embedding = layers.Embedding(num_users, embedding_size)
        self.user_bias = layers.Embedding(num_users, 1)
        self.movie_embedding = layers.Embedding(num_movies, embedding_size)
        self.movie_bias = layers.Embedding(num_movies, 1)

    def call(self, inputs):
        user_vector = self.user_embedding(inputs[:, 0])
        user_bias = self.user_bias(inputs[:, 0])
        movie_vector = self.movie_embedding(inputs[:, 1])
        movie_bias = self.movie_bias(inputs[:, 1])
        dot_user_movie = ops.tensordot(user_vector, movie_vector, 2)
        return ops.nn.sigmoid(dot_user_movie + user_bias + movie_bias)

rng = np.random.default_rng(0)
x = np.stack([rng.integers(0, 20, 256), rng.integers(0, 30, 256)], axis=1)
y = rng.uniform(size=(256, 1)).astype("float32")
model = RecommenderNet(20, 30, 8, name="recommender_net")
model.compile(loss=keras.losses.BinaryCrossentropy(), optimizer=keras.optimizers.Adam(1e-3))
model.fit(x, y, batch_size=64, epochs=2, validation_split=0.25, verbose=0)
'''


@pytest.mark.slow
def test_tfguard_run_reports_the_batch_mixing_first(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    result = run_script(script, logdir=tmp_path / "runs", report=tmp_path / "report.json", html=None)
    (diagnosis,) = result.diagnoses
    first = diagnosis.findings[0]
    assert (first.id, first.where, first.onset_step) == ("batch_dependence", "recommender_net", 1)
    report = json.loads((tmp_path / "report.json").read_text())
    assert "batch_dependence" in json.dumps(report)
