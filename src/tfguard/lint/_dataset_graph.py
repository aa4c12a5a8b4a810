"""Reading a `tf.data` pipeline back from its dataset graph.

`read_dataset_graph(ds)` serializes the dataset with
`tf.raw_ops.DatasetToGraphV2` (the same call `tf.data` uses to checkpoint and
distribute a pipeline) into a `GraphDef`, then walks the dataset ops from the
output (`_Retval`) back to the source(s). The result is a tree of
`DatasetOp`s; a pipeline without `zip`/`concatenate` is a single chain, listed
from the source (position 0) to the output.

For every op it also reads the scalar arguments that are constants
(`buffer_size`, `count`, `batch_size`, `num_parallel_calls`, ...), the
boolean attributes that matter (`reshuffle_each_iteration`, `deterministic`),
and whether the functions it runs (the `map` function and everything that
function calls, through `PartitionedCall`, `If`, `While`, ...) contain random
ops: `RandomUniform`, `StatelessRandomUniformV2`, `RngReadAndSkip`, ...

The graph is the pipeline as written: `tf.data` applies its static
optimizations (map fusion, map parallelization) later, when an iterator is
made.

Example:

>>> import tensorflow as tf
>>> ds = tf.data.Dataset.range(8).shuffle(8).batch(2).prefetch(1)
>>> [op.op for op in read_dataset_graph(ds).chain()]
['RangeDataset', 'ShuffleDatasetV3', 'BatchDatasetV2', 'PrefetchDataset']
"""

from __future__ import annotations

import dataclasses
import re

import tensorflow as tf

from tfguard._errors import ContractError
from tfguard._hooks import tf_compat

# ExternalStatePolicy of DatasetToGraphV2: 0 warn, 1 ignore, 2 fail. A pipeline
# whose map captures a variable or a seed generator has external state; its
# structure is still what we want, so it is ignored.
_POLICY_IGNORE = 1

_DATASET_OP = re.compile(r"Dataset(V\d+)?$")

#: Op types that draw random numbers (exact names).
RANDOM_OPS = frozenset(
    {
        "TruncatedNormal",
        "ParameterizedTruncatedNormal",
        "Multinomial",
        "SampleDistortedBoundingBox",
        "SampleDistortedBoundingBoxV2",
        "StatelessMultinomial",
        "StatelessTruncatedNormal",
        "StatelessTruncatedNormalV2",
        "StatelessParameterizedTruncatedNormal",
        "StatelessSampleDistortedBoundingBox",
        "StatelessShuffle",
        "RngReadAndSkip",
        "RngSkip",
        "RngBitGenerator",
        "StatefulRandomBinomial",
        "StatefulTruncatedNormal",
        "StatefulUniform",
        "StatefulUniformFullInt",
        "StatefulUniformInt",
        "StatefulStandardNormal",
        "StatefulStandardNormalV2",
    }
)
#: Op type prefixes that draw random numbers (`RandomUniform`, `StatelessRandomUniformV2`, ...).
RANDOM_OP_PREFIXES = ("Random", "StatelessRandom")

BATCH_OPS = frozenset(
    {
        "BatchDataset",
        "BatchDatasetV2",
        "ParallelBatchDataset",
        "PaddedBatchDataset",
        "PaddedBatchDatasetV2",
        "MapAndBatchDataset",
        "DenseToSparseBatchDataset",
        "RaggedBatchDataset",
    }
)
SHUFFLE_OPS = frozenset(
    {
        "ShuffleDataset",
        "ShuffleDatasetV2",
        "ShuffleDatasetV3",
        "ShuffleAndRepeatDataset",
        "ShuffleAndRepeatDatasetV2",
    }
)
MAP_OPS = frozenset(
    {"MapDataset", "ParallelMapDataset", "ParallelMapDatasetV2", "MapAndBatchDataset"}
)
CACHE_OPS = frozenset({"CacheDataset", "CacheDatasetV2"})
REPEAT_OPS = frozenset({"RepeatDataset", "ShuffleAndRepeatDataset", "ShuffleAndRepeatDatasetV2"})
UNBATCH_OPS = frozenset({"UnbatchDataset", "RebatchDataset", "RebatchDatasetV2"})
PREFETCH_OPS = frozenset({"PrefetchDataset"})
#: Ops that only carry options or bookkeeping and may follow the final prefetch.
BOOKKEEPING_OPS = frozenset(
    {
        "OptionsDataset",
        "ModelDataset",
        "MaxIntraOpParallelismDataset",
        "PrivateThreadPoolDataset",
        "AssertNextDataset",
        "AssertPrevDataset",
        "AssertCardinalityDataset",
    }
)


