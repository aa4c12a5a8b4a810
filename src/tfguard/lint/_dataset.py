"""`lint_dataset`: the order of a `tf.data` pipeline, read from its dataset graph.

The checks walk every source-to-output path of the pipeline (see
`tfguard.lint._dataset_graph`) and report:

| code | severity | what |
|---|---|---|
| `shuffle_after_batch` | warning | batches are shuffled as units; their contents never change |
| `cache_after_random_map` | warning | random augmentation is cached: every epoch sees the first epoch's draw |
| `cache_after_shuffle` | warning | the first epoch's order is cached: every epoch sees the same order |
| `shuffle_buffer_too_small` | warning | `shuffle(1)` keeps the order as it is |
| `repeat_before_shuffle` | info | epochs blur: one epoch's examples mix into the next |
| `sequential_map` | info | `map` without `num_parallel_calls` |
| `sequential_interleave` | info | `interleave` without `num_parallel_calls` |
| `no_prefetch` | info | the pipeline does not end with `prefetch` |
| `prefetch_not_last` | info | `prefetch` is used, but not as the last step |
| `unreadable_pipeline` | info | the graph could not be serialized; nothing was checked |
| `python_map` | warning | a stage calls Python (`tf.py_function`, `tf.numpy_function`): id `python_in_pipeline` |
| `generator_source` | warning | the source is `Dataset.from_generator`: id `python_in_pipeline` |

Every finding has `id="pipeline_order"` (`python_in_pipeline` for the
calls into Python, with the TensorFlow op that would do the same when the
function is a common one); `where` names the op and its
position in the chain (0 = the source), and `evidence["chain"]` lists the op
types from the source to the output.

Example:

>>> import tensorflow as tf
>>> ds = tf.data.Dataset.range(100).batch(10).shuffle(10).prefetch(tf.data.AUTOTUNE)
>>> [f.code for f in lint_dataset(ds)]
['shuffle_after_batch']
"""

from __future__ import annotations

import inspect

import tensorflow as tf

from tfguard._findings import Finding
from tfguard.lint._dataset_graph import (
    BATCH_OPS,
    BOOKKEEPING_OPS,
    CACHE_OPS,
    MAP_OPS,
    PREFETCH_OPS,
    REPEAT_OPS,
    SHUFFLE_OPS,
    UNBATCH_OPS,
    DatasetGraph,
    DatasetOp,
    python_function,
    read_dataset_graph,
    require_dataset,
)
from tfguard.lint._symptom_ids import PIPELINE_ORDER, PYTHON_IN_PIPELINE

_RULES = []


def _rule(fn):
    _RULES.append(fn)
    return fn


class _Context:
    """One path of the pipeline plus what every rule needs to name an op."""

    def __init__(self, path: list[DatasetOp], graph: DatasetGraph, options: tf.data.Options):
        self.path = path
        self.graph = graph
        self.options = options
        self.types = [op.op for op in path]

    def finding(self, code, severity, index, message, suggestion, *, symptom=PIPELINE_ORDER,
                **evidence) -> Finding:
        op = self.path[index]
        return Finding(
            id=symptom,
            severity=severity,
            message=message[0].upper() + message[1:],
            where=f"{op.op} '{op.name}' at position {index} of {len(self.path)} (0 = source)",
            evidence={
                "code": code,
                "op": op.op,
                "node": op.name,
                "position": index,
                "chain": self.types,
                **evidence,
            },
            suggestion=suggestion,
        )

    def below(self, index: int, types) -> int | None:
        """Index of the nearest op of `types` upstream of `index` (closer to the source)."""
        for j in range(index - 1, -1, -1):
            if self.types[j] in types:
                return j
        return None

    def above(self, index: int, types) -> int | None:
        """Index of the nearest op of `types` downstream of `index` (closer to the output)."""
        for j in range(index + 1, len(self.types)):
            if self.types[j] in types:
                return j
        return None


@_rule
def _shuffle_after_batch(ctx: _Context):
    for i, op in enumerate(ctx.path):
        if op.op not in SHUFFLE_OPS:
            continue
        b = ctx.below(i, BATCH_OPS)
        if b is None:
            continue
        u = ctx.below(i, UNBATCH_OPS)
        if u is not None and u > b:
            continue
        yield ctx.finding(
            "shuffle_after_batch",
            "warning",
            i,
            f"shuffle ({op.op}) comes after batch ({ctx.types[b]} at position {b}): whole "
            "batches are shuffled, so the same examples always train together and each "
            "batch's composition never changes between epochs.",
            "Call .shuffle(buffer_size) before .batch(batch_size).",
            batch_op=ctx.types[b],
            batch_position=b,
        )


