"""Invariants of the trainable variables: what training moves, and what inference reads.

`Fingerprints.take(model)` keeps, for every trainable variable, a CRC of its
bytes and a fixed sample of at most `SAMPLE` values: enough to tell later,
without a copy of the weights, whether the variable moved. A variable that
moved only by a factor below one (weight decay with a zero gradient: every
value scaled alike) counts as not trained.

- `trained_unused`: variables the optimizer moved that the inference pass
  (`model(x, training=False)`) never reads: a teacher, a discarded head.
  Not checked for programs with several optimizers (GANs: a generator and a
  discriminator each trained on purpose) or without a `call`.
- `untrained_variable`: trainable variables that did not move over the
  first epoch while others did, and that the inference output needs
  (perturbing one changes the output: `needed`): an integer cast on the
  path, a misplaced `stop_gradient`, a branch cut from the loss. Weights
  that inference reads but whose effect never reaches the output are found
  too (`discarded`: a LayerNormalization over a single feature outputs its
  offset whatever comes in, and every attention and Conv1D weight before it
  gets an exactly zero gradient). A bias alone the output does not depend
  on (one that cancels in a distance) is kept in the evidence as
  `not_needed`, without a finding. Not checked for
  programs with several optimizers either (a WGAN critic's output bias gets
  no gradient by design).

Example:

>>> import keras, numpy as np
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="d")], name="m")
>>> before = Fingerprints.take(model)
>>> _ = model.layers[0].bias.assign([0.5])
>>> before.moved(model)
['m/d/bias']
"""

from __future__ import annotations

import dataclasses
import zlib

import keras
import numpy as np
import tensorflow as tf

from tfguard._hooks.keras_compat import nested_layers, optimizers_of
from tfguard._hooks.untouched import call_for_inference, untouched
from tfguard.invariants._inference import RELATIVE_TOLERANCE, relative_change

SAMPLE = 1024
"""Values of each variable kept to tell a decay (every value scaled alike) from an update."""

DECAY_TOLERANCE = 1e-5
"""Two ratios new/old within this relative distance are one scale factor (weight decay)."""

PERTURBATION = 0.5
"""Noise added to a variable to ask whether the output needs it, in units of the variable's
root-mean-square value (1 for an all-zero variable)."""


CRC_CHUNK = 2**20
"""Values of a variable copied to the host at a time to take its CRC: never a copy of the whole variable."""


def _values(variable) -> np.ndarray:
    return np.ascontiguousarray(keras.ops.convert_to_numpy(variable.value))


def _fingerprint(variable) -> tuple[int, np.ndarray]:
    """The CRC of `variable`'s bytes and its `SAMPLE` values, read `CRC_CHUNK` values at a time.

    The CRC is the one of the whole array's bytes (`zlib.crc32` carried over
    the chunks); only a chunk at a time is copied to the host, so a
    fingerprint of a 400 MB kernel costs 4 MB, not 400.

    Example:

    >>> v = keras.Variable(np.arange(6, dtype="float32"))
    >>> crc, sample = _fingerprint(v)
    >>> crc == zlib.crc32(np.arange(6, dtype="float32").tobytes()), sample.tolist()
    (True, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    """
    flat = tf.reshape(tf.convert_to_tensor(variable.value), [-1])
    size = int(flat.shape[0])
    crc = 0
    for start in range(0, size, CRC_CHUNK):
        crc = zlib.crc32(np.ascontiguousarray(flat[start:start + CRC_CHUNK].numpy()).view(np.uint8), crc)
    if size <= SAMPLE:
        return crc, flat.numpy().copy()
    return crc, tf.gather(flat, np.linspace(0, size - 1, SAMPLE).astype(np.int64)).numpy()


