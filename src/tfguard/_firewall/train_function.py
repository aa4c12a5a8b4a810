"""Keras's train function for one replica and one step per call, rebuilt to time the batch's arrival.

This is the one place tfguard builds what Keras's `Trainer._make_function`
builds (TensorFlow backend, `steps_per_execution=1`, one replica): the
batch pulled in the graph, the model's `train_step` run by its strategy in
a `tf.function` with the model's `jit_compile`, an `Optional` in the data
read as `None`. The rebuild adds two timestamps around the pull, so the
host (`tfguard._firewall.host`) measures the input wait of every recording
step without pulling the batch on the host. It runs the model's
`train_step` (the guarded one), so it is the firewall's, not a hook: no
code under `tfguard._hooks` runs the firewall's. The table of Keras
internals (docs/internals.md) lists it; `tests/firewall/test_train_function.py` checks, against
Keras's own train function, that one step of each leaves the same weights.

Example:

>>> import keras, numpy as np, tensorflow as tf
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile(optimizer="sgd", loss="mse")
>>> data = tf.data.Dataset.from_tensors((np.ones((4, 2), "float32"), np.ones((4, 1), "float32")))
>>> logs = timed_train_function(model)(iter(data))
>>> asked, ready = logs[BATCH_TIMES].numpy(); bool(ready >= asked), sorted(logs)[0]
(True, '_tfguard_batch_times')
"""

from __future__ import annotations

import keras
import tensorflow as tf

BATCH_TIMES = "_tfguard_batch_times"
"""The logs key of `[asked, ready]`: when the step asked for its batch and when it was there (seconds)."""


def timed_train_function(model: keras.Model, outputs_key: str | None = None):
    """Keras's train function for one replica and one step per call, timing the batch's arrival.

    What Keras builds for that case (`iterator -> logs`: the batch pulled
    in the graph, the model's `train_step` run by its strategy in a
    `tf.function`, XLA-compiled when the model says so), with two
    timestamps around the pull, taken in the outer graph (XLA has no
    timestamp kernel): when the step asked for its batch and when the batch
    was there. The host reads them on recording steps
    (`perf/input_wait_fraction`); an input pipeline that keeps the step
    waiting shows there, and Python's own overhead does not.

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> data = tf.data.Dataset.from_tensors((tf.ones((4, 2)), tf.ones((4, 1))))
    >>> sorted(timed_train_function(model)(iter(data)))
    ['_tfguard_batch_times', 'loss']

    Args:
        model: a compiled Keras model (one replica, `steps_per_execution=1`).
        outputs_key: when the step's logs hold a dict under this key (the
            guarded step's outputs), the times go into that dict instead of
            the logs themselves. Defaults to `None`.

    Returns:
        `function(iterator) -> logs`, with `BATCH_TIMES` added. A Python
        iterator (not `tf.data`'s) is pulled on the host, as Keras's own
        train function does, and its step is not timed.
    """
    step_function = model.train_step
    strategy = model.distribute_strategy

    @tf.autograph.experimental.do_not_convert
    def one_step_on_data(data):
        data = tf.nest.map_structure(  # as Keras: an Optional in the data stands for None
            lambda value: None if isinstance(value, tf.experimental.Optional) else value, data)
        return strategy.run(step_function, args=(data,))

    one_step_on_data = tf.function(one_step_on_data, reduce_retracing=True, jit_compile=model.jit_compile)

    @tf.autograph.experimental.do_not_convert
    def step_on_iterator(iterator):
        asked = tf.timestamp()
        with tf.control_dependencies([asked]):
            data = iterator.get_next()
        arrived = [t for t in tf.nest.flatten(data, expand_composites=True) if isinstance(t, tf.Tensor)][:1]
        with tf.control_dependencies(arrived or [asked]):
            ready = tf.timestamp()
        with tf.control_dependencies([ready]):  # the step starts once the time is taken, not before
            data = tf.nest.map_structure(lambda v: tf.identity(v) if isinstance(v, tf.Tensor) else v, data)
        return one_step_on_data(data), tf.stack([asked, ready])

    step_on_iterator = tf.function(step_on_iterator, reduce_retracing=True)
    traced = TraceOfSpec(step_on_iterator)

    def function(iterator):
        if not isinstance(iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)):
            # a Python iterator (Keras's `train_on_batch` hands one batch so): pulled here, as Keras does; untimed
            for data in iterator:
                return one_step_on_data(data)
            raise StopIteration
        logs, times = traced(iterator)
        if isinstance(logs, dict) and outputs_key is not None and isinstance(logs.get(outputs_key), dict):
            logs[outputs_key][BATCH_TIMES] = times
        elif isinstance(logs, dict):
            logs[BATCH_TIMES] = times
        return logs

    return function


class TraceOfSpec:
    """Calls a `tf.function` of one iterator through the trace of the iterator's element spec, held.

    A `tf.function` call finds its trace anew each time: it hashes the type
    of every input and every capture, and a train step captures each
    variable of the model and its optimizer (the 200-layer MLP: 1,610, 6 to
    15 % of its step on a CPU in two measures; `benchmarks/dispatch.py`). Keras's own train
    function pays that on every step. Here the trace of an element spec is
    looked up once (`get_concrete_function`, which traces it if need be) and
    then called as TensorFlow's public `ConcreteFunction`; an iterator of
    another spec (another dataset) is looked up in its turn. Where functions
    run eagerly (`tf.config.run_functions_eagerly`), or for an iterator that
    is not `tf.data`'s own (a distributed one), the `tf.function` is called
    as it is.

    Example:

    >>> import tensorflow as tf
    >>> calls = TraceOfSpec(tf.function(lambda iterator: iterator.get_next() * 2))
    >>> [int(calls(iter(tf.data.Dataset.range(3)))) for _ in range(2)]
    [0, 0]
    >>> float(calls(iter(tf.data.Dataset.from_tensors(1.5))))  # another spec: traced in its turn
    3.0

    Args:
        function: a `tf.function` of one `tf.data.Iterator`.
    """

    def __init__(self, function):
        self.function = function
        self.spec = None  # the element spec of the trace held
        self.trace = None  # its `ConcreteFunction`

    def __call__(self, iterator):
        if not isinstance(iterator, tf.data.Iterator) or tf.config.functions_run_eagerly():
            return self.function(iterator)
        spec = iterator.element_spec
        if self.trace is None or spec != self.spec:
            self.trace = self.function.get_concrete_function(iterator)
            self.spec = spec
        return self.trace(iterator)


__all__ = ["BATCH_TIMES", "TraceOfSpec", "timed_train_function"]