@_rule
def _cache_after_random_map(ctx: _Context):
    for i, op in enumerate(ctx.path):
        if op.op not in CACHE_OPS:
            continue
        for j in range(i - 1, -1, -1):
            upstream = ctx.path[j]
            if upstream.op in MAP_OPS and upstream.is_random:
                yield ctx.finding(
                    "cache_after_random_map",
                    "warning",
                    i,
                    f"cache ({op.op}) stores the output of a random map ({upstream.op} at "
                    f"position {j}, random ops {list(upstream.random_ops)}): the augmentation "
                    "is drawn once, in the first epoch, and replayed from the cache ever after.",
                    "Move .cache() before the random map (cache the deterministic part, "
                    "augment after it).",
                    map_op=upstream.op,
                    map_node=upstream.name,
                    map_position=j,
                    random_ops=list(upstream.random_ops),
                )
                break


@_rule
def _cache_after_shuffle(ctx: _Context):
    for i, op in enumerate(ctx.path):
        if op.op not in CACHE_OPS:
            continue
        s = ctx.below(i, SHUFFLE_OPS)
        if s is None or ctx.above(i, SHUFFLE_OPS) is not None:
            continue
        yield ctx.finding(
            "cache_after_shuffle",
            "warning",
            i,
            f"cache ({op.op}) stores the order produced by shuffle ({ctx.types[s]} at "
            f"position {s}) and no shuffle follows it: the first epoch's order is replayed "
            "in every later epoch.",
            "Call .cache() before .shuffle().",
            shuffle_op=ctx.types[s],
            shuffle_position=s,
        )


@_rule
def _shuffle_buffer(ctx: _Context):
    for i, op in enumerate(ctx.path):
        if op.op in SHUFFLE_OPS and op.args.get("buffer_size") == 1:
            yield ctx.finding(
                "shuffle_buffer_too_small",
                "warning",
                i,
                "shuffle has buffer_size=1, which returns the examples in their original "
                "order: nothing is shuffled.",
                "Use a buffer of at least a few thousand examples, or the dataset size "
                "when it fits in memory.",
                buffer_size=1,
            )


@_rule
def _repeat_before_shuffle(ctx: _Context):
    for i, op in enumerate(ctx.path):
        if op.op not in SHUFFLE_OPS or op.op in REPEAT_OPS:
            continue
        r = ctx.below(i, REPEAT_OPS)
        if r is None:
            continue
        count = ctx.path[r].args.get("count")
        if count == 1:
            continue
        yield ctx.finding(
            "repeat_before_shuffle",
            "info",
            i,
            f"shuffle comes after repeat ({ctx.types[r]} at position {r}, count={count}): "
            "epoch boundaries blur, so some examples are seen twice before others are seen "
            "once.",
            "Call .shuffle() before .repeat() for clean epochs.",
            repeat_position=r,
            repeat_count=count,
        )


@_rule
def _sequential_map(ctx: _Context):
    auto = ctx.options.experimental_optimization.map_parallelization is not False
    for i, op in enumerate(ctx.path):
        internal = i + 1 < len(ctx.path) and ctx.types[i + 1] == "UnbatchDataset"
        if op.op == "MapDataset" and not internal:  # unbatch() adds a map of its own
            stateful = op.is_random and any(not t.startswith("Stateless") for t in op.random_ops)
            will_parallelize = auto and not stateful
            yield ctx.finding(
                "sequential_map",
                "info",
                i,
                "map runs without num_parallel_calls, one element at a time"
                + (
                    " (tf.data's map_parallelization may parallelize it when the function is "
                    "stateless)."
                    if will_parallelize
                    else "."
                ),
                "Pass num_parallel_calls=tf.data.AUTOTUNE to .map().",
                auto_parallelized=will_parallelize,
            )
        elif op.op == "InterleaveDataset":
            yield ctx.finding(
                "sequential_interleave",
                "info",
                i,
                "Interleave runs without num_parallel_calls: files are read one at a time.",
                "Pass num_parallel_calls=tf.data.AUTOTUNE to .interleave().",
            )


#: Python/NumPy/PIL calls with a TensorFlow op that does the same inside the graph.
TF_REWRITES = (
    ("resize", "tf.image.resize(image, size)"),
    ("np.clip", "tf.clip_by_value(x, low, high)"),
    ("clip(", "tf.clip_by_value(x, low, high)"),
    ("fliplr", "tf.image.flip_left_right(image)"),
    ("flip(", "tf.image.flip_left_right / flip_up_down"),
    ("rot90", "tf.image.rot90(image)"),
    ("astype", "tf.cast(x, dtype)"),
    ("/ 255", "tf.cast(x, tf.float32) / 255.0"),
    ("np.log", "tf.math.log(x)"),
    ("np.exp", "tf.math.exp(x)"),
    ("np.mean", "tf.reduce_mean(x)"),
    ("np.pad", "tf.pad(x, paddings)"),
    ("imread", "tf.io.read_file(path) + tf.io.decode_image(contents)"),
    ("Image.open", "tf.io.read_file(path) + tf.io.decode_image(contents)"),
    ("open(", "tf.io.read_file(path)"),
    ("json.loads", "tf.io.parse_example / tf.io.decode_json_example"),
    (".split(", "tf.strings.split(text)"),
    (".lower(", "tf.strings.lower(text)"),
)


