"""What the rules read: a run's signals, from event files or from a training in memory.

- `signals`: `Signals`, one run's normalized tags (scalars, histograms,
  texts, hparams), and `Series`, one tag over steps.
- `normalize`: the runs `tfguard.events.read_logdir` returns, tfguard's
  layout or the stock Keras callback's, turned into `Signals`.
- `logdir`: `load_signals`, a log directory read and normalized.
- `recorder`: `SignalRecorder`, the live callback's in-memory history.
- `violations`: the firewall's violations of a run, joined from its JSON
  records and its markdown lines.

Nothing here imports TensorFlow or Keras (the offline import contract).

Example:

>>> from tfguard.diagnose._inputs.signals import Signals
>>> Signals.from_arrays({"train/loss": (None, [1.0, 0.5])}).scalars["train/loss"].values.tolist()
[1.0, 0.5]
"""
