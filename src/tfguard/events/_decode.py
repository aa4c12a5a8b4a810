"""Turn one `Summary.Value` proto into plain Python and numpy values.

Each function takes a `tensorboard.compat.proto.summary_pb2.Summary.Value` and
returns the value of one kind, in both encodings TensorBoard reads: the TF2
tensor written by `tf.summary.*` (recognised by its plugin name), and the TF1
fields (`simple_value`, `histo`, `image`). A TF1 value is first migrated to
its TF2 form by `tensorboard.data_compat.migrate_value`, as TensorBoard's own
loader does (`plugin_event_accumulator`), so both encodings are read by one
code path and give what TensorBoard shows (a TF1 histogram's buckets come
back rounded to float32, as in TensorBoard). Plugin names come from each
plugin's `metadata.PLUGIN_NAME`, dtypes from `types_pb2`, never literals.

A value that does not have the expected shape raises `ValueError` with the
reason; the run reader turns that into a `Damage` and goes on.

The run reader (`tfguard.events._collect`) reads a TF1 `simple_value` itself,
without the migration (which builds a tensor proto: about 75 µs a value
against 0.1 µs): `legacy_scalar` is that shortcut, and it gives the number
`scalar_value` gives after the migration, bit for bit.

Example:

>>> from tensorboard.compat.proto import summary_pb2
>>> value = summary_pb2.Summary.Value(tag="loss", simple_value=0.25)
>>> value_kind(value), scalar_value(value)
('scalars', 0.25)
"""

from __future__ import annotations

import numpy as np
from google.protobuf import json_format
from tensorboard.compat.proto import types_pb2
from tensorboard.data_compat import migrate_value
from tensorboard.plugins.histogram import metadata as histogram_metadata
from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.scalar import metadata as scalar_metadata
from tensorboard.plugins.text import metadata as text_metadata
from tensorboard.util import tensor_util

__all__ = [
    "KINDS",
    "OTHER",
    "experiment_config",
    "hparams_data",
    "histogram_buckets",
    "image_entries",
    "legacy_scalar",
    "modern",
    "scalar_value",
    "text_value",
    "value_kind",
]

KINDS = ("scalars", "histograms", "texts", "hparams", "images")
OTHER = "other"  # a plugin tfguard does not read (pr_curves, audio, ...)

_PLUGIN_KIND = {
    scalar_metadata.PLUGIN_NAME: "scalars",
    histogram_metadata.PLUGIN_NAME: "histograms",
    text_metadata.PLUGIN_NAME: "texts",
    image_metadata.PLUGIN_NAME: "images",
    hparams_metadata.PLUGIN_NAME: "hparams",
}
_DT_STRING = types_pb2.DT_STRING
# The TF1 fields `migrate_value` turns into a tensor (`audio` too: kind OTHER).
_LEGACY_FIELDS = frozenset({"simple_value", "histo", "image", "audio"})


def modern(value):
    """Return `value` in its TF2 form: a tensor with its plugin's metadata.

    A TF1 value (`simple_value`, `histo`, `image`, `audio`) is migrated by
    `tensorboard.data_compat.migrate_value`, as TensorBoard's loader does;
    any other value is returned as it is (the same object).

    Example:

    >>> from tensorboard.compat.proto import summary_pb2
    >>> migrated = modern(summary_pb2.Summary.Value(tag="loss", simple_value=0.5))
    >>> migrated.metadata.plugin_data.plugin_name, list(migrated.tensor.float_val)
    ('scalars', [0.5])

    Args:
        value: a `Summary.Value` proto (not modified).

    Returns:
        A `Summary.Value` whose value, if any, is a tensor.
    """
    if value.WhichOneof("value") in _LEGACY_FIELDS:
        return migrate_value(value)
    return value


def value_kind(value) -> str | None:
    """Return the kind of a summary value, or `None` if it cannot tell yet.

    The plugin name in the metadata of the value, migrated to its TF2 form
    (`modern`), decides. A tensor without metadata returns `None`:
    TensorBoard takes the kind from the first value of a tag that carries
    metadata. A TF1 field that has no TF2 form (the obsolete old-style
    histogram) is `OTHER`.

    Args:
        value: a `Summary.Value` proto.

    Returns:
        One of `KINDS`, `OTHER` for a plugin tfguard does not read, or `None`.
    """
    plugin = modern(value).metadata.plugin_data.plugin_name
    if plugin:
        return _PLUGIN_KIND.get(plugin, OTHER)
    field = value.WhichOneof("value")
    return None if field is None or field == "tensor" else OTHER


