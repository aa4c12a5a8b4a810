"""The private TensorFlow surface tfguard still touches, in one place.

Everything else in tfguard uses TensorFlow's public API. What remains here
is small, named, listed in docs/internals.md ("Keras and TensorFlow
internals tfguard still touches") and checked by `tests/hooks/test_tf_surface.py`,
which fails naming `tf.__version__` and the attribute when a TensorFlow
release changes it; `tests/test_private_surface.py` fails when a private
name is used outside this module, `keras_compat` and the keras#20585
workaround (`tfguard._distribute.keras_20585`):

* `write_raw_summary(writer, step, serialized)` and `write_event(writer,
  serialized)`: the summary writer's resource (`SummaryWriter._resource`),
  to queue a serialized `Summary` or `Event` without making the writer the
  default (leaving `writer.as_default()` flushes);
* `op_def(op_type)`: an op's definition, to name its inputs
  (`tensorflow.python.framework.op_def_registry`);
* `python_callable(token)`: the Python function behind a `py_function` /
  `numpy_function` op (`script_ops._py_funcs`, and `EagerFunc._func`);
* `variant_tensor(ds)`: a dataset's variant tensor (`DatasetV2._variant_tensor`),
  which `tf.raw_ops.DatasetToGraphV2` serializes;
* `keep_functional(op)`: a `tf.cond`'s `If` op not lowered to
  `Switch`/`Merge` (`Operation._set_attr("_lower_using_switch_merge")`);
* `merge_call(fn, strategy, *args)`: `fn` run once for all replicas
  (`tf.__internal__.distribute.interim.maybe_merge_call`);
* `captures(graph)`: the `(outer tensor, placeholder)` pairs a function
  graph captures (`FuncGraph.captures`);
* `never_inlined(fn)`: a `tf.function` whose calls stay calls when the
  calling graph runs (the `_noinline` function attribute);
* `in_xla_context()`: whether ops built now are compiled with XLA
  (`control_flow_util.GraphOrParentsInXlaContext`): a `py_function` there
  fails to compile.

Example:

>>> import tensorflow as tf
>>> [arg.name for arg in op_def("AddV2").input_arg]
['x', 'y']
>>> variant_tensor(tf.data.Dataset.range(3)).dtype == tf.variant
True
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import op_def_registry
from tensorflow.python.ops import control_flow_util, gen_summary_ops, script_ops, summary_ops_v2

_KEEP_FUNCTIONAL = tf.compat.v1.AttrValue(b=False)
LOWER_USING_SWITCH_MERGE = "_lower_using_switch_merge"
"""The `If` attribute that, false, keeps a `tf.cond` functional inside a `tf.function`."""


def _resource(writer):
    """The resource handle of a `tf.summary` file writer, or `None` (another writer implementation)."""
    return getattr(writer, "_resource", None)


def write_raw_summary(writer, step: int, serialized: bytes) -> None:
    """Queues one serialized `Summary` in `writer` without flushing.

    `tf.summary.experimental.write_raw_pb` needs the writer as default, and
    leaving `writer.as_default()` flushes: one flush per logged step would
    defeat `max_queue` and `flush_millis`. The op it runs is called directly
    on the writer's resource. A writer without one (another implementation)
    is written through `write_raw_pb`: correct, but it flushes.
    """
    resource = _resource(writer)
    if resource is None:
        with writer.as_default():
            tf.summary.experimental.write_raw_pb(serialized, step=step)
        return
    with tf.device("cpu:0"):
        gen_summary_ops.write_raw_proto_summary(resource, tf.constant(step, tf.int64), tf.constant(serialized))


def write_event(writer, serialized: bytes) -> None:
    """Queues one serialized `Event` in `writer` as it is (`summary_ops_v2.import_event`), without flushing."""
    resource = _resource(writer)
    if resource is None:
        with writer.as_default():
            summary_ops_v2.import_event(tf.constant(serialized))
        return
    with tf.device("cpu:0"):
        gen_summary_ops.import_event(resource, tf.constant(serialized))


def op_def(op_type: str):
    """The registered `OpDef` of `op_type` (its inputs, outputs, attributes), or `None` when unknown."""
    return op_def_registry.get(op_type)


def python_callable(token: str):
    """The Python callable a `py_function` / `numpy_function` op with this `token` calls, or `None`.

    `tf.py_function` registers an `EagerFunc` wrapper; the user's callable
    is its `_func`. Best effort: a token no longer registered gives `None`.
    """
    try:
        function = script_ops._py_funcs.get(token)
    except AttributeError:  # the registry moved: the finding says "a Python function" (the canary fails)
        return None
    return getattr(function, "_func", function)


def variant_tensor(ds: tf.data.Dataset) -> tf.Tensor:
    """The scalar `variant` tensor that stands for `ds` in TensorFlow's dataset ops."""
    return ds._variant_tensor


def keep_functional(op) -> None:
    """Marks an `If` / `StatelessIf` op so a `tf.function` does not lower it to `Switch`/`Merge`."""
    op._set_attr(LOWER_USING_SWITCH_MERGE, _KEEP_FUNCTIONAL)


def merge_call(fn, strategy, *args):
    """`fn(strategy, *args)` run once in cross-replica context (directly when already there)."""
    return tf.__internal__.distribute.interim.maybe_merge_call(fn, strategy, *args)


NO_INLINE = "_noinline"
"""The function attribute that keeps a call of a `tf.function` a call when the calling graph is instantiated."""


def never_inlined(fn):
    """`tf.function(fn)` (shapes relaxed after a retrace) whose calls TensorFlow does not inline into the caller."""
    return tf.function(fn, autograph=False, reduce_retracing=True, experimental_attributes={NO_INLINE: True})


def captures(graph) -> list[tuple[tf.Tensor, tf.Tensor]]:
    """The `(outer tensor, inner placeholder)` pairs a `FuncGraph` captured so far."""
    return list(graph.captures)


def in_xla_context() -> bool:
    """Whether ops built now land in a function compiled with XLA (`jit_compile=True`); `False` eagerly."""
    if tf.executing_eagerly():
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


__all__ = ["LOWER_USING_SWITCH_MERGE", "NO_INLINE", "captures", "in_xla_context", "keep_functional", "merge_call", "never_inlined",
           "op_def", "python_callable", "variant_tensor", "write_event", "write_raw_summary"]
