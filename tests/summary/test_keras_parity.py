"""`tfguard.Logger` is a drop-in superset of `keras.callbacks.TensorBoard`, seen through TensorBoard.

The same script runs twice, once with `keras.callbacks.TensorBoard(**args)`
and once with `tfguard.Logger(**args)` (the one-word change a user makes),
with the arguments users pass today. A real TensorBoard server reads both
log directories; everything it shows for Keras's run has its counterpart
in tfguard's, with at least as many points and the same values, and the
projector, empty for Keras (keras-team/keras#20210), lists tfguard's run
with the `Embedding` table labelled by the `StringLookup` vocabulary. Then
the same kind of model under `tfguard run` with no callback at all gets the
projector too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import urllib.parse

import numpy as np
import pytest

from tests.summary.tensorboard_server import get, get_bytes, poll, serve
from tfguard import _tags

pytestmark = pytest.mark.slow

WORDS = ["cat", "dog", "fish", "bird"]

SCRIPT = textwrap.dedent(
    """
    import sys

    import keras
    import numpy as np
    import tensorflow as tf

    which, logdir = sys.argv[1], sys.argv[2]
    keras.utils.set_random_seed(0)
    words = np.array({words!r})
    rng = np.random.default_rng(0)
    x = words[rng.integers(0, 4, size=(64, 5))]
    y = ((x == "cat").sum(axis=1) > 1).astype("float32")
    inputs = keras.Input((5,), dtype="string")
    ids = keras.layers.StringLookup(vocabulary=list(words), name="vocab")(inputs)
    hidden = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(5, 4, name="words")(ids))
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid", name="out")(hidden), name="bag")
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    train = tf.data.Dataset.from_tensor_slices((x[:48], y[:48])).batch(16)
    val = tf.data.Dataset.from_tensor_slices((x[48:], y[48:])).batch(16)
    callbacks = []
    if which != "none":
        args = dict(log_dir=logdir, histogram_freq=1, write_images=True, write_graph=True,
                    embeddings_freq=1, update_freq="batch")
        if which == "keras":
            callbacks = [keras.callbacks.TensorBoard(**args)]
        else:
            import tfguard
            callbacks = [tfguard.Logger(**args)]
    model.fit(train, epochs=2, validation_data=val, verbose=0, callbacks=callbacks)
    """
).format(words=WORDS)


def _run(args, cwd):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def _tfguard_tag(plugin: str, keras_run: str, tag: str) -> str:
    """Where tfguard writes what Keras writes as `tag` in its `train` or `validation` run."""
    if plugin == "scalars":
        if tag == "epoch_learning_rate":
            return _tags.LEARNING_RATE
        if tag.startswith("batch_"):
            return "batch/" + tag.removeprefix("batch_")
        if tag.startswith("evaluation_") and tag.endswith("_vs_iterations"):
            return "val/" + tag.removeprefix("evaluation_").removesuffix("_vs_iterations")
        prefix = "val/" if keras_run == "validation" else "train/"
        return prefix + tag.removeprefix("epoch_")
    if plugin == "histograms":
        return _tags.hist_weights(tag.removesuffix("/histogram"))
    if plugin == "images":
        return _tags.weight_image(tag.removesuffix("/image"))
    return tag  # the graph: "keras" in both


def _ours(mine: str, our_tags) -> str:
    """`mine`, or where tfguard writes it when Keras named a weight by its name alone.

    Keras 3.15 names a weight's histogram and image by its path
    (`words/embeddings`); Keras 3.13 and older by its name (`embeddings`,
    the same for every layer's kernel), which tfguard's tags hold as the
    last part of the path.
    """
    if mine in our_tags:
        return mine
    for kind in (_tags.hist_weights(""), _tags.weight_image("")):
        name = mine.removeprefix(kind)
        if mine.startswith(kind) and "/" not in name:
            found = [tag for tag in our_tags if tag.startswith(kind) and tag.endswith("/" + name)]
            return found[0] if len(found) == 1 else mine
    return mine


def _values(base, run, tag):
    query = urllib.parse.urlencode({"run": run, "tag": tag})
    return get(base, f"/data/plugin/scalars/scalars?{query}")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("parity")
    script = root / "train.py"
    script.write_text(SCRIPT)
    _run([sys.executable, str(script), "keras", str(root / "logs" / "keras")], root)
    _run([sys.executable, str(script), "tfguard", str(root / "logs" / "tfguard")], root)
    return root


def test_the_logger_shows_everything_keras_shows_and_the_projector(logs):
    with serve(logs / "logs") as base:
        def both():
            runs = get(base, "/data/runs")
            keras_runs = [r for r in runs if r.startswith("keras/")]
            ours = [r for r in runs if r.startswith("tfguard/")]
            return (keras_runs, ours) if len(keras_runs) == 2 and ours else None

        keras_runs, (ours,) = poll(both, "both runs")
        assert ours.startswith("tfguard/bag/")
        compared = 0
        for plugin in ("scalars", "histograms", "images", "graph_keras_model"):
            theirs = get(base, f"/data/plugin/{plugin}/tags") if plugin != "graph_keras_model" else None
            if plugin == "graph_keras_model":
                listing = get(base, "/data/plugins_listing")
                assert listing["graphs"]["enabled"]
                graph_runs = get(base, "/data/plugin/graphs/info")
                assert graph_runs[ours]["tags"]["keras"]["conceptual_graph"]
                assert any(info["tags"].get("keras", {}).get("conceptual_graph")
                           for run, info in graph_runs.items() if run.startswith("keras/"))
                continue
            for keras_run in keras_runs:
                for tag in theirs.get(keras_run, {}):
                    mine = _ours(_tfguard_tag(plugin, keras_run.split("/")[-1], tag), theirs[ours])
                    assert mine in theirs[ours], f"{plugin}: Keras's {keras_run} {tag} has no {mine}"
                    compared += 1
                    if plugin != "scalars":
                        continue
                    keras_points = _values(base, keras_run, tag)
                    our_points = _values(base, ours, mine)
                    assert len(our_points) >= len(keras_points), (tag, mine)
                    if tag.startswith("epoch_"):  # the same training: the same epoch values
                        np.testing.assert_allclose([p[2] for p in our_points][-len(keras_points):],
                                                   [p[2] for p in keras_points], rtol=1e-4, err_msg=tag)
        assert compared >= 12  # losses, accuracies, learning rate, 3 weights (histograms), 2 images

        # the projector: Keras's config names checkpoint keys its checkpoints lack; tfguard's works
        projector_runs = poll(lambda: get(base, "/data/plugin/projector/runs"), "projector runs")
        assert ours in projector_runs
        for run in projector_runs:
            if run.startswith("keras"):
                info = get(base, "/data/plugin/projector/info?" + urllib.parse.urlencode({"run": run}))
                assert not any(e.get("tensorPath") for e in info.get("embeddings", []))
        info = get(base, "/data/plugin/projector/info?" + urllib.parse.urlencode({"run": ours}))
        (table,) = info["embeddings"]
        assert table["tensorName"] == "words" and [int(d) for d in table["tensorShape"]] == [5, 4]
        query = urllib.parse.urlencode({"run": ours, "name": "words"})
        labels = get_bytes(base, f"/data/plugin/projector/metadata?{query}").decode().splitlines()
        assert labels == ["[UNK]", *WORDS]


def test_tfguard_run_puts_the_embedding_table_in_the_projector(logs, tmp_path):
    runs = tmp_path / "runs"
    tfguard = os.path.join(os.path.dirname(sys.executable), "tfguard")
    _run([tfguard, "run", "--logdir", str(runs), str(logs / "train.py"), "none", "unused"], logs)
    with serve(runs) as base:
        projector_runs = poll(lambda: get(base, "/data/plugin/projector/runs"), "projector runs")
        (run,) = projector_runs
        info = get(base, "/data/plugin/projector/info?" + urllib.parse.urlencode({"run": run}))
        (table,) = info["embeddings"]
        assert table["tensorName"] == "words"
        query = urllib.parse.urlencode({"run": run, "name": "words"})
        labels = get_bytes(base, f"/data/plugin/projector/metadata?{query}").decode().splitlines()
        assert labels == ["[UNK]", *WORDS]
