"""`TfguardPlugin`: the **tfguard** tab of TensorBoard.

TensorBoard finds it through the `tensorboard_plugins` entry point of the
installed package (`pip install` is the whole setup) and shows it as an
iframe whose ES module, `index.js`, and stylesheet are served by the
plugin's own routes, so TensorBoard's content security policy holds and no
network is needed. The answers come from `BoardCache`: tfguard's own
reader and rules over the event files under `--logdir`, the same words as
`tfguard diagnose`, re-read only where a file's size or mtime changed.

Routes (under `/data/plugin/tfguard/`):

- `index.js`, `style.css`: the frontend.
- `runs`: every run (`views.run_view`), the ranking when there are
  several (`views.ranking`, `?sort_by=` to choose the metric) and the
  tried fixes (`reports.ReportCache`: each `report.json` bounded and
  validated), with the seconds the answer took.
- `run?run=NAME`: one run's view; 400 without `run`, 404 for an unknown one.

One bad input costs its own part of the answer, never the tab: a run that
cannot be read, diagnosed or shown is a run of state `unreadable` that
says why, a refused `report.json` is listed with its `error`, and a
`sort_by` that is not a short metric tag is answered 400.

It never imports TensorFlow or Keras (the Offline import contract).

Example:

>>> import tempfile
>>> from tensorboard.plugins import base_plugin
>>> plugin = TfguardPlugin(base_plugin.TBContext(logdir=tempfile.mkdtemp()))
>>> plugin.is_active(), sorted(plugin.get_plugin_apps())
(False, ['/index.js', '/run', '/runs', '/style.css'])
"""

from __future__ import annotations

import importlib.resources
import os
import time

from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tfguard._errors import EventFileError
from tfguard.board._cache import BoardCache, unreadable_diagnosis
from tfguard.board._reports import ReportCache
from tfguard.board._views import ranking, run_view
from tfguard.events import find_runs

PLUGIN_NAME = "tfguard"
"""The plugin's name: its tab, its routes' prefix, its entry point."""

_STATIC = {"/index.js": ("index.js", "text/javascript"), "/style.css": ("style.css", "text/css")}
MAX_QUERY_CHARS = 500
"""The longest `run` or `sort_by` query value taken (longer ones are answered 400)."""


def _static(name: str) -> bytes:
    return importlib.resources.files("tfguard.board").joinpath("static", name).read_bytes()


class TfguardPlugin(base_plugin.TBPlugin):
    """The tfguard tab: each run's status, findings, firewall violations, tried fixes and ranking.

    Args:
        context: TensorBoard's `TBContext`; only its `logdir` is used (a
            local folder; a remote `gs://` logdir or `--logdir_spec` leaves
            the tab inactive).
    """

    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        super().__init__(context)
        self.logdir = context.logdir or ""
        self.cache = BoardCache(self.logdir) if self.logdir else None
        self.reports = ReportCache()

    def get_plugin_apps(self):
        """The routes, as `{path: WSGI app}`."""
        apps = {path: self._serve_static for path in _STATIC}
        apps["/runs"] = self._serve_runs
        apps["/run"] = self._serve_run
        return apps

    def is_active(self) -> bool:
        """True when the logdir is a local folder holding at least one run."""
        if not self.logdir or not os.path.isdir(self.logdir):
            return False
        try:
            return bool(find_runs(self.logdir))
        except EventFileError:
            return False

    def frontend_metadata(self):
        """An iframe loaded from the plugin's own `index.js`, shown as the tab **tfguard**."""
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="tfguard")

    def runs_answer(self, sort_by: str | None = None) -> dict:
        """The `runs` route's document (see the module docstring)."""
        start = time.perf_counter()
        diagnoses = self._diagnoses()
        now = time.time()
        views = [self._view(d, now) for d in diagnoses]
        return {
            "logdir": self.logdir,
            "runs": views,
            "ranking": ranking(diagnoses, sort_by) if len(diagnoses) > 1 else None,
            "trials": self.reports.reports(self.logdir) if os.path.isdir(self.logdir) else [],
            "seconds": round(time.perf_counter() - start, 4),
        }

    def _view(self, d, now: float | None = None) -> dict:
        """`run_view` of one run; a run whose view fails is shown `unreadable`, saying why."""
        updated = self.cache.updated(d.run)
        try:
            return run_view(d, updated=updated, now=now)
        except Exception as error:  # noqa: BLE001 - one run's failure must not take the tab down
            return run_view(unreadable_diagnosis(d.run, error), updated=updated, now=now)

    def _diagnoses(self):
        if self.cache is None or not os.path.isdir(self.logdir):
            return []
        try:
            return self.cache.diagnoses()
        except EventFileError:
            return []

    @wrappers.Request.application
    def _serve_static(self, request):
        name, mimetype = _STATIC[request.path[request.path.rindex("/"):]]
        return http_util.Respond(request, _static(name), mimetype)

    @wrappers.Request.application
    def _serve_runs(self, request):
        sort_by = request.args.get("sort_by")
        if sort_by is not None and (len(sort_by) > MAX_QUERY_CHARS or not sort_by.isprintable()):
            return http_util.Respond(
                request, {"error": f"Expected `sort_by` to be a metric tag such as val/loss, of at "
                                   f"most {MAX_QUERY_CHARS} printable characters. Received "
                                   f"{len(sort_by)} characters."},
                "application/json", code=400)
        return http_util.Respond(request, self.runs_answer(sort_by), "application/json")

    @wrappers.Request.application
    def _serve_run(self, request):
        name = request.args.get("run")
        if not name or len(name) > MAX_QUERY_CHARS:
            return http_util.Respond(
                request, {"error": "Expected a run name of at most "
                                   f"{MAX_QUERY_CHARS} characters: /run?run=NAME. Received "
                                   f"{'no `run`' if not name else f'{len(name)} characters'}."},
                "application/json", code=400)
        for d in self._diagnoses():
            if d.run == name:
                return http_util.Respond(request, self._view(d), "application/json")
        known = [d.run for d in self._diagnoses()]
        return http_util.Respond(
            request, {"error": f"No run {name!r} under the logdir; expected one of {known[:20]}."},
            "application/json", code=404)


__all__ = ["MAX_QUERY_CHARS", "PLUGIN_NAME", "TfguardPlugin"]
