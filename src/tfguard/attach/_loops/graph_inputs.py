"""What a traced loop step holds that tfguard did not put there: its batch, its layers' activations.

A hand-written loop's `tf.function` is traced before tfguard knows its
model (the first update is where a loop shows itself), so its layers
carry no taps in that trace. The graph has what the step computed anyway:

* `batch_arguments(graph)`: the function's own arguments (not the
  variables it captured): its batch;
* `activation_outputs(graph, start, variables)`: the outputs of the ReLU,
  sigmoid and tanh operations built since operation `start`, each named by
  the layer whose variable feeds it most closely (walking back through at
  most `DEPTH` operations to a read of a captured variable: a Dense's
  `Relu` reads its bias two operations up), so they agree with the
  gradient norms' layer names. The operations of the gradient tape are
  left out; an activation that no variable feeds (on the input itself) is
  too.

Example:

>>> import keras, tensorflow as tf
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="relu", name="hidden")], name="m")
>>> @tf.function
... def step(x):
...     graph = tf.compat.v1.get_default_graph()
...     y = model(x)
...     found = activation_outputs(graph, 0, model.trainable_variables)
...     print([(variable.path, kind) for variable, kind, _ in found], len(batch_arguments(graph)))
...     return y
>>> _ = step(tf.ones((4, 3)))
[('m/hidden/bias', 'relu')] 1
"""

from __future__ import annotations

import keras
import tensorflow as tf

from tfguard._hooks import tf_compat

ACTIVATIONS = {"Relu": "relu", "Relu6": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh"}
"""Operation type -> the kind `tfguard._signals.stats` measures (dead units; saturation)."""
DEPTH = 4
"""Operations walked back from an activation to the variable that names its layer."""
_READS = ("ReadVariableOp", "ResourceGather")
_TAPE_SCOPE = "gradient_tape/"


def batch_arguments(graph) -> list[tf.Tensor]:
    """The function's arguments that are numbers (not captured variables or values), in order."""
    captured = {id(inner) for _, inner in tf_compat.captures(graph)}
    return [t for t in graph.inputs if id(t) not in captured
            and (t.dtype.is_floating or t.dtype.is_integer)]


def _handles(variables) -> dict[int, object]:
    """id(resource handle) -> the variable, for Keras and TensorFlow variables."""
    found = {}
    for variable in variables:
        inner = variable.value if isinstance(variable, keras.Variable) else variable
        handle = getattr(inner, "handle", None)
        if handle is not None:
            found[id(handle)] = variable
    return found


def _outer(tensor, captured: dict) -> object:
    """The eager handle a captured placeholder stands for (through the graphs of nested functions)."""
    while True:
        outer = captured.get(id(tensor))
        if outer is None or not tf.is_symbolic_tensor(outer):
            return tensor if outer is None else outer
        tensor = outer
        captured = {id(inner): o for o, inner in tf_compat.captures(outer.graph)} \
            if hasattr(outer.graph, "captures") else {}


def _nearest_variable(op, captured: dict, handles: dict):
    frontier, seen = [op], {op.name}
    for _ in range(DEPTH):
        following = []
        for node in frontier:
            for tensor in node.inputs:
                parent = tensor.op
                if parent.name in seen:
                    continue
                seen.add(parent.name)
                if parent.type in _READS and parent.inputs:
                    variable = handles.get(id(_outer(parent.inputs[0], captured)))
                    if variable is not None:
                        return variable
                if parent.type not in ACTIVATIONS:
                    following.append(parent)
        frontier = following
    return None


def activation_outputs(graph, start: int, variables) -> list[tuple[object, str, tf.Tensor]]:
    """`(variable, kind, output)` of each activation operation built since operation `start` (see the module)."""
    operations = graph.get_operations()[start:]
    chosen = [op for op in operations if op.type in ACTIVATIONS and not op.name.startswith(_TAPE_SCOPE)]
    if not chosen:
        return []
    captured = {id(inner): outer for outer, inner in tf_compat.captures(graph)}
    handles = _handles(variables)
    found = []
    for op in chosen:
        variable = _nearest_variable(op, captured, handles)
        if variable is not None:
            found.append((variable, ACTIVATIONS[op.type], op.outputs[0]))
    return found


def operation_count(graph) -> int:
    """How many operations the graph holds now."""
    return len(graph.get_operations())


__all__ = ["ACTIVATIONS", "DEPTH", "activation_outputs", "batch_arguments", "operation_count"]