def legacy_scalar(value) -> float:
    """Return the number of a TF1 `simple_value` without migrating the value.

    `migrate_value` stores the float32 `simple_value` in a float32 tensor, so
    `scalar_value` gives the same number (the same bits; NaN stays NaN); this
    skips building that tensor proto, which costs some 750 times the read.

    Example:

    >>> from tensorboard.compat.proto import summary_pb2
    >>> value = summary_pb2.Summary.Value(tag="loss", simple_value=0.1)
    >>> legacy_scalar(value) == scalar_value(value) == float(np.float32(0.1))
    True

    Args:
        value: a `Summary.Value` whose value is `simple_value`.

    Returns:
        The value as a Python float.
    """
    return float(value.simple_value)


def scalar_value(value) -> float:
    """Return the number held by a scalar summary value.

    A TF1 `simple_value` is migrated first (`modern`).

    Args:
        value: a `Summary.Value` with `simple_value` or a one-element tensor.

    Returns:
        The value as a Python float.

    Raises:
        ValueError: if the value holds neither, or a tensor of more than one element.
    """
    value = modern(value)
    field = value.WhichOneof("value")
    if field == "tensor":
        array = tensor_util.make_ndarray(value.tensor)
        if array.size != 1:
            raise ValueError(f"scalar tensor has shape {list(array.shape)}, expected one element")
        return float(array.reshape(-1)[0])
    raise ValueError(f"scalar value holds {field!r}, expected simple_value or tensor")


def histogram_buckets(value) -> np.ndarray:
    """Return a histogram as a float64 array of rows `[left, right, count]`.

    A TF1 `HistogramProto` is migrated by TensorBoard's `data_compat`
    (`modern`): empty buckets at both ends are dropped, the first left edge is
    `min`, the last right edge is `max`, and the numbers are rounded to float32.

    Args:
        value: a `Summary.Value` with a `[k, 3]` tensor or a `histo` field.

    Returns:
        A float64 array of shape `[k, 3]` (`k` may be 0).

    Raises:
        ValueError: if the tensor does not have shape `[k, 3]`.
    """
    value = modern(value)
    field = value.WhichOneof("value")
    if field == "tensor":
        array = tensor_util.make_ndarray(value.tensor)
        if array.size == 0:
            return np.zeros((0, 3), dtype=np.float64)
        if array.ndim != 2 or array.shape[1] != 3:
            raise ValueError(f"histogram tensor has shape {list(array.shape)}, expected [k, 3]")
        return np.asarray(array, dtype=np.float64)
    raise ValueError(f"histogram value holds {field!r}, expected a tensor or histo")


def text_value(value) -> str:
    """Return the text of a text summary; a table of strings is joined by newlines.

    Args:
        value: a `Summary.Value` with a string tensor.

    Returns:
        The text, decoded as UTF-8 (undecodable bytes replaced).

    Raises:
        ValueError: if the value is not a string tensor.
    """
    field = value.WhichOneof("value")
    if field != "tensor":
        raise ValueError(f"text value holds {field!r}, expected a DT_STRING tensor")
    if value.tensor.dtype != _DT_STRING:
        raise ValueError(
            f"text tensor has dtype {_dtype_name(value.tensor.dtype)}, expected DT_STRING"
        )
    return "\n".join(s.decode("utf-8", "replace") for s in value.tensor.string_val)


def image_entries(value, load: bool) -> list[tuple[int, int, int, bytes | None]]:
    """Return `(width, height, size_bytes, data)` for each image in a value.

    A TF2 image tensor holds `[width, height, png_1, ..., png_n]` as strings;
    a TF1 `Summary.Image` is migrated to that form first (`modern`).

    Args:
        value: a `Summary.Value` of an image summary.
        load: keep the encoded bytes; otherwise `data` is `None`.

    Returns:
        One tuple per image, in the order written.

    Raises:
        ValueError: if the tensor has fewer than 2 strings or a size is not an integer.
    """
    value = modern(value)
    field = value.WhichOneof("value")
    if field == "tensor":
        strings = value.tensor.string_val
        if len(strings) < 2:
            raise ValueError(
                f"image tensor has {len(strings)} strings, expected width, height, images"
            )
        width, height = int(strings[0]), int(strings[1])
        return [(width, height, len(blob), blob if load else None) for blob in strings[2:]]
    raise ValueError(f"image value holds {field!r}, expected a string tensor or an image")