@dataclasses.dataclass
class Fingerprints:
    """CRC and sampled values of every trainable variable, by path."""

    crc: dict
    samples: dict

    @classmethod
    def take(cls, model: keras.Model) -> Fingerprints:
        """The fingerprints of `model.trainable_variables` now."""
        crc, samples = {}, {}
        for variable in model.trainable_variables:
            crc[variable.path], samples[variable.path] = _fingerprint(variable)
        return cls(crc, samples)

    def moved(self, model: keras.Model) -> list[str]:
        """The paths of the trainable variables whose values changed other than by a decay."""
        moved = []
        for variable in model.trainable_variables:
            if variable.path not in self.crc:
                continue  # created after the fingerprints (built later)
            crc, sample = _fingerprint(variable)
            if crc == self.crc[variable.path]:
                continue
            if not only_scaled(self.samples[variable.path], sample):
                moved.append(variable.path)
        return moved

    @property
    def paths(self) -> list[str]:
        return list(self.crc)


def only_scaled(before: np.ndarray, after: np.ndarray) -> bool:
    """Whether `after` is `before` times one factor in (0, 1) (weight decay, no update).

    Example:

    >>> only_scaled(np.array([1.0, -2.0]), np.array([0.99, -1.98])), only_scaled(np.array([1.0, 2.0]), np.array([0.9, 2.1]))
    (True, False)
    """
    before, after = np.asarray(before, np.float64), np.asarray(after, np.float64)
    nonzero = before != 0
    if not np.any(nonzero) or np.any(after[~nonzero] != 0):
        return False
    ratios = after[nonzero] / before[nonzero]
    factor = float(np.median(ratios))
    if not 0 < factor < 1:
        return False
    return bool(np.all(np.abs(ratios - factor) <= DECAY_TOLERANCE * factor))


def optimizer_count(model: keras.Model) -> int:
    """How many optimizers train the model: `model.optimizer` and optimizer attributes (GANs).

    The default optimizer `compile()` gives a model that trains with its own
    optimizers is counted too, so a GAN counts at least two.
    """
    found = optimizers_of(model)
    inner = {id(getattr(o, "inner_optimizer", None)) for o in found}
    return sum(1 for o in found if id(o) not in inner)


def trained_unused(model: keras.Model, moved: list[str], read: set[str]) -> dict:
    """`trained_unused` record: variables training moved that the inference pass never read.

    Args:
        model: the model.
        moved: paths of the variables training moved (`Fingerprints.moved`).
        read: paths of the variables an inference pass read (`probe.forward(...).read`).

    Returns:
        The record; `ok=False` lists the variables and the layers holding them.
    """
    unused = [path for path in moved if path not in read]
    record = {"check": "trained_unused", "ok": not unused, "where": None,
              "evidence": {"moved": len(moved), "read_at_inference": len(read)}}
    if unused:
        owners = list(dict.fromkeys(_owner(path) for path in unused))
        freeze = outermost_holders(model, set(unused))
        record["where"] = freeze[0] if freeze else owners[0]
        record["evidence"].update(variables=unused, count=len(unused), layers=owners,
                                  parameters=_size(model, unused), freeze=freeze,
                                  attributes=[_attribute(model, name) for name in freeze])
    return record


def outermost_holders(model: keras.Model, paths: set[str]) -> list[str]:
    """The names of the outermost nested layers whose trainable variables all lie in `paths`.

    Example: a distillation model's `teacher` network, rather than each of its Dense layers.
    """
    found, inside = [], set()
    for layer in nested_layers(model):
        if id(layer) in inside:
            continue
        owned = [v.path for v in layer.trainable_variables]
        if owned and set(owned) <= paths:
            found.append(layer.name)
            inside.update(id(sub) for sub in nested_layers(layer))
    return found


def _attribute(model: keras.Model, name: str) -> str | None:
    """The attribute of `model` holding the layer named `name` (`teacher`), if any."""
    for attribute, value in vars(model).items():
        if isinstance(value, keras.layers.Layer) and value.name == name:
            return attribute
    return None


