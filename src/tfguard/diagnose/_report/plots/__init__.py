"""The figures of the HTML report, PNG bytes drawn on matplotlib's Agg canvas.

- `kit`: what every figure shares (canvas, labels, points, PNG).
- `curves`: one run's loss, metrics, learning rate, gradient norms and
  activation fractions.
- `distributions`: weights, gradients and activations over time.
- `evidence`: one finding's evidence, drawn where it lives.
- `firewall`: the firewall's violations beside the loss.
- `trials`: one tried fix, before and after.

matplotlib is imported when the first figure is drawn.

Example:

>>> from tfguard.diagnose import Signals
>>> from tfguard.diagnose._report.plots.curves import loss_png
>>> loss_png(Signals.from_arrays({"train/loss": (None, [1.0, 0.5])}), [])[:4]
b'\\x89PNG'
"""