def is_random_op(op_type: str) -> bool:
    """True when an op type draws random numbers (stateful or stateless)."""
    return op_type in RANDOM_OPS or op_type.startswith(RANDOM_OP_PREFIXES)


@dataclasses.dataclass(frozen=True)
class DatasetOp:
    """One dataset op of a pipeline.

    Args:
        name: the node name in the serialized graph (`"ShuffleDatasetV3/_13"`).
        op: the op type (`"ShuffleDatasetV3"`).
        inputs: names of the upstream dataset ops, first the main one.
        args: constant scalar arguments by name (`{"buffer_size": 1000}`).
        attrs: boolean attributes that matter (`reshuffle_each_iteration`,
            `deterministic`).
        functions: names of the functions the op runs (`map`, `filter`, ...).
        random_ops: the random op types found in those functions, sorted.
        python_calls: `(op type, token)` of each call into Python in those
            functions (`EagerPyFunc`, `PyFunc`, `PyFuncStateless`, or
            `GeneratorDataset` for `from_generator`).
    """

    name: str
    op: str
    inputs: tuple[str, ...] = ()
    args: dict = dataclasses.field(default_factory=dict)
    attrs: dict = dataclasses.field(default_factory=dict)
    functions: tuple[str, ...] = ()
    random_ops: tuple[str, ...] = ()
    python_calls: tuple[tuple[str, str], ...] = ()

    @property
    def is_random(self) -> bool:
        """True when a function of this op draws random numbers."""
        return bool(self.random_ops)


@dataclasses.dataclass(frozen=True)
class DatasetGraph:
    """The dataset ops of a pipeline, keyed by node name, and its output op.

    Args:
        ops: every dataset op by node name.
        output: the node name of the op the dataset returns.
    """

    ops: dict
    output: str

    def chain(self) -> list[DatasetOp]:
        """The main chain from the source (index 0) to the output, following first inputs."""
        chain, name = [], self.output
        while name is not None:
            op = self.ops[name]
            chain.append(op)
            name = op.inputs[0] if op.inputs else None
        return chain[::-1]

    def paths(self) -> list[list[DatasetOp]]:
        """Every source-to-output path (one per branch of a `zip`/`concatenate`)."""
        out: list[list[DatasetOp]] = []

        def walk(name: str, below: list[DatasetOp]):
            op = self.ops[name]
            path = [op, *below]
            if not op.inputs:
                out.append(path)
            for upstream in op.inputs:
                walk(upstream, path)

        walk(self.output, [])
        return out


def _const_scalar(node):
    try:
        value = tf.make_ndarray(node.attr["value"].tensor)
    except (TypeError, ValueError, KeyError):  # KeyError: resource/variant constants
        return None
    if value.shape != ():
        return None
    value = value.item()
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _arg_names(node) -> list[str]:
    """Names each data input of a node by its op definition (lists expanded)."""
    try:
        op_def = tf_compat.op_def(node.op)
    except Exception:  # noqa: BLE001 - an unregistered op: positional names
        op_def = None
    if op_def is None:
        return []
    names = []
    for arg in op_def.input_arg:
        count = 1
        if arg.number_attr:
            count = node.attr[arg.number_attr].i
        elif arg.type_list_attr:
            count = len(node.attr[arg.type_list_attr].list.type)
        names.extend([arg.name] * count)
    return names


def _functions_of(attr_values) -> list[str]:
    names = []
    for value in attr_values:
        if value.func.name:
            names.append(value.func.name)
        names.extend(f.name for f in value.list.func)
    return names


PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
"""Ops that call back into Python (`tf.py_function`, `tf.numpy_function`, `from_generator`)."""
GENERATOR_OPS = frozenset({"GeneratorDataset"})


def _nodes_in(function_names, library):
    """Every node of the functions, and of the functions they call, depth first."""
    seen, stack = set(), list(function_names)
    while stack:
        fname = stack.pop()
        if fname in seen or fname not in library:
            continue
        seen.add(fname)
        for node in library[fname].node_def:
            yield node
            if node.op in library:
                stack.append(node.op)
            stack.extend(_functions_of(node.attr.values()))


def python_function(token: str):
    """The Python callable a `py_function`/`numpy_function` op calls, or `None`.

    Reads TensorFlow's registry of those callables (`tf_compat.python_callable`,
    private: best effort, listed in docs/internals.md).
    """
    return tf_compat.python_callable(token)


def _random_ops(function_names, library) -> set[str]:
    return {node.op for node in _nodes_in(function_names, library) if is_random_op(node.op)}


