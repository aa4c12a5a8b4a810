"""Turn the runs `tfguard.events.read_logdir` returns into normalized `Signals`.

Two layouts are recognized:

- tfguard's: one run directory holds every tag of `tfguard._tags`
  (`train/loss`, `val/loss`, `grad_norm/<layer>`, `config/model`, ...), all
  at the optimizer's global step. Tags pass through unchanged.
- the stock `keras.callbacks.TensorBoard` callback's: a run directory with
  subfolders `train/` and `validation/`, tags `epoch_<metric>` (at the epoch
  index), `batch_<metric>` (at the batch count, Keras's running mean over the
  epoch), `evaluation_<metric>_vs_iterations` (validation at the optimizer's
  step) and weight histograms `<layer>/<variable>/histogram`. They become
  one run named after the parent folder with tags `train/<metric>`,
  `val/<metric>`, `batch/<metric>`, `optimizer/learning_rate` and
  `hist/weights/<variable>`; the validation steps give each epoch its last
  global step.

Example:

>>> from tfguard.diagnose._inputs.normalize import keras_tag
>>> keras_tag("epoch_accuracy", "validation"), keras_tag("epoch_learning_rate", "train")
('val/accuracy', 'optimizer/learning_rate')
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping

import numpy as np

from tfguard import _tags
from tfguard._findings import event_record, from_strict_json
from tfguard.diagnose._inputs.signals import Series, Signals, epochs_for

#: Text tag where the static checks (tfguard.lint) may store their findings as JSON.
CONFIG_LINT = _tags.CONFIG_LINT

_KERAS_RUNS = ("train", "validation")
_TFGUARD_PREFIXES = _tags.SCALAR_NAMESPACES


def run_family(name: str) -> str:
    """The run a log folder belongs to: the parent of a Keras `train/` or `validation/` folder, else itself.

    Example:

    >>> run_family("sweep/lr_0.1/train"), run_family("sweep/lr_0.1"), run_family("train")
    ('sweep/lr_0.1', 'sweep/lr_0.1', '.')
    """
    if posixpath.basename(name) in _KERAS_RUNS:
        return posixpath.dirname(name) or "."
    return name


def keras_tag(tag: str, subrun: str) -> str | None:
    """The tfguard tag of a stock Keras TensorBoard scalar tag, or `None` to drop it.

    Args:
        tag: the Keras tag, e.g. `"epoch_loss"`.
        subrun: `"train"` or `"validation"`.

    Returns:
        e.g. `"train/loss"`, `"val/loss"`, `"batch/loss"`, `"optimizer/learning_rate"`.
    """
    if tag.startswith("epoch_"):
        name = tag[len("epoch_"):]
        if subrun == "train":
            if name == "learning_rate":
                return _tags.LEARNING_RATE
            if name == "steps_per_second":
                return _tags.STEPS_PER_SECOND
            return _tags.train(name)
        return _tags.val(name)
    if tag.startswith("batch_") and subrun == "train":
        name = tag[len("batch_"):]
        return None if name == "steps_per_second" else _tags.batch(name)
    return None


def _is_keras(run) -> bool:
    base = posixpath.basename(run.name)
    if base not in _KERAS_RUNS:
        return False
    names = list(run.scalars) + list(run.histograms)
    if any(t.startswith(_TFGUARD_PREFIXES) for t in names):
        return False
    return any(t.startswith(("epoch_", "batch_", "evaluation_")) or t.endswith("/histogram")
               for t in names) or not names


def _is_empty(run) -> bool:
    return not (run.scalars or run.histograms or run.texts)


DAMAGE_NOTES = ("damaged event file ", "unfinished record in event file ")
"""How a note about an event file's bad spot starts: data lost there, or a record cut at the end."""


def damage_note(damage) -> str:
    """The note of one bad spot (`tfguard.events.Damage`), in the words the reports and the watch use.

    A record cut at the end of a file (`kind == "truncated"`) is what a
    writer still writing leaves: it is said unfinished, not damaged.

    Example:

    >>> from tfguard.events import Damage
    >>> damage_note(Damage("f", 21, "truncated record: 3 trailing bytes", "truncated"))
    'unfinished record in event file f at offset 21: the file ends inside it (still being written, or its writer stopped mid-record); the records before it were read'
    """
    if damage.kind == "truncated":
        return (f"{DAMAGE_NOTES[1]}{damage.path} at offset {damage.offset}: the file ends inside it "
                "(still being written, or its writer stopped mid-record); the records before it "
                "were read")
    return f"{DAMAGE_NOTES[0]}{damage.path} at offset {damage.offset}: {damage.reason}"


def _notes(run) -> list[str]:
    return [damage_note(d) for d in getattr(run, "damage", [])]


def _texts(run) -> dict:
    return {tag: [(int(step), text) for step, _wall, text in points]
            for tag, points in run.texts.items()}


