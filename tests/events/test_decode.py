"""Round trips: values written by real TensorFlow / TensorBoard writers, read back.

One test per kind and encoding: TF2 `tf.summary.*` tensors with their plugin
metadata, and TF1 values (`simple_value`, `HistogramProto`, `Summary.Image`)
written with TensorBoard's `EventFileWriter`.
"""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from tensorboard.compat.proto import event_pb2, summary_pb2, types_pb2
from tensorboard.data_compat import migrate_value
from tensorboard.plugins.histogram import metadata as histogram_metadata
from tensorboard.plugins.hparams import api as hp
from tensorboard.plugins.hparams import api_pb2
from tensorboard.plugins.hparams import metadata as hparams_metadata
from tensorboard.plugins.hparams import summary as hparams_summary
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.scalar import metadata as scalar_metadata
from tensorboard.plugins.text import metadata as text_metadata
from tensorboard.util import tensor_util

from tests.events.eventdata import (
    legacy_histogram_event,
    legacy_scalar_event,
    write_with_event_file_writer,
)
from tfguard import _tags
from tfguard.events import HistogramPoint, ImageInfo, read_run
from tfguard.events._decode import (
    histogram_buckets,
    image_entries,
    legacy_scalar,
    scalar_value,
    text_value,
    value_kind,
)


def _write(logdir, body):
    writer = tf.summary.create_file_writer(str(logdir))
    with writer.as_default():
        body()
    writer.close()


def test_tf2_scalars_round_trip_with_steps_wall_times_and_float32_values(tmp_path):
    before = time.time()

    def body():
        for step in range(5):
            tf.summary.scalar(_tags.train("loss"), 1.0 / (step + 1), step=step)
            tf.summary.scalar(_tags.grad_norm("dense_1"), float(step), step=step)

    _write(tmp_path, body)
    run = read_run(tmp_path)
    steps, walls, values = run.scalars["train/loss"]
    assert steps.dtype == np.int64 and walls.dtype == np.float64 and values.dtype == np.float64
    np.testing.assert_array_equal(steps, np.arange(5))
    np.testing.assert_array_equal(values, np.float32(1.0) / np.arange(1, 6, dtype=np.float32))
    assert np.all(walls >= before - 1) and np.all(np.diff(walls) >= 0)
    np.testing.assert_array_equal(run.scalars["grad_norm/dense_1"][2], np.arange(5.0))
    assert run.damage == []


def test_tf2_scalars_of_other_dtypes_are_read(tmp_path):
    # tf.summary.scalar casts to float32; tf.summary.write keeps the dtype.
    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = "scalars"

    def body():
        tf.summary.write("d", tf.constant(0.1, tf.float64), step=1, metadata=metadata)
        tf.summary.write("i", tf.constant(7, tf.int64), step=1, metadata=metadata)

    _write(tmp_path, body)
    run = read_run(tmp_path)
    assert run.scalars["d"][2].tolist() == [0.1]
    assert run.scalars["i"][2].tolist() == [7.0]


def test_tf2_histograms_round_trip_as_k_by_3_buckets(tmp_path):
    data = np.array([0.0, 1.0, 1.0, 2.0, 9.0])

    def body():
        tf.summary.histogram(_tags.hist_weights("dense/kernel"), data, step=3, buckets=4)

    _write(tmp_path, body)
    (point,) = read_run(tmp_path).histograms["hist/weights/dense/kernel"]
    assert isinstance(point, HistogramPoint) and point.step == 3
    assert point.buckets.shape == (4, 3) and point.buckets.dtype == np.float64
    assert point.buckets[0, 0] == 0.0 and point.buckets[-1, 1] == 9.0
    assert point.buckets[:, 2].sum() == len(data)


def test_tf2_text_round_trip(tmp_path):
    def body():
        tf.summary.text(_tags.GUARD_EVENTS, "step 3: **NaN** in `dense_1` ✓", step=3)
        tf.summary.text("table", [["a", "b"], ["c", "d"]], step=4)

    _write(tmp_path, body)
    run = read_run(tmp_path)
    assert run.texts["guard/events"] == [
        (3, run.texts["guard/events"][0][1], "step 3: **NaN** in `dense_1` ✓")
    ]
    assert run.texts["table"][0][2] == "a\nb\nc\nd"


