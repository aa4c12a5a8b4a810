"""Reading event files back for the round-trip tests (TensorBoard's own loader, no tfguard code)."""

from __future__ import annotations

import dataclasses
import glob
import os

import numpy as np
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util


@dataclasses.dataclass
class Point:
    step: int
    plugin: str
    value: object
    content: bytes


def event_files(run_dir: str) -> list[str]:
    """The run's event files in the order they were made: by time, then by the process's file counter
    (`events.out.tfevents.<time>.<host>.<pid>.<counter>.v2`), as numbers: "10" follows "9"."""

    def made(path: str) -> tuple:
        parts = os.path.basename(path).split(".")
        numbers = [int(p) if p.isdigit() else -1 for p in (parts[3], parts[-2])] if len(parts) > 4 else [-1, -1]
        return (*numbers, path)

    return sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*")), key=made)


def read_run(run_dir: str) -> dict[str, list[Point]]:
    """Tag -> points in file order, with decoded values (scalars float, histograms array, text str)."""
    out: dict[str, list[Point]] = {}
    for path in event_files(run_dir):
        described: dict = {}  # a tag's metadata, as a file's first value of it carries it (as TF1's FileWriter)
        for event in EventFileLoader(path).Load():
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                metadata = value.metadata if value.HasField("metadata") else described.get(value.tag, value.metadata)
                described.setdefault(value.tag, metadata)
                plugin = metadata.plugin_data.plugin_name
                content = metadata.plugin_data.content
                if value.HasField("tensor"):
                    array = tensor_util.make_ndarray(value.tensor)
                    if plugin == "scalars":
                        decoded = float(array)
                    elif plugin == "text":
                        decoded = array.item().decode("utf-8")
                    elif plugin == "histograms":
                        decoded = np.asarray(array, dtype=np.float64)
                    else:
                        decoded = array
                else:
                    decoded = value.WhichOneof("value")
                out.setdefault(value.tag, []).append(Point(int(event.step), plugin, decoded, content))
    return out


def run_dirs(root: str) -> list[str]:
    """Every directory under root holding an event file."""
    found = set()
    for dirpath, _dirs, files in os.walk(root):
        if any("tfevents" in f for f in files):
            found.add(dirpath)
    return sorted(found)


def steps(points: list[Point]) -> list[int]:
    return [p.step for p in points]
