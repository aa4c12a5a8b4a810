"""Canaries of the private TensorFlow surface: one per row of docs/internals.md's table, each naming TF's version.

Each test checks what `tfguard._hooks.tf_compat` gives on real TensorFlow
objects; a release that renames or changes the private name fails here
with `tf.__version__` and the name (`tests/hooks/surface.py`).

They run on requirements.lock's pair in `make test` (TensorFlow 2.21.0 with
Keras 3.15.1) and on each pair of `compat/pairs.py` in `make compat`
(TensorFlow 2.16.2 with Keras 3.7.0, 2.19.1 with 3.10.0); docs/versions.md
lists every pair checked.
"""

import glob

import numpy as np
import tensorflow as tf
from tensorboard.compat.proto import event_pb2, summary_pb2

from tests.hooks.surface import canary
from tfguard._hooks import tf_compat


def _events(folder) -> list:
    events = []
    for path in sorted(glob.glob(f"{folder}/events.out.tfevents.*")):
        events += [event_pb2.Event.FromString(r.numpy()) for r in tf.data.TFRecordDataset(path)]
    return events


def _tags(folder) -> list[str]:
    return [value.tag for event in _events(folder) for value in event.summary.value]


def test_canary_summary_writer_resource_queues_without_flushing(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path), max_queue=100, flush_millis=10**8)
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="canary", simple_value=1.0)])
    with canary("SummaryWriter._resource, gen_summary_ops.write_raw_proto_summary", "tensorflow"):
        assert tf_compat._resource(writer) is not None
        tf_compat.write_raw_summary(writer, 3, summary.SerializeToString())
        assert "canary" not in _tags(tmp_path), "the write flushed"
        writer.flush()
        assert _tags(tmp_path) == ["canary"]
        assert [e.step for e in _events(tmp_path) if e.summary.value] == [3]
    writer.close()


def test_canary_import_event(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path), max_queue=100, flush_millis=10**8)
    event = event_pb2.Event(step=7, wall_time=1.0, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
    with canary("gen_summary_ops.import_event, summary_ops_v2.import_event", "tensorflow"):
        tf_compat.write_event(writer, event.SerializeToString())
        writer.flush()
        logged = [e for e in _events(tmp_path) if e.HasField("session_log")]
        assert [(e.step, e.session_log.status) for e in logged] == [(7, event_pb2.SessionLog.START)]
    writer.close()


def test_canary_op_def_registry():
    with canary("tensorflow.python.framework.op_def_registry", "tensorflow"):
        names = [arg.name for arg in tf_compat.op_def("BatchDatasetV2").input_arg]
        assert names[:3] == ["input_dataset", "batch_size", "drop_remainder"]
        assert tf_compat.op_def("NoSuchOpAnywhere") is None


def _callable_behind(wrap, function) -> str:
    """The name `tf_compat.python_callable` gives for the op `wrap(function, [x], tf.int64)` makes."""
    graph = tf.function(lambda x: wrap(function, [x], tf.int64)).get_concrete_function(
        tf.TensorSpec([], tf.int64)).graph
    (op,) = [op for op in graph.get_operations() if op.type in ("PyFunc", "EagerPyFunc")]
    return tf_compat.python_callable(op.get_attr("token").decode()).__name__


def double_it(x):
    return x * 2


def test_canary_py_funcs_registry():
    with canary("script_ops._py_funcs", "tensorflow"):
        assert _callable_behind(tf.numpy_function, double_it) == "double_it"
        assert tf_compat.python_callable("no-such-token") is None


def test_canary_eager_func_keeps_the_callable_as_func():
    with canary("EagerFunc._func", "tensorflow"):
        assert _callable_behind(tf.py_function, double_it) == "double_it"


def test_canary_dataset_variant_tensor():
    ds = tf.data.Dataset.range(4).batch(2)
    with canary("DatasetV2._variant_tensor", "tensorflow"):
        variant = tf_compat.variant_tensor(ds)
        assert variant.dtype == tf.variant and variant.shape == []
        serialized = tf.raw_ops.DatasetToGraphV2(input_dataset=variant, external_state_policy=1)
        graph_def = tf.compat.v1.GraphDef.FromString(serialized.numpy())
        assert {"RangeDataset", "BatchDatasetV2"} <= {node.op for node in graph_def.node}


def test_canary_if_kept_functional():
    @tf.function
    def branch(p):
        return tf.cond(p, lambda: tf.constant(1), lambda: tf.constant(0))

    graph = branch.get_concrete_function(tf.TensorSpec([], tf.bool)).graph
    (op,) = [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
    with canary('Operation._set_attr("_lower_using_switch_merge")', "tensorflow"):
        tf_compat.keep_functional(op)
        assert op.get_attr(tf_compat.LOWER_USING_SWITCH_MERGE) is False
        assert int(branch(tf.constant(True))) == 1


def test_canary_maybe_merge_call():
    seen = []

    def once(strategy, value):
        seen.append(tf.distribute.in_cross_replica_context())
        return value + 1

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with canary("tf.__internal__.distribute.interim.maybe_merge_call", "tensorflow"):
        assert tf_compat.merge_call(once, tf.distribute.get_strategy(), 1) == 2
        strategy.run(lambda: tf_compat.merge_call(once, tf.distribute.get_strategy(), 1))
        assert seen == [False, True]  # the default strategy calls it in place; a real one merges


def test_canary_func_graph_captures():
    outer = tf.constant(np.arange(3.0))
    graph = tf.function(lambda: outer * 2).get_concrete_function().graph
    with canary("FuncGraph.captures", "tensorflow"):
        pairs = tf_compat.captures(graph)
        assert [external is outer for external, _ in pairs] == [True]
        assert pairs[0][1].graph is graph


def test_canary_noinline_keeps_a_call_a_call():
    inner = tf_compat.never_inlined(lambda x: x * 2.0)

    @tf.function
    def outer(x):
        return inner(x) + inner(x + 1.0)

    graph = outer.get_concrete_function(tf.TensorSpec([3])).graph
    calls = [op for op in graph.get_operations() if op.type == "PartitionedCall"]
    with canary(f'tf.function(experimental_attributes={{"{tf_compat.NO_INLINE}": True}})', "tensorflow"):
        assert len(calls) == 2
        called = graph._get_function(calls[0].get_attr("f").name).cached_definition
        assert called.attr[tf_compat.NO_INLINE].b is True
        assert outer(tf.ones([3])).numpy().tolist() == [6.0, 6.0, 6.0]


def test_canary_xla_context_is_seen_while_a_jit_compiled_function_traces():
    seen = []

    @tf.function(jit_compile=True)
    def compiled(x):
        seen.append(tf_compat.in_xla_context())
        return x * 2.0

    @tf.function
    def plain(x):
        seen.append(tf_compat.in_xla_context())
        return x * 2.0

    with canary("control_flow_util.GraphOrParentsInXlaContext", "tensorflow"):
        compiled(tf.ones([2]))
        plain(tf.ones([2]))
        assert seen == [True, False] and tf_compat.in_xla_context() is False