def test_tf2_images_give_sizes_and_bytes_only_when_asked(tmp_path):
    pixels = np.random.default_rng(0).random((2, 6, 5, 3)).astype(np.float32)

    def body():
        tf.summary.image(_tags.IMAGES_INPUTS, pixels, step=2, max_outputs=2)

    _write(tmp_path, body)
    infos = read_run(tmp_path).images["images/inputs"]
    assert [(i.step, i.width, i.height, i.data) for i in infos] == [(2, 5, 6, None)] * 2
    assert all(isinstance(i, ImageInfo) and i.size_bytes > 50 for i in infos)
    loaded = read_run(tmp_path, load_images=True).images["images/inputs"]
    assert [len(i.data) for i in loaded] == [i.size_bytes for i in infos]
    assert Image.open(io.BytesIO(loaded[1].data)).size == (5, 6)


def test_hparams_config_session_values_and_end_status(tmp_path):
    lr = hp.HParam("lr", hp.RealInterval(1e-4, 1e-1), description="learning rate")
    units = hp.HParam("units", hp.Discrete([16, 32]))
    act = hp.HParam("activation", hp.Discrete(["relu", "tanh"]))
    _write(
        tmp_path / "root",
        lambda: hp.hparams_config(
            hparams=[lr, units, act],
            metrics=[hp.Metric("val/loss", group="validation", display_name="loss")],
        ),
    )

    def session():
        hp.hparams({lr: 0.01, units: 32, act: "relu"}, trial_id="trial-1")
        tf.summary.scalar("val/loss", 0.5, step=1)
        end = hparams_summary.session_end_pb(api_pb2.STATUS_SUCCESS, end_time_secs=123.0)
        tf.summary.experimental.write_raw_pb(end.SerializeToString(), step=1)

    _write(tmp_path / "trial", session)
    config = read_run(tmp_path / "root").hparams_config
    by_name = {h["name"]: h for h in config["hparams"]}
    assert by_name["lr"]["domain"] == {"min_value": 1e-4, "max_value": 1e-1}
    assert by_name["lr"]["description"] == "learning rate"
    assert by_name["units"]["domain"] == {"values": [16.0, 32.0]}
    assert by_name["activation"]["type"] == "DATA_TYPE_STRING"
    assert config["metrics"] == [
        {
            "tag": "val/loss",
            "group": "validation",
            "display_name": "loss",
            "description": "",
            "dataset_type": "DATASET_UNKNOWN",
        }
    ]
    trial = read_run(tmp_path / "trial")
    assert trial.hparams == {"lr": 0.01, "units": 32.0, "activation": "relu"}
    assert trial.hparams_config is None
    assert trial.hparams_session["group_name"] == "trial-1"
    assert trial.hparams_session["status"] == "STATUS_SUCCESS"
    assert trial.hparams_session["end_time_secs"] == 123.0
    assert "_hparams_/session_start_info" not in trial.scalars
    assert trial.scalars["val/loss"][2].tolist() == [0.5]
    assert read_run(tmp_path / "trial", kinds=("scalars",)).hparams == {}


def test_legacy_simple_value_histogram_and_image_round_trip(tmp_path):
    png = io.BytesIO()
    Image.new("RGB", (7, 3)).save(png, format="PNG")
    image_event = event_pb2.Event(step=4, wall_time=1.0)
    image_event.summary.value.add(
        tag="img",
        image=summary_pb2.Summary.Image(height=3, width=7, encoded_image_string=png.getvalue()),
    )
    write_with_event_file_writer(
        str(tmp_path),
        [
            legacy_scalar_event("loss", 1, 0.25),
            legacy_scalar_event("loss", 2, 0.125),
            legacy_histogram_event(
                "w", 5, lo=-1.0, hi=4.0, limits=[-2.0, 0.0, 1.0, 3.0, 5.0], counts=[0, 2, 0, 5, 0]
            ),
            image_event,
        ],
    )
    run = read_run(tmp_path, load_images=True)
    assert run.scalars["loss"][0].tolist() == [1, 2]
    assert run.scalars["loss"][2].tolist() == [0.25, 0.125]
    (point,) = run.histograms["w"]
    # As TensorBoard's data_compat: empty end buckets dropped, min and max as outer edges.
    np.testing.assert_array_equal(
        point.buckets, [[-1.0, 0.0, 2.0], [0.0, 1.0, 0.0], [1.0, 4.0, 5.0]]
    )
    (image,) = run.images["img"]
    assert (image.step, image.width, image.height, image.data) == (4, 7, 3, png.getvalue())