def _json(text):
    """`text` parsed as JSON, or `None` (not JSON, or nested deeper than the parser allows)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None


def _last_json(texts: dict, tag: str):
    for _step, text in reversed(texts.get(tag, [])):
        found = _json(text)
        if found is not None:
            return found
    return None


def hparams_table(texts: dict) -> dict[str, str]:
    """The run's own hyperparameter table (`config/hparams` markdown): name -> the literal text.

    Example:

    >>> text = "| hparam | value |" + chr(10) + "| --- | --- |" + chr(10) + "| batch | 64 |"
    >>> hparams_table({"config/hparams": [(0, text)]})
    {'batch': '64'}
    """
    found = {}
    for _step, text in texts.get(_tags.CONFIG_HPARAMS, [])[-1:]:
        for line in (text or "").splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 2 or set(cells[0]) <= set("-: ") or cells[0].lower() in ("name", "hparam"):
                continue
            found[cells[0]] = cells[1]
    return found


def _typed_hparams(plugin: dict, table: dict) -> dict:
    """The HParams plugin's values with integers as the user gave them (the plugin stores doubles).

    The `config/hparams` table holds each value as written (`64`, not
    `64.0`): a double whose cell reads as an integer is that integer.
    """
    typed = dict(plugin)
    for key, value in plugin.items():
        cell = table.get(key)
        if isinstance(value, float) and value.is_integer() and isinstance(cell, str) and \
                cell.lstrip("-").isdigit():
            typed[key] = int(cell)
    return typed


def _histograms(run, rename=lambda t: t) -> dict:
    out = {}
    for tag, points in run.histograms.items():
        new = rename(tag)
        if new is not None:
            out[new] = [(int(p.step), np.asarray(p.buckets, dtype=np.float64)) for p in points]
    return out


def _lint(texts: dict, extra) -> list:
    found = _last_json(texts, CONFIG_LINT)
    items = list(found) if isinstance(found, list) else []
    if not isinstance(found, list):  # not JSON: a markdown list, one finding a line
        for _step, text in texts.get(CONFIG_LINT, [])[-1:]:
            items = [line.strip("-* ").strip() for line in (text or "").splitlines() if line.strip()]
    return items + list(extra or [])


def _whole(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _guard_events(texts: dict) -> list[dict]:
    """The firewall's JSON records; one that is not what the Logger writes (a field of another type) is left out."""
    events = []
    for _step, text in texts.get(_tags.GUARD_RECORDS, []):
        record = _json(text)
        if not isinstance(record, dict):
            continue
        try:
            event = event_record(from_strict_json(record))
        except (TypeError, ValueError, AttributeError):
            continue
        event["batch"], event["epoch"] = _whole(event.get("batch")), _whole(event.get("epoch"))
        events.append(event)
    return events


def _status(texts: dict) -> dict | None:
    found = _last_json(texts, _tags.RUN_STATUS)
    return found if isinstance(found, dict) else None


def tfguard_signals(run, *, name: str | None = None, lint=None) -> Signals:
    """Signals of one run written in tfguard's layout (tags unchanged).

    Args:
        run: a `tfguard.events.Run`.
        name: the run's name in reports. Defaults to `None` (`run.name`).
        lint: extra static findings. Defaults to `None`.

    Returns:
        A `Signals` with `source="tfguard"`.
    """
    texts = _texts(run)
    raw = {tag: (np.asarray(st, np.int64), np.asarray(v, np.float64))
           for tag, (st, _w, v) in run.scalars.items()}
    ends = None
    if _tags.EPOCH in raw and len(raw[_tags.EPOCH][0]):
        ends = raw[_tags.EPOCH][0]
    elif _tags.train("loss") in raw and len(raw[_tags.train("loss")][0]):
        ends = raw[_tags.train("loss")][0]
    scalars = {tag: Series(st, v, epochs_for(st, ends)) for tag, (st, v) in raw.items()}
    model = _last_json(texts, _tags.CONFIG_MODEL)
    table = hparams_table(texts)
    hparams = _typed_hparams(dict(run.hparams), table) if run.hparams else table
    return Signals(
        run=name or run.name, scalars=scalars, histograms=_histograms(run), hparams=hparams,
        model=model if isinstance(model, dict) else None, lint=_lint(texts, lint), texts=texts,
        source="tfguard", epoch_end_steps=ends, notes=_notes(run), path=run.path,
        guard_events=_guard_events(texts), status=_status(texts),
    )


def _keras_epoch_ends(validation, n_epochs: int) -> np.ndarray | None:
    if validation is None:
        return None
    evals = [t for t in validation.scalars if t.startswith("evaluation_") and t.endswith("_vs_iterations")]
    epoch_tags = [t for t in validation.scalars if t.startswith("epoch_")]
    if not evals or not epoch_tags:
        return None
    iters = np.asarray(validation.scalars[sorted(evals)[0]][0], dtype=np.int64)
    epochs = np.asarray(validation.scalars[sorted(epoch_tags)[0]][0], dtype=np.int64)
    if len(iters) != len(epochs) or not len(iters):
        return None
    per_epoch = iters / (epochs + 1)
    if np.allclose(per_epoch, per_epoch[0]) and float(per_epoch[0]).is_integer():
        count = max(n_epochs, int(epochs.max()) + 1)
        return (np.arange(1, count + 1) * int(per_epoch[0])).astype(np.int64)
    if np.array_equal(epochs, np.arange(len(epochs))) and len(epochs) >= n_epochs:
        return iters
    return None


