"""Attach tfguard to an unmodified Keras training script: `tfguard run SCRIPT [ARGS...]`.

`run_script(path, args)` runs a script as `python SCRIPT ARGS...` would,
inside an `AttachSession`: every `keras.Model.fit` in it is guarded by the
firewall (policy `"warn"` by default), logged by `tfguard.summary.Logger`
and diagnosed live by `LiveDiagnosis`; the script's output and exit status
are preserved, and a versioned JSON report (`tfguard.report/1` plus the
script's outcome, see `tfguard.attach._report`) and optionally an HTML page
are written. From Python, `attached(...)` is the same session as a context
manager, and `attach(...)` opens one until `.close()`.

Example:

>>> import keras, numpy as np
>>> from tfguard.attach import attached
>>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)], name="reg")
>>> model.compile(optimizer="sgd", loss="mse")
>>> with attached(logger=False) as session:
...     _ = model.fit(np.ones((16, 3)), np.ones((16, 1)), epochs=2, verbose=0)
>>> session.diagnoses[0].run
'reg-fit1'
"""

from tfguard.attach._fitcall import fit_hparams, run_name
from tfguard.attach._render import render_result
from tfguard.attach._report import attach_report, event_to_json, write_report
from tfguard.attach._script import AttachResult, ScriptError, exit_status, run_script
from tfguard.attach._session import (
    DEFAULT_LOGDIR,
    DEFAULT_POLICY,
    AttachSession,
    FitRecord,
    attach,
    attached,
)

__all__ = [
    "DEFAULT_LOGDIR",
    "DEFAULT_POLICY",
    "AttachResult",
    "AttachSession",
    "FitRecord",
    "ScriptError",
    "attach",
    "attach_report",
    "attached",
    "event_to_json",
    "exit_status",
    "fit_hparams",
    "render_result",
    "run_name",
    "run_script",
    "write_report",
]