def test_an_all_empty_legacy_histogram_has_no_buckets():
    value = summary_pb2.Summary.Value(
        tag="w", histo=summary_pb2.HistogramProto(bucket_limit=[1.0], bucket=[0.0])
    )
    assert histogram_buckets(value).shape == (0, 3)


def test_kind_comes_from_plugin_name_then_tf1_field():
    value = summary_pb2.Summary.Value(tag="x")
    value.metadata.plugin_data.plugin_name = "pr_curves"
    assert value_kind(value) == "other"
    assert value_kind(summary_pb2.Summary.Value(tag="x", simple_value=1.0)) == "scalars"
    bare = summary_pb2.Summary.Value(tag="x")
    bare.tensor.dtype = 1
    assert value_kind(bare) is None


def test_malformed_values_are_damage_not_errors(tmp_path):
    bad_hist = event_pb2.Event(step=1, wall_time=1.0)
    item = bad_hist.summary.value.add(tag="h")
    item.metadata.plugin_data.plugin_name = "histograms"
    item.tensor.dtype = 2
    item.tensor.tensor_shape.dim.add(size=4)
    item.tensor.tensor_content = np.zeros(4).tobytes()
    bad_image = event_pb2.Event(step=1, wall_time=1.0)
    item = bad_image.summary.value.add(tag="img")
    item.metadata.plugin_data.plugin_name = "images"
    item.tensor.dtype = 7
    item.tensor.string_val.append(b"not-a-number")
    item.tensor.string_val.append(b"4")
    path = write_with_event_file_writer(str(tmp_path), [bad_hist, bad_image])
    run = read_run(tmp_path)
    assert run.histograms == {} and run.images == {}
    reasons = sorted(d.reason for d in run.damage)
    assert reasons[0].startswith("tag 'h' at step 1: histogram tensor has shape [4]")
    assert reasons[1].startswith("tag 'img' at step 1:")
    assert all(d.path == path for d in run.damage)


@pytest.mark.parametrize("kinds", [("texts",), ("histograms", "images")])
def test_kinds_not_asked_for_are_not_kept(tmp_path, kinds):
    def body():
        tf.summary.scalar("s", 1.0, step=1)
        tf.summary.histogram("h", [1.0, 2.0], step=1)
        tf.summary.text("t", "x", step=1)
        tf.summary.image("i", np.zeros((1, 2, 2, 1)), step=1)

    _write(tmp_path, body)
    run = read_run(tmp_path, kinds=kinds)
    present = {kind for kind, names in run.tags().items() if names}
    assert present == set(kinds)


@pytest.mark.parametrize(
    ("plugin", "kind"),
    [
        (scalar_metadata.PLUGIN_NAME, "scalars"),
        (histogram_metadata.PLUGIN_NAME, "histograms"),
        (text_metadata.PLUGIN_NAME, "texts"),
        (image_metadata.PLUGIN_NAME, "images"),
        (hparams_metadata.PLUGIN_NAME, "hparams"),
    ],
)
def test_kind_follows_tensorboards_own_plugin_names(plugin, kind):
    value = summary_pb2.Summary.Value(tag="x")
    value.metadata.plugin_data.plugin_name = plugin
    value.tensor.dtype = types_pb2.DT_FLOAT
    assert value_kind(value) == kind


