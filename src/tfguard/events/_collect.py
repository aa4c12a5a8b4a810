"""Accumulate the records of one run's event files into per-tag series.

Long because: `Collector` is the reader's one hot loop; its fast paths share its per-tag state.

`Collector` is the hot loop of the reader. A run of same-length scalar
records (a `tfguard.events._blocks.Block`) is decoded with numpy from the
layout of its first record (`tfguard.events._template`), with no Python object
per record. Other records come in batches; a batch of scalar (and histogram)
records is parsed in one protobuf call into columns
(`tfguard.events._columns`) and its float32 scalars are decoded with numpy. Every other record (a text, an image,
hparams, a TF1 value, a new tag, a step 0) is parsed on its own as a
TensorBoard `Event` proto. A tag's kind is fixed by its first value that
tells it (its plugin name, after a TF1 value is migrated to its TF2 form by
`tensorboard.data_compat`), as TensorBoard does. TF1 histograms and images
are migrated the same way (`tfguard.events._decode`); a TF1 `simple_value` is
read directly (`decode.legacy_scalar`, the same number at a 750th of the cost).

A run holds at most `MAX_TAGS` distinct tags: past that, the values of new
tags are not read but counted, and each file that held some gets one
`Damage` (kind `"oversized"`) saying how many values were left out, so a
file that writes a new tag per value (10^6 one-point tags) cannot make the
reader's memory grow with it. tfguard's own `run/`, `config/`, `guard/`
and hparams tags are still read past it, up to `MAX_OWN_TAGS` more. A
reader that keeps several runs at once (the watch) passes them one shared
`tfguard.events._budget.TagBudget`: a tag it refuses is counted the same way.

`finish` sorts every series by step; for the same tag and step the record read
last wins (files are read in order, so the later file wins). Restarts are
purged as TensorBoard does (`plugin_event_accumulator`): every session of a
run starts with a `session_log.status == SessionLog.START` event, and each
START after the first one, at step S (a run resumed from a checkpoint),
drops every value read before it with a step >= S, of every tag: the
orphans of the session that was killed.

Example:

>>> from tensorboard.compat.proto import event_pb2
>>> from tfguard.events._selection import Selection
>>> event = event_pb2.Event(step=2, wall_time=1.0)
>>> _ = event.summary.value.add(tag="loss", simple_value=0.5)
>>> collector = Collector(Selection.build(), damage=[])
>>> collector.add("f", [0], [event.SerializeToString()])
>>> steps, walls, values = collector.finish()["scalars"]["loss"]
>>> int(steps[0]), float(values[0])
(2, 0.5)
"""

from __future__ import annotations

import struct
from itertools import repeat

import numpy as np
from tensorboard.compat.proto import event_pb2, types_pb2

from tfguard import _tags
from tfguard.events import _decode
from tfguard.events._blocks import Block
from tfguard.events._budget import TagBudget
from tfguard.events._columns import aligned_columns
from tfguard.events._records import Damage
from tfguard.events._selection import Selection
from tfguard.events._template import ScalarTemplate, factorize
from tfguard.events._values import HistogramPoint, ImageInfo

__all__ = ["MAX_OWN_TAGS", "MAX_TAGS", "Collector"]

_SKIP = "skip"
_UNPACK_F32 = struct.Struct("<f").unpack
_PACK_POINT = struct.Struct("<qdd").pack
_POINT = np.dtype([("step", "<i8"), ("wall", "<f8"), ("value", "<f8")])
_DT_FLOAT = types_pb2.DT_FLOAT
_BATCH = 512  # records parsed into columns at once
_BATCH_BYTES = _BATCH * 256  # larger records (histograms, images) are not scalars
_UNKNOWN, _SKIPPED = -1, -2  # column codes of tags that are not fast scalars
MAX_TAGS = 50_000
"""The most distinct tags read per run (a 1000-layer model logs about 10 per layer).

Each tag costs about 2 KB from reading to diagnosis, so a run stays within
about 100 MB of tags whatever its files hold; values of tags past the cap
are counted and reported as damage."""
MAX_OWN_TAGS = 1_000
"""How many of tfguard's own `run/`, `config/`, `guard/` and hparams tags are read past `MAX_TAGS`."""
_ALWAYS_READ = ("run/", "config/", "guard/", "_hparams_/")
_SESSION_LOG_MAX_BYTES = 64  # a SessionLog event is ~20 bytes; larger ones are never purges
_START = event_pb2.SessionLog.START
# The key byte of `Event.session_log` (field 7, length-delimited): 0x3a.
_SESSION_LOG_KEY = bytes([event_pb2.Event.DESCRIPTOR.fields_by_name["session_log"].number << 3 | 2])


