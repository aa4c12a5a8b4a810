"""`StepQueue`: values gathered from several places are written one event per step, in step order."""

from __future__ import annotations

import threading

from tests.summary.readback import read_run
from tests.summary.writer_thread import thread_done
from tfguard.summary._step_queue import StepQueue
from tfguard.summary._summary_values import scalar_value
from tfguard.summary._writers import RunWriter


def test_values_of_one_step_become_one_event_in_step_order(tmp_path):
    queue = StepQueue()
    queue.add(7, [scalar_value("a", 1.0)])
    queue.add(3, [scalar_value("a", 0.5)])
    queue.add(7, [scalar_value("b", 2.0)])
    writer = RunWriter(str(tmp_path))
    assert queue.emit(writer) == [3, 7] and queue.written_step == 7
    queue.add(5, [scalar_value("a", 9.0)])
    assert queue.emit(writer, active=False) == [] and queue.emit(writer) == []  # dropped
    writer.close()
    run = read_run(str(tmp_path))
    assert [(p.step, p.value) for p in run["a"]] == [(3, 0.5), (7, 1.0)]
    assert [p.step for p in run["b"]] == [7]


def test_values_handed_as_a_generator_are_made_in_the_writers_thread(tmp_path):
    made_on = []

    def histograms():
        made_on.append(threading.current_thread().name)
        yield scalar_value("h", 4.0)

    queue = StepQueue()
    queue.add(2, [scalar_value("a", 1.0)])
    queue.add(2, histograms())
    assert made_on == []  # nothing made when queued
    writer = RunWriter(str(tmp_path))
    assert queue.emit(writer) == [2]
    thread_done(writer)
    writer.close()
    assert made_on == ["tfguard-summary-writer"]
    run = read_run(str(tmp_path))
    assert [(p.step, p.value) for p in run["a"]] == [(2, 1.0)] and [(p.step, p.value) for p in run["h"]] == [(2, 4.0)]