@pytest.mark.parametrize(
    "value",
    [
        summary_pb2.Summary.Value(tag="x", simple_value=1.0),
        summary_pb2.Summary.Value(tag="x", histo=summary_pb2.HistogramProto(bucket=[1.0])),
        summary_pb2.Summary.Value(tag="x", image=summary_pb2.Summary.Image(width=1, height=1)),
        summary_pb2.Summary.Value(tag="x", audio=summary_pb2.Summary.Audio()),
        summary_pb2.Summary.Value(tag="x", obsolete_old_style_histogram=b"h"),
    ],
    ids=["simple_value", "histo", "image", "audio", "obsolete_old_style_histogram"],
)
def test_tf1_kind_is_the_kind_of_the_value_tensorboard_migrates_it_to(value):
    plugin = migrate_value(value).metadata.plugin_data.plugin_name
    expected = {scalar_metadata.PLUGIN_NAME: "scalars",
                histogram_metadata.PLUGIN_NAME: "histograms",
                image_metadata.PLUGIN_NAME: "images"}.get(plugin, "other")
    assert value_kind(value) == expected


def test_legacy_scalar_shortcut_gives_the_migrated_number_bit_for_bit():
    rng = np.random.default_rng(7)
    bits = np.concatenate([
        rng.integers(0, 2**32, 2000, dtype=np.uint64),
        [0, 0x80000000, 1, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x00800000],
    ]).astype(np.uint32)
    for number in bits.view(np.float32).tolist():
        value = summary_pb2.Summary.Value(tag="x", simple_value=number)
        migrated = float(tensor_util.make_ndarray(migrate_value(value).tensor))
        shortcut = legacy_scalar(value)
        assert scalar_value(value) == shortcut or (np.isnan(shortcut) and np.isnan(migrated))
        assert np.float64(shortcut).tobytes() == np.float64(migrated).tobytes() or (
            np.isnan(shortcut) and np.isnan(migrated)
        )


def test_legacy_histogram_buckets_are_tensorboards_migration_to_float32():
    value = summary_pb2.Summary.Value(
        tag="w",
        histo=summary_pb2.HistogramProto(
            min=-0.1, max=0.7, num=6, bucket_limit=[-0.3, 0.1, 0.3, 0.9], bucket=[0, 2, 4, 0]
        ),
    )
    buckets = histogram_buckets(value)
    expected = tensor_util.make_ndarray(migrate_value(value).tensor)
    assert buckets.dtype == np.float64
    np.testing.assert_array_equal(buckets, expected.astype(np.float64))
    np.testing.assert_array_equal(
        buckets, np.float32([[-0.1, 0.1, 2.0], [0.1, 0.7, 4.0]]).astype(np.float64)
    )


def test_legacy_image_reads_as_its_migrated_tensor():
    image = summary_pb2.Summary.Image(width=7, height=3, encoded_image_string=b"png-bytes")
    value = summary_pb2.Summary.Value(tag="img", image=image)
    assert image_entries(value, load=True) == [(7, 3, 9, b"png-bytes")]
    assert image_entries(value, load=False) == [(7, 3, 9, None)]


def test_a_text_of_another_dtype_says_which_and_what_was_expected():
    value = summary_pb2.Summary.Value(tag="t")
    value.tensor.dtype = types_pb2.DT_FLOAT
    with pytest.raises(ValueError, match="dtype DT_FLOAT, expected DT_STRING"):
        text_value(value)
    with pytest.raises(ValueError, match="holds 'simple_value', expected a DT_STRING tensor"):
        text_value(summary_pb2.Summary.Value(tag="t", simple_value=1.0))


def test_tf1_and_tf2_scalars_of_one_tag_read_the_same_numbers(tmp_path):
    numbers = [0.1, -2.5e-8, 3.0e38, float("inf")]
    events = []
    for step, number in enumerate(numbers):
        events.append(legacy_scalar_event("a", step, number))
        tf2 = event_pb2.Event(step=step, wall_time=1000.0)
        item = tf2.summary.value.add(tag="b")
        item.metadata.plugin_data.plugin_name = scalar_metadata.PLUGIN_NAME
        item.tensor.CopyFrom(tensor_util.make_tensor_proto(np.float32(number)))
        events.append(tf2)
    write_with_event_file_writer(str(tmp_path), events)
    run = read_run(tmp_path)
    np.testing.assert_array_equal(run.scalars["a"][2], np.float32(numbers).astype(np.float64))
    np.testing.assert_array_equal(run.scalars["a"][2], run.scalars["b"][2])