def _python_calls(function_names, library) -> tuple[tuple[str, str], ...]:
    """`(op type, token)` of each call into Python; a generator source shows as `GeneratorDataset`."""
    found = []
    for node in _nodes_in(function_names, library):
        if node.op in PYTHON_OPS:
            token = node.attr["token"].s.decode() if "token" in node.attr else ""
            found.append((node.op, token))
        elif node.op in GENERATOR_OPS:
            found.append((node.op, ""))
    return tuple(sorted(set(found)))


def graph_def_of(ds: tf.data.Dataset) -> tf.compat.v1.GraphDef:
    """Serializes a dataset into the `GraphDef` of its pipeline.

    Args:
        ds: a `tf.data.Dataset`.

    Returns:
        The `GraphDef`, with the functions it runs in `library`.

    Raises:
        TypeError: if `ds` is not a `tf.data.Dataset`.
    """
    if not isinstance(ds, tf.data.Dataset):
        raise ContractError(
            f"Received an invalid value for `ds`, expected a tf.data.Dataset. "
            f"Received: ds of type {type(ds).__name__}"
        )
    serialized = tf.raw_ops.DatasetToGraphV2(
        input_dataset=tf_compat.variant_tensor(ds),
        external_state_policy=_POLICY_IGNORE,
        strip_device_assignment=True,
    )
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(serialized.numpy())
    return graph_def


def parse_graph_def(graph_def: tf.compat.v1.GraphDef) -> DatasetGraph:
    """Builds the `DatasetGraph` of a serialized pipeline.

    Args:
        graph_def: the output of `graph_def_of`.

    Returns:
        The dataset ops and the output op.

    Raises:
        ValueError: if the graph has no `_Retval` fed by a dataset op.
    """
    nodes = {n.name: n for n in graph_def.node}
    library = {f.signature.name: f for f in graph_def.library.function}

    def resolve(name: str) -> str | None:
        name = name.split(":")[0]
        seen = set()
        while name in nodes and name not in seen:
            seen.add(name)
            node = nodes[name]
            if _DATASET_OP.search(node.op):
                return name
            if node.op == "Identity" and node.input:
                name = node.input[0].split(":")[0]
                continue
            return None
        return None

    ops = {}
    for node in graph_def.node:
        if not _DATASET_OP.search(node.op):
            continue
        data_inputs = [i for i in node.input if not i.startswith("^")]
        arg_names = _arg_names(node)
        upstream, args = [], {}
        for index, inp in enumerate(data_inputs):
            source = resolve(inp)
            if source is not None:
                upstream.append(source)
                continue
            producer = nodes.get(inp.split(":")[0])
            if producer is not None and producer.op == "Const":
                value = _const_scalar(producer)
                if value is not None:
                    arg = arg_names[index] if index < len(arg_names) else f"arg{index}"
                    args.setdefault(arg, value)
        attrs = {
            key: node.attr[key].b
            for key in ("reshuffle_each_iteration", "drop_remainder", "parallel_copy")
            if key in node.attr
        }
        if "deterministic" in node.attr:
            attrs["deterministic"] = node.attr["deterministic"].s.decode()
        functions = tuple(_functions_of(node.attr.values()))
        ops[node.name] = DatasetOp(
            name=node.name,
            op=node.op,
            inputs=tuple(upstream),
            args=args,
            attrs=attrs,
            functions=functions,
            random_ops=tuple(sorted(_random_ops(functions, library))),
            python_calls=_python_calls(functions, library),
        )
    output = None
    for node in graph_def.node:
        if node.op == "_Retval" and node.input:
            output = resolve(node.input[0])
    if output is None:
        raise ContractError(
            "Expected a serialized tf.data pipeline whose `_Retval` is a dataset op. "
            f"Received: a graph of {len(graph_def.node)} nodes without one"
        )
    return DatasetGraph(ops=ops, output=output)


def read_dataset_graph(ds: tf.data.Dataset) -> DatasetGraph:
    """Reads the dataset ops of a `tf.data` pipeline.

    Args:
        ds: a `tf.data.Dataset`.

    Returns:
        The `DatasetGraph`.

    Raises:
        TypeError: if `ds` is not a `tf.data.Dataset`.
    """
    return parse_graph_def(graph_def_of(ds))


def require_dataset(ds) -> None:
    """Raises `TypeError` naming the received type unless `ds` is a `tf.data.Dataset`."""
    if not isinstance(ds, tf.data.Dataset):
        raise ContractError(
            f"Received an invalid value for `ds`, expected a tf.data.Dataset. "
            f"Received: ds of type {type(ds).__name__}"
        )
