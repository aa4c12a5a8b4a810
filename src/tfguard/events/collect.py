"""Accumulate the records of one run's event files into per-tag series.

Long because: `Collector` is the reader's one hot loop; its fast paths share its per-tag state.

`Collector` is the hot loop of the reader. A run of same-length scalar
records (a `tfguard.events.blocks.Block`) is decoded with numpy from the
layout of its first record (`tfguard.events.template`), with no Python object
per record. Other records come in batches; a batch of scalar (and histogram)
records is parsed in one protobuf call into columns
(`tfguard.events.columns`) and its float32 scalars are decoded with numpy. Every other record (a text, an image,
hparams, a TF1 value, a new tag, a step 0) is parsed on its own as a
TensorBoard `Event` proto. A tag's kind is fixed by its first value that
tells it (its plugin name, after a TF1 value is migrated to its TF2 form by
`tensorboard.data_compat`), as TensorBoard does. TF1 histograms and images
are migrated the same way (`tfguard.events.decode`); a TF1 `simple_value` is
read directly (`decode.legacy_scalar`, the same number at a 750th of the cost).

A run holds at most `MAX_TAGS` distinct tags: past that, the values of new
tags are not read but counted, and each file that held some gets one
`Damage` (kind `"oversized"`) saying how many values were left out, so a
file that writes a new tag per value (10^6 one-point tags) cannot make the
reader's memory grow with it. tfguard's own `run/`, `config/`, `guard/`
and hparams tags are always read.

`finish` sorts every series by step; for the same tag and step the record read
last wins (files are read in order, so the later file wins). Restarts are
purged as TensorBoard does (`plugin_event_accumulator`): every session of a
run starts with a `session_log.status == SessionLog.START` event, and each
START after the first one, at step S (a run resumed from a checkpoint),
drops every value read before it with a step >= S, of every tag: the
orphans of the session that was killed.

Example:

>>> from tensorboard.compat.proto import event_pb2
>>> from tfguard.events.selection import Selection
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
from array import array
from itertools import repeat

import numpy as np
from tensorboard.compat.proto import event_pb2, types_pb2

from tfguard import tags
from tfguard.events import decode
from tfguard.events.blocks import Block
from tfguard.events.columns import aligned_columns
from tfguard.events.records import Damage
from tfguard.events.selection import Selection
from tfguard.events.template import ScalarTemplate, factorize
from tfguard.events.values import HistogramPoint, ImageInfo

__all__ = ["MAX_TAGS", "Collector"]

_SKIP = "skip"
_UNPACK_F32 = struct.Struct("<f").unpack
_DT_FLOAT = types_pb2.DT_FLOAT
_BATCH = 512  # records parsed into columns at once
_BATCH_BYTES = _BATCH * 256  # larger records (histograms, images) are not scalars
_UNKNOWN, _SKIPPED = -1, -2  # column codes of tags that are not fast scalars
MAX_TAGS = 50_000
"""The most distinct tags read per run (a 1000-layer model logs about 10 per layer).

