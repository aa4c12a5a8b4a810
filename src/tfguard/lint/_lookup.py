"""What a model does with each input: looks its values up (ids), or computes with them (numbers).

An integer (or integer-valued) input that the model only uses as indices,
through a gather (`Embedding` at any depth of nesting, `keras.ops.take`), a
`one_hot`, a lookup table (`StringLookup`, `IntegerLookup`), a hash or a
bucketize, has no numeric scale: its mean and standard deviation say
nothing about normalization. Layer classes cannot tell that (a user's
`TokenAndPositionEmbedding` wraps the `Embedding`), so `input_uses` traces
the model once on a symbolic batch and follows each input through the
graph: a lookup op reading it as indices ends a path as "lookup", an op
that computes against the weights (a matmul, a convolution, a bias add) or
the model's output ends it as "numeric", ops that read shapes or compare
(masks) end it harmlessly, and every other op (casts, reshapes, the
`where(ids < 0, ids + n, ids)` of `keras.ops.take`, a rescaling) is walked
through. An input is `"lookup"` when every path ends in a lookup.

Example:

>>> import keras
>>> ids = keras.Input((5,), dtype="int32")
>>> model = keras.Model(ids, keras.layers.Dense(1)(keras.layers.Embedding(10, 4)(ids)))
>>> input_uses(model)
['lookup']
"""

from __future__ import annotations

import weakref

import keras
import tensorflow as tf

from tfguard._hooks.untouched import call, untouched
from tfguard.lint._heads import input_shapes

#: Ops that read their input as indices or keys: the value has no numeric scale.
LOOKUP_OPS = frozenset({
    "ResourceGather", "GatherV2", "Gather", "GatherNd", "ResourceGatherNd", "OneHot",
    "LookupTableFindV2", "LookupTableFind", "StringToHashBucketFast", "StringToHashBucketStrong",
    "StringToHashBucket", "Bucketize", "Bincount", "DenseBincount", "SparseBincount",
    "RaggedBincount", "UnsortedSegmentSum", "TensorScatterUpdate",
})
#: Ops that compute with the values as numbers, against the model's weights.
NUMERIC_OPS = frozenset({
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Einsum", "Conv1D", "Conv2D",
    "Conv3D", "Conv2DBackpropInput", "Conv3DBackpropInputV2", "DepthwiseConv2dNative",
    "BiasAdd", "FusedBatchNormV3", "SparseMatMul", "LSTM", "CudnnRNNV3",
})
#: Ops whose output does not carry the values' scale (shapes, masks, comparisons).
HARMLESS_OPS = frozenset({
    "Shape", "ShapeN", "Size", "Rank", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
    "GreaterEqual", "IsNan", "IsFinite", "IsInf", "Assert", "NoOp", "CheckNumerics",
    "ZerosLike", "OnesLike",
})
_INDEX_INPUT = {"ResourceGather": 1, "GatherV2": 1, "Gather": 1, "GatherNd": 1,
                "ResourceGatherNd": 1, "OneHot": 0, "UnsortedSegmentSum": 1}

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _use_of(placeholder: tf.Tensor, outputs: set, limit: int = 20000) -> str:
    """Follows one input forward: `"lookup"` when every path meets a lookup before any weight."""
    seen, frontier, looked_up = set(), [placeholder], False
    while frontier:
        tensor = frontier.pop()
        if tensor.name in outputs:
            return "numeric"  # the value reaches the model's output as it is
        for op in tensor.consumers():
            if op.type in LOOKUP_OPS:
                index = _INDEX_INPUT.get(op.type)
                if index is None or (index < len(op.inputs) and op.inputs[index] is tensor):
                    looked_up = True
                    continue  # read as indices: the path ends here
            elif op.type in NUMERIC_OPS:
                return "numeric"
            elif op.type in HARMLESS_OPS:
                continue
            if op.name not in seen:
                if len(seen) > limit:
                    return "numeric"
                seen.add(op.name)
                frontier.extend(op.outputs)
    return "lookup" if looked_up else "unused"


def _structure(model):
    """`(specs in the model's input structure, the KerasTensors in flatten order)`, or `(None, None)`."""
    try:
        struct = model.input
    except (AttributeError, ValueError, TypeError):
        struct = None
    if struct is not None:
        tensors = tf.nest.flatten(struct)
        specs = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, tf.as_dtype(t.dtype)), struct)
        return specs, tensors
    shapes = input_shapes(model)
    if not shapes:
        return None, None
    specs = [tf.TensorSpec(shape, tf.float32) for shape in shapes]
    return (specs[0] if len(specs) == 1 else specs), None


def input_uses(model: keras.Model) -> list[str] | None:
    """How the model uses each input: `"lookup"`, `"numeric"` or `"unused"`; `None` when unknown.

    Traces the model once (cached per model) on symbolic inputs of its
    known shapes; a model never built, or one that cannot be traced, is
    `None`.

    Args:
        model: a Keras model.

    Returns:
        One use per input, in the order of `model.inputs` (of `input_shapes(model)`
        for a subclassed model), or `None`.
    """
    if _CACHE.get(model) is not None:
        return _CACHE[model]
    uses = None
    specs, tensors = _structure(model)
    if specs is not None:
        try:
            count = len(tf.nest.flatten(specs))
            with untouched(model):
                graph = tf.function(lambda x: call(model, x, training=False)).get_concrete_function(specs).graph
            outputs = {t.name for t in graph.outputs}
            uses = [_use_of(placeholder, outputs) for placeholder in graph.inputs[:count]]
            if tensors is not None:  # flatten order (sorted dict keys) -> the order of model.inputs
                by_id = {id(t): use for t, use in zip(tensors, uses)}
                uses = [by_id.get(id(t)) for t in model.inputs]
        except Exception:  # noqa: BLE001 - any failure to trace means "unknown", never an error
            uses = None
    if uses is not None:  # an unbuilt model may be traced once it is built
        _CACHE[model] = uses
    return uses


__all__ = ["HARMLESS_OPS", "LOOKUP_OPS", "NUMERIC_OPS", "input_uses"]
