"""Helpers of the watch tests: event files written record by record, fast, as jobs write them.

Records are real TensorBoard `Event` protos (TF2 float32 scalar tensors,
text summaries) framed with the TFRecord framing (`frame_record`), so a test
knows every offset and can append, cut or damage the bytes as a running
writer, a killed one or a bad disk would.
"""

from __future__ import annotations

import json
import math
import os

from tensorboard.compat.proto import event_pb2

from tests.events.eventdata import scalar_event
from tfguard.events._records import frame_record

EVENT_FILE = "events.out.tfevents.1700000000.host.1.v2"


def scalar(tag: str, step: int, value: float, wall: float = 1000.0) -> bytes:
    """One framed TF2 scalar record."""
    return frame_record(scalar_event(tag, step, value, wall).SerializeToString())


def text(tag: str, step: int, value: str) -> bytes:
    """One framed text summary, as `tf.summary.text` writes it."""
    event = event_pb2.Event(step=step, wall_time=1000.0)
    item = event.summary.value.add(tag=tag)
    item.metadata.plugin_data.plugin_name = "text"
    item.tensor.dtype = 7  # DT_STRING
    item.tensor.string_val.append(value.encode("utf-8"))
    item.tensor.tensor_shape.SetInParent()
    return frame_record(event.SerializeToString())


def append(path, data: bytes) -> None:
    """Appends bytes to a file (created with its folders if needed), as a writer's flush does."""
    os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
    with open(path, "ab") as f:
        f.write(data)


def epoch_records(epoch: int, loss: float, *, steps_per_epoch: int = 10, val: float | None = None,
                  grad: float = 0.5) -> bytes:
    """What tfguard's Logger writes for one epoch: batch scalars, then epoch-end scalars."""
    out = []
    first = epoch * steps_per_epoch + 1
    for step in range(first, first + steps_per_epoch):
        out.append(scalar("batch/loss", step, loss))
        out.append(scalar("grad_norm/global", step, grad))
    end = first + steps_per_epoch - 1
    out.append(scalar("train/loss", end, loss))
    out.append(scalar("val/loss", end, loss if val is None else val))
    out.append(scalar("train/epoch", end, epoch))
    return b"".join(out)


def keras_epoch(logdir, epoch: int, loss: float, val: float, *, steps_per_epoch: int = 10) -> None:
    """Appends one epoch as the stock `keras.callbacks.TensorBoard` writes it (train/, validation/)."""
    append(os.path.join(logdir, "train", EVENT_FILE), scalar("epoch_loss", epoch, loss))
    append(os.path.join(logdir, "validation", EVENT_FILE),
           scalar("epoch_loss", epoch, val)
           + scalar("evaluation_loss_vs_iterations", (epoch + 1) * steps_per_epoch, val))


def losses(epochs: int, *, nan_at: int | None = None, start: float = 2.3) -> list[float]:
    """A falling loss, NaN from epoch `nan_at` on."""
    return [math.nan if nan_at is not None and e >= nan_at else start * 0.8 ** e
            for e in range(epochs)]


def model_text(loss: str = "sparse_categorical_crossentropy") -> bytes:
    """The `config/model` record tfguard's Logger writes first."""
    description = {"name": "m", "loss": loss, "optimizer": {"class": "Adam", "learning_rate": 0.001},
                   "layers": [{"name": "dense", "class": "Dense", "activation": "relu"},
                              {"name": "out", "class": "Dense", "activation": "softmax"}]}
    return text("config/model", 0, json.dumps(description))