Each tag costs about 2.5 KB from reading to diagnosis, so a run stays within
about 125 MB of tags whatever its files hold; values of tags past the cap
are counted and reported as damage."""
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
    """The points of one scalar tag in the order read, as compact arrays (24 bytes each)."""

    __slots__ = ("steps", "walls", "values", "adders")
    kind = "scalars"

    def __init__(self):
        self.steps, self.walls, self.values = array("q"), array("d"), array("d")
        self.adders = (self.steps.append, self.walls.append, self.values.append)

    def extend(self, steps: np.ndarray, walls: np.ndarray, values: np.ndarray) -> None:
        self.steps.frombytes(steps.astype(np.int64, copy=False).tobytes())
        self.walls.frombytes(walls.astype(np.float64, copy=False).tobytes())
        self.values.frombytes(values.astype(np.float64, copy=False).tobytes())

    def purge(self, step: int) -> None:
        """Drops the points read so far whose step is >= `step`."""
        if not len(self.steps):
            return
        steps = np.frombuffer(self.steps, dtype=np.int64)
        keep = steps < step
        if bool(keep.all()):
            return
        kept = (
            steps[keep],
            np.frombuffer(self.walls, dtype=np.float64)[keep],
            np.frombuffer(self.values, dtype=np.float64)[keep],
        )
        del steps
        self.steps, self.walls, self.values = array("q"), array("d"), array("d")
        self.adders = (self.steps.append, self.walls.append, self.values.append)
        self.extend(*kept)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Steps, wall times and values sorted by step, the last record per step kept."""
        if not len(self.steps):
            return None
        # Views, not copies: the arrays are never appended to after this.
        steps = np.frombuffer(self.steps, dtype=np.int64)
        walls = np.frombuffer(self.walls, dtype=np.float64)
        values = np.frombuffer(self.values, dtype=np.float64)
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
    """

    def __init__(self, selection: Selection, damage: list[Damage]):
        self.selection = selection
        self.damage = damage
        self._series: dict[str, _Scalars | _Items | str] = {}
        self._codes: dict[bytes, int] = {}  # UTF-8 tag -> index in _fast, or _SKIPPED
        self._fast: list[_Scalars] = []
        self._needles = selection.needles()
        self._hparams: dict[str, object] = {}
        self._hparams_config: dict | None = None
        self._session: dict[str, object] = {}
        self._seen_start = False
        self._over_cap: dict[str, list[int]] = {}  # path -> [first offset, values not read]

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
        """Decode a run of same-length records (see `tfguard.events.blocks`).

        The leading records that match the layout of the first one, with a
        tag already known as a float32 scalar, are decoded with numpy; the
        others go through `add`, in file order.

        Args:
            path: the event file, for damage reports.
            block: the records, as `tfguard.events.records.iter_record_blocks` yields them.
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
                    if len(self._series) >= MAX_TAGS and not value.tag.startswith(_ALWAYS_READ):
                        self._count_over_cap(path, offset)
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
                        number = decode.legacy_scalar(value)
                    else:
                        try:
                            number = decode.scalar_value(value)
                        except Exception as err:  # a bad value is damage
                            self._bad(path, offset, value.tag, step, err)
                            continue
                    add_step, add_wall, add_value = series.adders
                    add_step(step)
                    add_wall(wall)
                    add_value(number)
                else:
                    self._add_item(path, offset, series, step, wall, value)

    def _count_over_cap(self, path: str, offset: int) -> None:
        count = self._over_cap.setdefault(path, [offset, 0])
        count[1] += 1

    def _report_over_cap(self) -> None:
        for path, (offset, count) in self._over_cap.items():
            self.damage.append(Damage(
                path, offset, f"more than {MAX_TAGS:,} distinct tags in the run: {count:,} "
                f"value(s) of later tags were not read, from this offset on (tfguard reads at "
                f"most {MAX_TAGS:,} tags per run so memory stays bounded; a log that writes a "
                "new tag per value should write one tag with many steps)", kind="oversized"))
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
        kind = decode.value_kind(value)
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
        return series

    def _bad(self, path: str, offset: int, tag: str, step: int, err: Exception) -> None:
        self.damage.append(Damage(path, offset, f"tag {tag!r} at step {step}: {err}"))

    def _add_item(self, path, offset, series: _Items, step: int, wall: float, value) -> None:
        """Decode a histogram, text, image or hparams value."""
        try:
            kind = series.kind
            if kind == "histograms":
                series.items.append((step, wall, decode.histogram_buckets(value)))
            elif kind == "texts":
                series.items.append((step, wall, decode.text_value(value)))
            elif kind == "images":
                entries = decode.image_entries(value, self.selection.load_images)
                series.items.append((step, wall, entries))
            elif kind == "hparams":
                which, content = decode.hparams_data(value)
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
        self._report_over_cap()
        out: dict[str, dict] = {"scalars": {}, "histograms": {}, "texts": {}, "images": {}}
        for tag, series in self._series.items():
            if series is _SKIP or series.kind == "hparams":
                continue
            if isinstance(series, _Scalars):
                arrays = series.arrays()
                if arrays is not None:
                    out["scalars"][tag] = arrays
            elif series.items:
                if series.kind == "texts" and tag in tags.TEXT_LOGS:  # every violation, in order
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
