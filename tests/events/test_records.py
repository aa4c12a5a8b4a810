"""The TFRecord framing: CRC32C, chunked reading, records larger than a chunk."""

from __future__ import annotations

import os
import pathlib
import struct

import tensorflow as tf

from tests.events.eventdata import record_spans, scalar_event, write_framed
from tfguard.events._records import frame_record, iter_records, masked_crc32c


def _read_all(path, **kwargs):
    damage, offsets, datas = [], [], []
    for chunk_offsets, chunk_datas in iter_records(path, damage, **kwargs):
        offsets += chunk_offsets
        datas += chunk_datas
    return offsets, datas, damage


def test_crc32c_is_castagnoli_with_tfrecord_masking():
    # The standard CRC-32C check value of b"123456789" is 0xE3069283.
    crc = 0xE3069283
    expected = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert masked_crc32c(b"123456789") == expected


def test_frame_record_reproduces_a_file_written_by_tensorflow(tmp_path):
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        for step in range(3):
            tf.summary.scalar("loss", 0.5 * step, step=step)
    (name,) = os.listdir(tmp_path)
    blob = (tmp_path / name).read_bytes()
    offsets, datas, damage = _read_all(str(tmp_path / name))
    assert damage == []
    assert offsets == [start for start, _ in record_spans(blob)]
    assert b"".join(frame_record(d) for d in datas) == blob


def test_records_spanning_chunk_boundaries_and_larger_than_a_chunk(tmp_path):
    path = str(tmp_path / "x.tfevents")
    payloads = [bytes([i % 251]) * n for i, n in enumerate([1, 5, 63, 64, 65, 300, 2, 1000, 7])]
    write_framed(path, payloads)
    for chunk_size in (64, 100, 1 << 20):
        offsets, datas, damage = _read_all(path, chunk_size=chunk_size)
        assert damage == []
        assert datas == payloads
        assert offsets[1] == 16 + 1


def test_a_file_that_cannot_be_opened_is_damage_not_an_error(tmp_path):
    offsets, datas, damage = _read_all(str(tmp_path / "missing.tfevents"))
    assert (offsets, datas) == ([], [])
    assert damage[0].offset == 0 and damage[0].reason.startswith("cannot open")


def test_record_crc_of_length_is_checked_before_the_length_is_used(tmp_path):
    path = str(tmp_path / "x.tfevents")
    write_framed(path, [scalar_event("a", 1, 1.0)])
    blob = bytearray(pathlib.Path(path).read_bytes())
    blob[8:12] = struct.pack("<I", (struct.unpack("<I", blob[8:12])[0] + 1) & 0xFFFFFFFF)
    pathlib.Path(path).write_bytes(bytes(blob))
    _, datas, damage = _read_all(path)
    assert datas == [] and [(d.offset, d.kind) for d in damage] == [(0, "corrupt")]
    assert damage[0].reason.startswith("length crc mismatch: the file is damaged from its first byte")