def _rewrite_for(token: str) -> tuple[str | None, str | None]:
    """`(function name, suggested TF op)` of the Python callable behind a py_function op."""
    function = python_function(token)
    if function is None:
        return None, None
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return name, None
    for needle, rewrite in TF_REWRITES:
        if needle in source:
            return name, rewrite
    return name, None


@_rule
def _python_stages(ctx: _Context):
    for i, op in enumerate(ctx.path):
        if not op.python_calls:
            continue
        kinds = sorted({kind for kind, _ in op.python_calls})
        if "GeneratorDataset" in kinds:
            yield ctx.finding(
                "generator_source", "warning", i,
                "the pipeline's source is Dataset.from_generator: every element is produced by "
                "Python, one at a time under the GIL, so num_parallel_calls and prefetch cannot "
                "speed it up, and the pipeline cannot be saved with the model.",
                "Build the source from the data itself: from_tensor_slices for arrays in "
                "memory, TFRecord files (tf.data.TFRecordDataset) or list_files + "
                "tf.io.read_file for files on disk.",
                python_ops=kinds, symptom=PYTHON_IN_PIPELINE,
            )
            continue
        tokens = [token for kind, token in op.python_calls if token]
        name, rewrite = _rewrite_for(tokens[0]) if tokens else (None, None)
        called = f" ({name})" if name else ""
        fix = (f"Rewrite the function with TensorFlow ops, e.g. {rewrite}, and drop the "
               "py_function." if rewrite else
               "Rewrite the function with TensorFlow ops (tf.image, tf.strings, tf.math, tf.io) "
               "and drop the py_function; keep Python for what only Python can do, offline.")
        yield ctx.finding(
            "python_map", "warning", i,
            f"{op.op} at position {i} calls Python{called} through "
            f"{' and '.join(kinds)}: it runs under the GIL, one element at a time whatever "
            "num_parallel_calls says, and cannot be serialized into a SavedModel.",
            fix, python_ops=kinds, python_function=name or "", rewrite=rewrite or "",
            symptom=PYTHON_IN_PIPELINE,
        )


def _prefetch_findings(ctx: _Context):
    last = len(ctx.path) - 1
    while last > 0 and ctx.types[last] in BOOKKEEPING_OPS:
        last -= 1
    if ctx.types[last] in PREFETCH_OPS:
        return
    p = ctx.below(last + 1, PREFETCH_OPS)
    if p is None:
        yield ctx.finding(
            "no_prefetch",
            "info",
            last,
            f"The pipeline ends with {ctx.types[last]} and never prefetches: the "
            "accelerator waits while the next batch is prepared.",
            "End the pipeline with .prefetch(tf.data.AUTOTUNE).",
        )
    else:
        yield ctx.finding(
            "prefetch_not_last",
            "info",
            last,
            f"prefetch is at position {p} but the pipeline ends with {ctx.types[last]}: the "
            "steps after it are not overlapped with training.",
            "Move .prefetch(tf.data.AUTOTUNE) to the end of the pipeline.",
            prefetch_position=p,
        )


def lint_dataset(ds: tf.data.Dataset) -> list[Finding]:
    """Checks the order of the ops of a `tf.data` pipeline.

    Example:

    >>> import tensorflow as tf
    >>> ds = (tf.data.Dataset.range(100).shuffle(100).batch(10)
    ...       .map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
    ...       .prefetch(tf.data.AUTOTUNE))
    >>> lint_dataset(ds)
    []

    Args:
        ds: a `tf.data.Dataset`.

    Returns:
        A list of `Finding`, one per problem and op (a branch shared by
        several paths is reported once).

    Raises:
        TypeError: if `ds` is not a `tf.data.Dataset`.
    """
    require_dataset(ds)
    try:
        graph = read_dataset_graph(ds)
    except (tf.errors.OpError, ValueError) as err:
        return [
            Finding(
                id=PIPELINE_ORDER,
                severity="info",
                message=f"The pipeline's graph could not be read, so it was not checked: {err}",
                where=f"dataset {type(ds).__name__}",
                evidence={"code": "unreadable_pipeline", "error": str(err)[:500]},
                suggestion="",
            )
        ]
    options = ds.options()
    findings, seen = [], set()
    paths = graph.paths()
    contexts = [_Context(path, graph, options) for path in paths]
    main = _Context(graph.chain(), graph, options)
    for ctx in contexts:
        for rule in _RULES:
            for finding in rule(ctx):
                key = (finding.code, finding.evidence["node"])
                if key not in seen:
                    seen.add(key)
                    findings.append(finding)
    findings.extend(_prefetch_findings(main))
    return findings


def is_batched(ds: tf.data.Dataset) -> bool:
    """True when the main chain of a pipeline batches (and does not unbatch after).

    Args:
        ds: a `tf.data.Dataset`.

    Returns:
        Whether an element of `ds` is a batch.

    Raises:
        TypeError: if `ds` is not a `tf.data.Dataset`.
    """
    types = [op.op for op in read_dataset_graph(ds).chain()]
    for op_type in reversed(types):
        if op_type in BATCH_OPS:
            return True
        if op_type in UNBATCH_OPS and op_type == "UnbatchDataset":
            return False
    return False