def _may_be_session_log(data: bytes) -> bool:
    """Whether a serialized `Event` holds a `session_log` (cheap, on the bytes).

    Fields are serialized in field-number order: an optional wall time (field
    1, fixed64), an optional step (field 2, varint), then field 7 for the
    session log. A file version, graph, summary or log message (fields 3-6)
    comes first, so such an event is never taken for one.
    """
    if len(data) > _SESSION_LOG_MAX_BYTES:
        return False
    i = 9 if data[:1] == b"\x09" else 0
    if data[i : i + 1] == b"\x10":
        i += 1
        while i < len(data) and data[i] & 0x80:
            i += 1
        i += 1
    return data[i : i + 1] == _SESSION_LOG_KEY


class _Scalars:
    """The points of one scalar tag in the order read: one packed buffer, 24 bytes a point.

    One object and one buffer per tag (no Python object per point, no
    bound methods kept), so a run of many one-point tags costs about 150
    bytes a tag here.
    """

    __slots__ = ("points",)
    kind = "scalars"

    def __init__(self):
        self.points = bytearray()

    def add(self, step: int, wall: float, value: float) -> None:
        self.points += _PACK_POINT(step, wall, value)

    def extend(self, steps: np.ndarray, walls: np.ndarray, values: np.ndarray) -> None:
        block = np.empty(len(steps), dtype=_POINT)
        block["step"], block["wall"], block["value"] = steps, walls, values
        self.points += block.tobytes()

    def purge(self, step: int) -> None:
        """Drops the points read so far whose step is >= `step`."""
        if not self.points:
            return
        points = np.frombuffer(self.points, dtype=_POINT)
        keep = points["step"] < step
        if bool(keep.all()):
            return
        kept = points[keep].tobytes()
        del points, keep
        self.points = bytearray(kept)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Steps, wall times and values sorted by step, the last record per step kept."""
        if not self.points:
            return None
        # Views, not copies (strided over the packed points): never appended to after this.
        points = np.frombuffer(self.points, dtype=_POINT)
        steps, walls, values = points["step"], points["wall"], points["value"]
        if steps.size > 1 and not bool(np.all(steps[1:] > steps[:-1])):
            order = np.argsort(steps, kind="stable")
            ordered = steps[order]
            last = np.empty(ordered.size, dtype=bool)
            last[:-1] = ordered[1:] != ordered[:-1]
            last[-1] = True
            keep = order[last]
            steps, walls, values = steps[keep], walls[keep], values[keep]
        return steps, walls, values


class _Items:
    """The points of one histogram, text, image or hparams tag."""

    __slots__ = ("kind", "items")

    def __init__(self, kind: str):
        self.kind = kind
        self.items: list[tuple[int, float, object]] = []


class Collector:
    """Collects the selected values of one run from its records.

    Args:
        selection: what to keep.
        damage: list that receives a `Damage` for each record or value that
            cannot be decoded.
        budget: a tag budget shared with other runs' collectors. Defaults to
            `None` (only `MAX_TAGS` bounds this run).
    """

    def __init__(self, selection: Selection, damage: list[Damage], budget: TagBudget | None = None):
        self.selection = selection
        self.damage = damage
        self.budget = budget
        self.charged = 0  # tags charged to `budget`
        self._series: dict[str, _Scalars | _Items | str] = {}
        self._codes: dict[bytes, int] = {}  # UTF-8 tag -> index in _fast, or _SKIPPED
        self._fast: list[_Scalars] = []
        self._needles = selection.needles()
        self._hparams: dict[str, object] = {}
        self._hparams_config: dict | None = None
        self._session: dict[str, object] = {}
        self._seen_start = False
        self._over_cap: dict[tuple[str, str], list[int]] = {}  # (path, why) -> [offset, values]

    def add(self, path: str, offsets: list[int], datas: list[bytes]) -> None:
        """Decode intact records of the file `path`.

        Args:
            path: the event file, for damage reports.
            offsets: byte offset of each record, as yielded by `iter_records`.
            datas: each record's data (a serialized `Event`).
        """
        needles = self._needles
        if needles is not None:
            wanted = [
                i
                for i, data in enumerate(datas)
                if any(n in data for n in needles) or _may_be_session_log(data)
            ]
            offsets = [offsets[i] for i in wanted]
            datas = [datas[i] for i in wanted]
        for start in range(0, len(datas), _BATCH):
            batch_offsets = offsets[start : start + _BATCH]
            batch = datas[start : start + _BATCH]
            if (
                len(batch) < 8
                or sum(map(len, batch)) > _BATCH_BYTES
                or not self._add_columns(path, batch_offsets, batch)
            ):
                self._add_events(path, batch_offsets, batch)

    def add_block(self, path: str, block: Block) -> None:
        """Decode a run of same-length records (see `tfguard.events._blocks`).

        The leading records that match the layout of the first one, with a
        tag already known as a float32 scalar, are decoded with numpy; the
        others go through `add`, in file order.

        Args:
            path: the event file, for damage reports.
            block: the records, as `tfguard.events._records.iter_record_blocks` yields them.
        """
        rows = block.rows
        if not len(rows):
            return
        template = ScalarTemplate.learn(rows[0].tobytes()) if self._needles is None else None
        matched = template.match(rows) if template is not None else 0
        if matched:
            head = rows[:matched]
            steps, walls, values, tags = template.decode(head)
            unique, inverse = factorize(tags)
            known = np.array([self._codes.get(t, _UNKNOWN) for t in unique], np.int64)
            codes = known[inverse]
            fast = np.flatnonzero(codes >= 0)
            if fast.size:
                self._extend(codes[fast], steps[fast], walls[fast], values[fast])
            if fast.size < matched:  # tags seen for the first time, or not scalars
                slow = np.flatnonzero(codes == _UNKNOWN)
                self.add(path, block.offsets[slow].tolist(), [row.tobytes() for row in head[slow]])
        if matched < len(rows):
            rest = rows[matched:]
            self.add(path, block.offsets[matched:].tolist(), [row.tobytes() for row in rest])

    def _extend(self, codes: np.ndarray, steps: np.ndarray, walls: np.ndarray,
                values: np.ndarray) -> None:
        """Appends points to the fast scalar series of `codes`, in order within each."""
        order = np.argsort(codes, kind="stable")
        sorted_codes = codes[order]
        bounds = np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1
        for group in np.split(order, bounds):
            series = self._fast[int(codes[group[0]])]
            series.extend(steps[group], walls[group], values[group])

    def _add_columns(self, path: str, offsets: list[int], batch: list[bytes]) -> bool:
        """Take a batch through the columnar path; `False` if it cannot."""
        columns = aligned_columns(batch)
        if columns is None:
            return False
        count = len(batch)
        codes = np.fromiter(map(self._codes.get, columns.tags, repeat(_UNKNOWN)), np.int64, count)
        lengths = np.fromiter(map(len, columns.contents), np.int64, count)
        fast = (codes >= 0) & (np.asarray(columns.dtypes, dtype=np.int64) == _DT_FLOAT)
        fast &= lengths == 4
        slow = codes == _UNKNOWN
        if bool(np.any((codes >= 0) & ~fast)):
            return False  # a known scalar written another way: keep record order
        rows = np.flatnonzero(fast)
        if rows.size:
            contents = columns.contents
            blob = (
                b"".join(contents)
                if rows.size == count
                else b"".join(map(contents.__getitem__, rows))
            )
            values = np.frombuffer(blob, dtype="<f4").astype(np.float64)
            steps = np.asarray(columns.steps, dtype=np.int64)[rows]
            walls = np.asarray(columns.wall_times, dtype=np.float64)[rows]
            self._extend(codes[rows], steps, walls, values)
        if bool(slow.any()):
            rows = np.flatnonzero(slow).tolist()
            self._add_events(path, [offsets[i] for i in rows], [batch[i] for i in rows])
        return True

    def _add_events(self, path: str, offsets: list[int], batch: list[bytes]) -> None:
        """Parse each record as an `Event` (the general path)."""
        parse = event_pb2.Event.FromString
        series_of = self._series.get
        unpack_f32 = _UNPACK_F32
        for offset, data in zip(offsets, batch):
            try:
                event = parse(data)
            except Exception as err:  # any undecodable payload is damage
                self.damage.append(Damage(path, offset, f"undecodable event: {err}"))
                continue
            values = event.summary.value
            if not values:
                if event.HasField("session_log") and event.session_log.status == _START:
                    if self._seen_start:  # the first START of a run is not a restart
                        self.purge(event.step)
                    self._seen_start = True
                continue
            step = event.step
            wall = event.wall_time
            for value in values:
                series = series_of(value.tag)
                if series is None:
                    refused = self._refusal(value.tag)
                    if refused is not None:
                        self._count_over_cap(path, offset, refused)
                        continue
                    series = self._classify(value)
                    if series is None:
                        continue
                if series is _SKIP:
                    continue
                if series.kind == "scalars":
                    tensor = value.tensor
                    content = tensor.tensor_content
                    if len(content) == 4 and tensor.dtype == _DT_FLOAT:
                        number = unpack_f32(content)[0]
                    elif value.WhichOneof("value") == "simple_value":
                        number = _decode.legacy_scalar(value)
                    else:
                        try:
                            number = _decode.scalar_value(value)
                        except Exception as err:  # a bad value is damage
                            self._bad(path, offset, value.tag, step, err)
                            continue
                    series.add(step, wall, number)
                else:
                    self._add_item(path, offset, series, step, wall, value)

    def _refusal(self, tag: str) -> str | None:
        """Why a new tag is not kept (`"run"`: `MAX_TAGS`; `"budget"`: the shared budget), or `None`."""
        count = len(self._series)
        if tag.startswith(_ALWAYS_READ):
            return None if count < MAX_TAGS + MAX_OWN_TAGS else "run"
        if count >= MAX_TAGS:
            return "run"
        if self.budget is not None and not self.budget.admits(tag):
            return "budget"
        return None

    def _count_over_cap(self, path: str, offset: int, why: str) -> None:
        count = self._over_cap.setdefault((path, why), [offset, 0])
        count[1] += 1

    def report_over_cap(self) -> None:
        """Appends to `damage` what was counted past the caps since the last report."""
        for (path, why), (offset, count) in self._over_cap.items():
            if why == "run":
                reason = (f"more than {MAX_TAGS:,} distinct tags in the run: {count:,} value(s) of "
                          f"later tags were not read, from this offset on (tfguard reads at most "
                          f"{MAX_TAGS:,} tags per run so memory stays bounded; a log that writes a "
                          "new tag per value should write one tag with many steps)")
            else:
                reason = (f"more than {self.budget.limit:,} distinct tags in the runs read together: "
                          f"{count:,} value(s) of later tags were not read, from this offset on "
                          f"(the loss, the metrics and tfguard's own tags still are; read fewer "
                          "runs at once, e.g. a sub-folder of the logdir)")
            self.damage.append(Damage(path, offset, reason, kind="oversized"))
        self._over_cap = {}

    def purge(self, step: int) -> None:
        """Drops every value read so far with a step >= `step` (TensorBoard's restart purge)."""
        for series in self._series.values():
            if series is _SKIP or series.kind == "hparams":
                continue
            if isinstance(series, _Scalars):
                series.purge(step)
            else:
                series.items = [item for item in series.items if item[0] < step]

    def _classify(self, value) -> _Scalars | _Items | str | None:
        """Fix the kind of a new tag; `None` while the kind is not yet known."""
        tag = value.tag
        kind = _decode.value_kind(value)
        if kind is None:
            return None
        series: _Scalars | _Items | str
        if not self.selection.wants_kind(kind) or (
            kind != "hparams" and not self.selection.wants(tag)
        ):
            series = _SKIP
            self._codes[tag.encode("utf-8")] = _SKIPPED
        elif kind == "scalars":
            series = _Scalars()
            self._codes[tag.encode("utf-8")] = len(self._fast)
            self._fast.append(series)
        else:
            series = _Items(kind)
        self._series[tag] = series
        if self.budget is not None:
            self.budget.charge()
            self.charged += 1
        return series

    def _bad(self, path: str, offset: int, tag: str, step: int, err: Exception) -> None:
        self.damage.append(Damage(path, offset, f"tag {tag!r} at step {step}: {err}"))

    def _add_item(self, path, offset, series: _Items, step: int, wall: float, value) -> None:
        """Decode a histogram, text, image or hparams value."""
        try:
            kind = series.kind
            if kind == "histograms":
                series.items.append((step, wall, _decode.histogram_buckets(value)))
            elif kind == "texts":
                series.items.append((step, wall, _decode.text_value(value)))
            elif kind == "images":
                entries = _decode.image_entries(value, self.selection.load_images)
                series.items.append((step, wall, entries))
            elif kind == "hparams":
                which, content = _decode.hparams_data(value)
                if which == "experiment":
                    self._hparams_config = content
                elif which == "session_start_info":
                    self._hparams = dict(content["hparams"])
                    self._session["group_name"] = content["group_name"]
                    self._session["start_time_secs"] = content["start_time_secs"]
                else:
                    self._session.update(content)
        except Exception as err:  # a bad value is damage, never a crash
            self._bad(path, offset, value.tag, step, err)

    def finish(self) -> dict[str, object]:
        """Return the collected values, sorted by step, one value per step.

        The text logs of `tags.TEXT_LOGS` (one line per violation) keep
        every value: batches skipped in a row share their step.

        Returns:
            A dict with keys `scalars`, `histograms`, `texts`, `images`,
            `hparams`, `hparams_config` and `hparams_session`, shaped as the
            fields of `Run`.
        """
        self.report_over_cap()
        out: dict[str, dict] = {"scalars": {}, "histograms": {}, "texts": {}, "images": {}}
        for tag, series in self._series.items():
            if series is _SKIP or series.kind == "hparams":
                continue
            if isinstance(series, _Scalars):
                arrays = series.arrays()
                if arrays is not None:
                    out["scalars"][tag] = arrays
            elif series.items:
                if series.kind == "texts" and tag in _tags.TEXT_LOGS:  # every violation, in order
                    items = sorted(series.items, key=lambda item: item[0])
                else:
                    items = _last_per_step(series.items)
                if series.kind == "histograms":
                    out["histograms"][tag] = [HistogramPoint(s, w, b) for s, w, b in items]
                elif series.kind == "texts":
                    out["texts"][tag] = items
                else:
                    out["images"][tag] = [
                        ImageInfo(s, w, width, height, size, data)
                        for s, w, entries in items
                        for width, height, size, data in entries
                    ]
        return {
            **out,
            "hparams": dict(self._hparams),
            "hparams_config": self._hparams_config,
            "hparams_session": dict(self._session),
        }


def _last_per_step(items: list[tuple[int, float, object]]) -> list[tuple[int, float, object]]:
    """Items sorted by step; of items with the same step the last is kept."""
    by_step: dict[int, tuple[int, float, object]] = {}
    for item in items:
        by_step[item[0]] = item
    return [by_step[step] for step in sorted(by_step)]
