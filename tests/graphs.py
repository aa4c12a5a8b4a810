"""What TensorFlow's constant folding would turn into a constant, read from a traced graph.

When a function is instantiated, TensorFlow folds every op whose inputs
are all constants into a `Const` (up to 10 MB each), and Grappler
materializes `ZerosLike`/`OnesLike` of a known shape. A folded tensor the
size of the data stays in the graph, and in memory, for the life of the step
function. `foldable` lists such tensors, in the graph and in every branch
and loop body it holds, and in every function it calls, where an argument
the caller passes as a constant counts as one (Grappler specializes a
call on its constant arguments).

Example:

>>> import tensorflow as tf
>>> @tf.function
... def f(x):
...     return x + tf.cumsum(tf.ones([5000]))
>>> [(op, size) for _, op, size in foldable(f.get_concrete_function(tf.TensorSpec([5000])).graph, 1000)]
[('Fill', 5000), ('Cumsum', 5000)]
"""

from __future__ import annotations

_NEVER_CONSTANT = ("Placeholder", "VarHandleOp", "ReadVariableOp")
_MATERIALIZED = ("ZerosLike", "OnesLike")
_NESTED = ("_true_graph", "_false_graph", "_body_graph", "_cond_graph")


_CALLS = ("PartitionedCall", "StatefulPartitionedCall")


def foldable(graph, min_values: int, where: str = "", constant_args: tuple = ()) -> list[tuple[str, str, int]]:
    """`(graph path, op type, values)` of each computed tensor of at least `min_values` values that folding would make a constant."""
    constant: dict[str, bool] = {t.op.name: True for t, known in zip(graph.inputs, constant_args) if known}
    found = []
    for op in graph.get_operations():
        inputs = list(op.inputs)
        if op.type == "Const":
            constant[op.name] = True
            continue
        if op.type in _MATERIALIZED:
            folds = op.outputs[0].shape.is_fully_defined()
        elif op.type == "Placeholder" and op.name in constant:
            continue
        elif op.type in _NEVER_CONSTANT or op._is_stateful or not inputs:
            folds = False
        else:
            folds = all(constant.get(t.op.name, False) for t in inputs)
        constant[op.name] = folds
        if folds:
            found += [(where + op.name, op.type, t.shape.num_elements()) for t in op.outputs
                      if t.shape.num_elements() is not None and t.shape.num_elements() >= min_values]
        for attribute in _NESTED:
            nested = getattr(op, attribute, None)
            if nested is not None:
                found += foldable(nested, min_values, f"{where}{op.name}{attribute}/")
        if op.type in _CALLS:
            called = graph._get_function(op.get_attr("f").name).graph
            known = tuple(constant.get(t.op.name, False) for t in inputs)
            found += foldable(called, min_values, f"{where}{op.name}/", known)
    return found
