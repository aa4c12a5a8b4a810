"""A sweep of runs, compared: one home for the ranking and every way it is shown.

- `rank`: `compare_logdir` / `compare_diagnoses` (one `CompareRow` per run,
  ranked by a metric) and `render_compare`, the terminal table.
- `section`: the comparison's section of the HTML report (`sort_metric`,
  `compare_section`).
- `overlay`: the runs' curves overlaid on one figure.
- `select`: which runs of a large sweep get their own section of the page.

Example:

>>> from tfguard.diagnose import Signals, diagnose
>>> from tfguard.diagnose._report.compare.rank import compare_diagnoses
>>> runs = [diagnose(Signals.from_arrays({"val/accuracy": (None, [acc])}, run=name))
...         for name, acc in (("a", 0.8), ("b", 0.9))]
>>> [row.run for row in compare_diagnoses(runs)]
['b', 'a']
"""
