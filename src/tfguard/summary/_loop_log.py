"""`LoopLog`: the event file of a hand-written loop's run, written as a `Logger` writes a fit's.

A loop that never calls `fit` has no callback to hang a `Logger` on;
`tfguard run` records it at the optimizer's apply instead
(`tfguard.attach._loops`) and hands this writer what to write, step by
step. The tags are the Logger's (`tfguard._tags`): `batch/<metric>`,
`grad_norm/<layer>`, `update_ratio/<layer>`, `data/input_*`,
`activation/dead_fraction/<layer>`, `guard/*`, `config/hparams`,
`config/model`, `run/status`, the HParams session, so TensorBoard,
`tfguard diagnose` and `tfguard.events` read the run as any other. The
writer decides nothing: what it is given, at the step it is given, once
the directory is made on the first write.

Example:

>>> import json, tempfile
>>> from tfguard.events import read_run
>>> log = LoopLog(tempfile.mkdtemp(), hparams={"script": "train.py"}, config={"loop": "hand-written"})
>>> log.write(1, {"batch/loss": 2.3}, [])
>>> log.end({"status": "completed", "step": 1})
>>> run = read_run(log.path)
>>> run.scalars["batch/loss"][2].tolist(), json.loads(run.texts["run/status"][0][2])["status"]
([2.299999952316284], 'completed')
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping

from tfguard import _tags
from tfguard._findings import strict_json
from tfguard.summary import _hparams as hparams_module
from tfguard.summary._summary_values import session_start_event, text_value
from tfguard.summary._writers import RunWriter


class LoopLog:
    """The event file of one loop run.

    Args:
        directory: the run directory, or a function returning it (called on the first write).
        hparams: the run's hyperparameters (`config/hparams` table and the HParams tab).
            Defaults to `None`.
        config: more rows of the `config/hparams` table (the loop's optimizers, their
            learning rates), read at the first write: the caller may fill it until then.
            Defaults to `None`.
    """

    def __init__(self, directory: str | os.PathLike | Callable[[], str], *, hparams: Mapping | None = None,
                 config: Mapping | None = None):
        self.hparams = dict(hparams or {})
        self.config = config if config is not None else {}
        self._writer = RunWriter(directory)
        self._started = False
        self._session = False
        self.last_step = 0

    @property
    def path(self) -> str | None:
        """The run directory, once the first write made it."""
        return self._writer.path

    @property
    def active(self) -> bool:
        """`False` once a write failed (nothing more is written)."""
        return self._writer.active

    def _start(self, step: int) -> None:
        self._started = True
        self._writer.write_event(session_start_event(step))
        self._writer.write(step, [text_value(_tags.CONFIG_HPARAMS,
                                             hparams_module.hparams_markdown(self.hparams, self.config))])
        if self.hparams:
            self._session = self._writer.write_summary(0, hparams_module.session_start_summary(self.hparams))

    def write(self, step: int, scalars: Mapping[str, float], texts: list[tuple[str, str]]) -> None:
        """Writes one step's scalars (tag -> value) and texts (`(tag, text)`) as one event."""
        step = int(step)
        if not self._started:
            self._start(step)
        self._writer.write(step, [*((tag, float(value)) for tag, value in scalars.items()),
                                  *(text_value(tag, text) for tag, text in texts)])
        self.last_step = max(self.last_step, step)

    def describe(self, step: int, description: str | None) -> None:
        """Writes the model description (`config/model`, the JSON of `tfguard.lint.describe_model`)."""
        if description is not None:
            self.write(step, {}, [(_tags.CONFIG_MODEL, description)])

    def end(self, record: Mapping) -> None:
        """Writes `run/status` (`end_record` or a failure's record), ends the HParams session, closes the file."""
        step = int(record.get("step", self.last_step) or self.last_step)
        self.write(step, {}, [(_tags.RUN_STATUS, json.dumps(strict_json(dict(record))))])
        if self.hparams:
            self._writer.write_summary(0, hparams_module.config_summary(self.hparams, []))
        if self._session:
            status = "success" if record.get("status") == "completed" else "failure"
            self._writer.write_summary(0, hparams_module.session_end_summary(status, time.time()))
        self._writer.close()


__all__ = ["LoopLog"]
