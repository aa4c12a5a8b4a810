"""Every finding comes with a fix that was tried and measured: `tfguard run --try-fixes`.

A diagnosis says what is wrong and suggests a change; this room tries the
change. For each warning or error finding with a mechanical remedy
(`catalogue`: learning rate ×0.1 / ×10, input normalization, the output
activation the loss needs, a label mapping, gradient clipping, an
initializer or activation change, early stopping), the training is re-run
with that one remedy applied from outside (`Intercept` patches
`keras.Model.compile` and `fit`, as `tfguard run` attaches; the script is
never edited), for the same epochs, and judged from the numbers
(`measure`): improved, no better or worse, by the final validation loss
(the training loss without validation data). Only an improvement is a fix.

- `try_script_fixes(path, args)`: the command line's `--try-fixes`; each
  trial logs to `<logdir>/try-<n>-<remedy>/` and the trials join the JSON
  report as its `trials` list.
- `try_fixes(train, findings)`: the same for a notebook, with a
  zero-argument callable that builds, compiles and fits a new model.

Example:

>>> from tfguard._findings import Finding
>>> [r.title for r in remedies_for(Finding("overfitting", "warning", "val loss rises"))]
['EarlyStopping on val_loss, restoring the best weights']
>>> verdict(1.2, 0.7)
'improved'
"""

from tfguard.remedies._catalogue import Remedy, plan, remedies_for
from tfguard.remedies._edits import NotApplicable
from tfguard.remedies._intercept import FitCapture, Intercept
from tfguard.remedies._measure import DEFAULT_MARGIN, verdict
from tfguard.remedies._render import render_trials
from tfguard.remedies._runner import ScriptTrials, Trials, try_fixes, try_script_fixes
from tfguard.remedies._trial import Trial, judge

__all__ = [
    "DEFAULT_MARGIN",
    "FitCapture",
    "Intercept",
    "NotApplicable",
    "Remedy",
    "ScriptTrials",
    "Trial",
    "Trials",
    "judge",
    "plan",
    "remedies_for",
    "render_trials",
    "try_fixes",
    "try_script_fixes",
    "verdict",
]