def needed(model: keras.Model, x, paths: list[str], tolerance: float = RELATIVE_TOLERANCE) -> list[str]:
    """The variables among `paths` whose perturbation changes the inference output on `x`.

    Each variable gets noise of `PERTURBATION` times its RMS for one
    inference pass, and is then put back bitwise.
    """
    def outputs():
        return [np.asarray(o) for o in tf.nest.flatten(call_for_inference(model, x))]

    wanted = set(paths)
    found = []
    rng = np.random.default_rng(0)
    with untouched(model):
        base = outputs()
        for variable in model.trainable_variables:
            if variable.path not in wanted:
                continue
            values = _values(variable)
            rms = float(np.sqrt(np.mean(np.square(values, dtype=np.float64)))) or 1.0
            variable.assign(values + (PERTURBATION * rms * rng.standard_normal(values.shape)).astype(values.dtype))
            try:
                changed = max((relative_change(a, b) for a, b in zip(base, outputs())), default=0.0)
            finally:
                variable.assign(values)
            if changed > tolerance:
                found.append(variable.path)
    return found


def untrained(model: keras.Model, moved: list[str], paths: list[str], read: set[str] | None,
              needed_paths: list[str] | None = None) -> dict:
    """`untrained_variable` record: trainable variables that did not move while others did.

    Args:
        model: the model.
        moved: paths of the variables training moved.
        paths: paths of every trainable variable fingerprinted.
        read: paths an inference pass read, when known. Defaults to `None`.
        needed_paths: the unmoved variables the output needs (`needed`), when
            known; the others are listed as `not_needed`. Defaults to `None` (all needed).

    Returns:
        The record; `ok=False` lists the variables by path.
    """
    still = [path for path in paths if path not in set(moved)]
    discarded = []
    if needed_paths is not None:
        not_needed = [p for p in still if p not in set(needed_paths)]
        still = [p for p in still if p in set(needed_paths)]
        # a weight matrix that inference reads but whose effect never reaches the output: something
        # after it throws its work away (a LayerNormalization over a single feature); a bias alone
        # can cancel on purpose (in a distance between two embeddings) and is left out
        ranks = {v.path: len(v.shape) for v in model.trainable_variables}
        discarded = [p for p in not_needed if read is not None and p in read and ranks.get(p, 0) >= 2]
        if discarded:
            owners = {_owner(p) for p in discarded}
            discarded = [p for p in not_needed if read is not None and p in read and _owner(p) in owners]
        not_needed = [p for p in not_needed if p not in discarded]
    record = {"check": "untrained_variable", "ok": True, "where": None,
              "evidence": {"moved": len(moved), "trainable": len(paths)}}
    if not moved:
        record["evidence"]["skipped"] = "no variable moved (a zero learning rate, or every step skipped)"
        return record
    if needed_paths is not None and not_needed:
        record["evidence"]["not_needed"] = not_needed
    if discarded:
        record["evidence"]["discarded"] = discarded
        if not still:
            record["evidence"]["code"] = "discarded"
        still = still + discarded
    if still:
        record.update(ok=False, where=still[0])
        record["evidence"].update(variables=still, count=len(still),
                                  layers=list(dict.fromkeys(_owner(p) for p in still)),
                                  parameters=_size(model, still))
        if read is not None:
            record["evidence"]["read_at_inference"] = [p for p in still if p in read]
    return record


def _owner(path: str) -> str:
    """The path of the deepest layer holding the variable (its path without the last part)."""
    return path.rsplit("/", 1)[0] if "/" in path else path


def _size(model: keras.Model, paths: list[str]) -> int:
    wanted = set(paths)
    return int(sum(int(np.prod(v.shape)) for v in model.trainable_variables if v.path in wanted))


__all__ = ["DECAY_TOLERANCE", "PERTURBATION", "SAMPLE", "Fingerprints", "needed", "only_scaled",
           "optimizer_count", "outermost_holders",
           "trained_unused", "untrained"]