def hparams_data(value) -> tuple[str, object]:
    """Return which hparams record a value is and its content.

    Args:
        value: a `Summary.Value` written by `tensorboard.plugins.hparams`.

    Returns:
        `("experiment", Experiment proto)`, `("session_start_info", dict)` with
        keys `hparams` (name -> value), `group_name`, `start_time_secs`, or
        `("session_end_info", dict)` with keys `status` (e.g. `"STATUS_SUCCESS"`)
        and `end_time_secs`.

    Raises:
        ValueError: if the plugin content is of another version or holds nothing.
    """
    data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    if data.version != hparams_metadata.PLUGIN_DATA_VERSION:
        raise ValueError(
            f"hparams plugin data version {data.version}, expected "
            f"{hparams_metadata.PLUGIN_DATA_VERSION}"
        )
    which = data.WhichOneof("data")
    if which == "experiment":
        return which, experiment_config(data.experiment)
    if which == "session_start_info":
        info = data.session_start_info
        return which, {
            "hparams": {name: _plain(v) for name, v in info.hparams.items()},
            "group_name": info.group_name,
            "start_time_secs": info.start_time_secs,
        }
    if which == "session_end_info":
        info = data.session_end_info
        return which, {
            "status": api_pb2.Status.Name(info.status),
            "end_time_secs": info.end_time_secs,
        }
    raise ValueError("hparams plugin data holds no experiment, session start or session end")


def experiment_config(experiment) -> dict:
    """Return an hparams `Experiment` proto as a plain dict.

    Example:

    >>> from tensorboard.plugins.hparams import api_pb2
    >>> exp = api_pb2.Experiment(hparam_infos=[api_pb2.HParamInfo(name="lr")])
    >>> experiment_config(exp)["hparams"][0]["name"]
    'lr'

    Args:
        experiment: a `tensorboard.plugins.hparams.api_pb2.Experiment`.

    Returns:
        `{"name", "description", "user", "time_created_secs", "hparams", "metrics"}`;
        each hparam is `{"name", "display_name", "description", "type", "domain"}`
        where `domain` is `{"values": [...]}`, `{"min_value", "max_value"}` or
        `None`; each metric is `{"tag", "group", "display_name", "description",
        "dataset_type"}`.
    """
    hparams = []
    for info in experiment.hparam_infos:
        domain = None
        if info.HasField("domain_discrete"):
            domain = {"values": [_plain(v) for v in info.domain_discrete.values]}
        elif info.HasField("domain_interval"):
            domain = {
                "min_value": info.domain_interval.min_value,
                "max_value": info.domain_interval.max_value,
            }
        hparams.append(
            {
                "name": info.name,
                "display_name": info.display_name,
                "description": info.description,
                "type": api_pb2.DataType.Name(info.type),
                "domain": domain,
            }
        )
    metrics = [
        {
            "tag": info.name.tag,
            "group": info.name.group,
            "display_name": info.display_name,
            "description": info.description,
            "dataset_type": api_pb2.DatasetType.Name(info.dataset_type),
        }
        for info in experiment.metric_infos
    ]
    return {
        "name": experiment.name,
        "description": experiment.description,
        "user": experiment.user,
        "time_created_secs": experiment.time_created_secs,
        "hparams": hparams,
        "metrics": metrics,
    }


def _dtype_name(number: int) -> str:
    """The name of a `DataType` number, e.g. `DT_FLOAT`; the number if it has none."""
    try:
        return types_pb2.DataType.Name(number)
    except ValueError:
        return str(number)


def _plain(value) -> object:
    """A `google.protobuf.Value` as a Python bool, float, str, None, list or dict."""
    which = value.WhichOneof("kind")
    if which == "number_value":
        return value.number_value
    if which == "string_value":
        return value.string_value
    if which == "bool_value":
        return value.bool_value
    if which is None or which == "null_value":
        return None
    return json_format.MessageToDict(value)
