"""What a diagnosis is shown as: terminal, JSON, one HTML page, and the comparison of a sweep.

- `terminal`: `render_terminal`, the rich summary `tfguard diagnose` prints.
- `json`: `to_json`, the versioned document (schema `tfguard.report/1`).
- `html_page`: `render_html` / `write_html`, one self-contained page made
  of the sections of `html/` (evidence, firewall, trials, their shared
  `parts`) and the figures of `plots/`.
- `compare/`: a sweep, in one place: the ranking (`compare_logdir`,
  `render_compare`), its HTML section, its overlaid curves, and which runs
  of a large sweep get their own section.

Only `html_page` and `plots/` draw (matplotlib, imported on the first
figure); nothing here imports TensorFlow or Keras.

Example:

>>> from tfguard.diagnose import Signals, diagnose
>>> from tfguard.diagnose._report.json import to_json
>>> to_json([diagnose(Signals.from_arrays({"train/loss": (None, [1.0, 0.5])}))])["schema"]
'tfguard.report/1'
"""
