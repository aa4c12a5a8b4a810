"""Shared fixtures: small real Keras models and data, made in the tests."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


def pytest_report_header(config):
    """The pair the suite runs on (requirements.lock's; `make compat` runs others)."""
    import tensorflow as tf

    return f"TensorFlow {tf.__version__} with Keras {keras.__version__}, numpy {np.__version__}"


def traced_step(model: keras.Model):
    """`model.train_step` as a `tf.function`, traced as `fit` traces it: without AutoGraph.

    Keras calls `train_step` through `strategy.run`, which AutoGraph leaves
    unconverted; converted, tfguard's own code made the same graph in up to
    three times as long (benchmarks/HISTORY.md, sixth session).
    """
    import tensorflow as tf

    return tf.function(model.train_step, autograph=False)


def step_graph(model: keras.Model, spec, kinds=frozenset({"scalars", "histograms"})):
    """The graph of the instrumented `model`'s step traced as the trace for `kinds` (the recording one by default), as `fit` traces it."""
    from tfguard._firewall.instrument import instrumentation_of

    inst = instrumentation_of(model)
    inst.tracing_kinds = frozenset(kinds)
    try:
        return traced_step(model).get_concrete_function(spec).graph
    finally:
        inst.tracing_kinds = frozenset()


def mse_step(model: keras.Model, optimizer):
    """A hand-written training step as a tape loop writes it: the mean squared error, one `apply_gradients`."""
    import tensorflow as tf

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return train_step


def deep_mlp(depth: int, width: int = 8):
    """A compiled MLP of `depth` ReLU Dense layers, a BatchNormalization after every fourth, three logits."""
    layers = [keras.Input((width,))]
    for i in range(depth):
        layers.append(keras.layers.Dense(width, activation="relu"))
        if i % 4 == 3:
            layers.append(keras.layers.BatchNormalization())
    model = keras.Sequential([*layers, keras.layers.Dense(3)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def small_classifier(units: int = 3, inputs: int = 4, hidden: int = 8, jit_compile=False, lr=1e-2):
    """A compiled two-layer softmax classifier."""
    model = keras.Sequential(
        [
            keras.Input((inputs,)),
            keras.layers.Dense(hidden, activation="relu", name="hidden"),
            keras.layers.Dense(units, activation="softmax", name="out"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(lr),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return model


@pytest.fixture
def classifier():
    keras.utils.set_random_seed(0)
    return small_classifier()


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x = rng.random((64, 4), dtype=np.float32)
    y = (np.arange(64) % 3).astype("int64")
    return x, y


def weights_of(model):
    return [np.array(v.numpy()) for v in model.weights]


def optimizer_state(model):
    return [np.array(v.numpy()) for v in model.optimizer.variables]


def shared_group(item) -> str | None:
    """The group of tests that must share `item`'s worker: a wider fixture's home, or `None`.

    A session fixture's folder (where its conftest is), else a module's or
    a class's fixture's file; `None` for a test whose fixtures are its own.
    """
    group = None
    info = getattr(item, "_fixtureinfo", None)  # a doctest item has none
    for defs in info.name2fixturedefs.values() if info is not None else ():
        fixturedef = defs[-1]
        if fixturedef.scope == "function" or not fixturedef.baseid:
            continue  # the test's own, or pytest's (tmp_path_factory)
        if fixturedef.scope in ("session", "package"):
            return fixturedef.baseid
        group = item.nodeid.split("::")[0]
    return group


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test`: `-n 2 --dist loadgroup`), tests that share a fixture share a worker.

    A session fixture of a folder's conftest (the diagnosis runs trained
    once, the board's TensorBoard server) is then made once, not once per
    worker; a module's fixture once per module. A test whose fixtures are
    its own goes to whichever worker is free. Runs before xdist's own hook
    (`tryfirst`), which reads the group.
    """
    for item in items:
        group = shared_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(name=group))