def keras_signals(train, validation, *, name: str, parent=None, lint=None) -> Signals:
    """Signals of one run written by the stock `keras.callbacks.TensorBoard`.

    Args:
        train: the `Run` of the `train/` subfolder, or `None`.
        validation: the `Run` of the `validation/` subfolder, or `None`.
        name: the run's name in reports (the parent folder).
        parent: the `Run` of the parent folder itself (hparams), or `None`. Defaults to `None`.
        lint: extra static findings. Defaults to `None`.

    Returns:
        A `Signals` with `source="keras"`.
    """
    raw: dict[str, tuple[np.ndarray, np.ndarray, bool]] = {}
    for run, subrun in ((train, "train"), (validation, "validation")):
        if run is None:
            continue
        for tag, (steps, _wall, values) in run.scalars.items():
            new = keras_tag(tag, subrun)
            if new is not None:
                raw[new] = (np.asarray(steps, np.int64), np.asarray(values, np.float64),
                            tag.startswith("epoch_"))
    n_epochs = max([len(s) for s, _v, by_epoch in raw.values() if by_epoch] or [0])
    ends = _keras_epoch_ends(validation, n_epochs)
    scalars = {}
    for tag, (steps, values, by_epoch) in raw.items():
        if by_epoch:
            epochs = steps
            if ends is not None:
                known = epochs < len(ends)
                steps = np.where(known, ends[np.minimum(epochs, len(ends) - 1)], -1)
            else:
                steps = np.full(len(values), -1, dtype=np.int64)
            scalars[tag] = Series(steps.astype(np.int64), values, epochs.astype(np.int64))
        else:
            scalars[tag] = Series(steps, values, epochs_for(steps, ends))
    notes = []
    if _tags.batch("loss") in scalars:
        notes.append("batch/loss is Keras's running mean over each epoch, not per-batch losses")
    hparams, texts, runs = {}, {}, [r for r in (parent, train, validation) if r is not None]
    for run in runs:
        hparams.update(run.hparams)
        texts.update(_texts(run))
        notes.extend(_notes(run))

    def weight_tag(tag):
        return _tags.hist_weights(tag[: -len("/histogram")]) if tag.endswith("/histogram") else None

    histograms = _histograms(train, weight_tag) if train is not None else {}
    model = _last_json(texts, _tags.CONFIG_MODEL)
    base = train or validation or parent
    return Signals(
        run=name, scalars=scalars, histograms=histograms, hparams=hparams,
        model=model if isinstance(model, dict) else None, lint=_lint(texts, lint), texts=texts,
        source="keras", epoch_end_steps=ends, notes=notes,
        path=os.path.dirname(os.path.normpath(base.path)) if base is not None else None,
    )


def signals_from_runs(runs: Mapping[str, object], *, root_name: str = ".", lint=None) -> list[Signals]:
    """Normalizes every run of a logdir, detecting each run's layout.

    Keras `train/` + `validation/` siblings become one run named after their
    parent (`root_name` when the parent is the logdir itself); a parent run
    that only holds hparams lends them to its Keras run; runs without any
    scalar, histogram or text are left out.

    Example:

    >>> signals_from_runs({})
    []

    Args:
        runs: run name -> `tfguard.events.Run`, as `read_logdir` returns.
        root_name: the name of the logdir itself. Defaults to `"."`.
        lint: static findings to attach to every run: a list, or a mapping
            run name -> list. Defaults to `None`.

    Returns:
        One `Signals` per run, in run-name order.
    """
    def lint_for(name):
        if isinstance(lint, Mapping):
            return lint.get(name)
        return lint

    groups: dict[str, dict[str, object]] = {}
    for name, run in runs.items():
        if _is_keras(run):
            groups.setdefault(run_family(name), {})[posixpath.basename(name)] = run
    out = []
    for parent, members in groups.items():
        display = root_name if parent == "." else parent
        out.append((display, keras_signals(members.get("train"), members.get("validation"),
                                           name=display, parent=runs.get(parent),
                                           lint=lint_for(display))))
    grouped = {f"{p}/{m}" if p != "." else m for p, ms in groups.items() for m in ms}
    for name, run in runs.items():
        if name in grouped or _is_empty(run):
            continue
        if name in groups and not any(t.startswith(_TFGUARD_PREFIXES) for t in run.scalars):
            continue  # the parent of a Keras run: its hparams went there
        display = root_name if name == "." else name
        out.append((display, tfguard_signals(run, name=display, lint=lint_for(display))))
    return [s for _n, s in sorted(out, key=lambda item: item[0])]
