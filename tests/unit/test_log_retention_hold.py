"""Retention holds (the in-log persister's Earliest Share Offset): retention and DeleteRecords
never move the log start past the lowest hold; releasing a hold lets them go on."""

from __future__ import annotations

from pathlib import Path

import pytest

from shareq.log.config import LogConfig
from shareq.log.errors import OffsetOutOfRangeError
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, encode_batch

BY_SIZE = LogConfig(segment_bytes=1_000, retention_bytes=0, retention_ms=-1)
BY_TIME = LogConfig(segment_bytes=1_000, retention_ms=1_000)


def fill(log: PartitionLog, n: int) -> None:
    for i in range(n):
        log.append(encode_batch([Record(value=b"x" * 80, timestamp=i)]), now_ms=i)


def test_size_retention_stops_at_the_segment_holding_the_hold(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, BY_SIZE, now_ms=0)
    fill(log, 60)
    assert log.segment_count > 4
    log.set_retention_hold("g1", 25)
    log.enforce_retention(now_ms=10**12)
    assert 0 < log.log_start_offset <= 25
    assert log.read(25, 100).batches[0][0] == 25  # the held offset is still readable
    start = log.log_start_offset
    log.set_retention_hold("g2", start + 1)  # the lowest hold counts
    assert log.retention_floor == start + 1
    log.set_retention_hold("g1", None)
    assert log.enforce_retention(now_ms=10**12) == 0
    assert log.log_start_offset == start
    log.set_retention_hold("g2", None)
    assert log.retention_floor is None
    assert log.enforce_retention(now_ms=10**12) > 0
    assert log.segment_count == 1  # released: retention goes on as before (the active one stays)
    log.close()


def test_time_retention_keeps_the_held_segment_and_everything_after(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, BY_TIME, now_ms=0)
    fill(log, 60)
    segments = log.segment_count
    log.set_retention_hold("g", 0)
    assert log.enforce_retention(now_ms=10**9) == 0
    assert log.log_start_offset == 0 and log.segment_count == segments
    log.set_retention_hold("g", 40)
    log.enforce_retention(now_ms=10**9)
    assert 0 < log.log_start_offset <= 40
    assert log.read(40, 100).batches[0][0] == 40
    log.close()


def test_delete_records_past_a_hold_stops_at_it(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, BY_SIZE, now_ms=0)
    fill(log, 60)
    log.set_retention_hold("g", 30)
    assert log.advance_log_start(45) == 30
    assert log.log_start_offset == 30
    with pytest.raises(OffsetOutOfRangeError):
        log.read(29, 100)
    assert log.advance_log_start(20) == 30  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start(61)  # past the log end: refused as before, hold or not
    log.set_retention_hold("g", None)
    assert log.advance_log_start(45) == 45
    log.close()


def test_a_hold_below_the_log_start_changes_nothing(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, BY_SIZE, now_ms=0)
    fill(log, 60)
    assert log.advance_log_start(30) == 30
    log.set_retention_hold("g", 10)
    assert log.advance_log_start(35) == 30  # the hold still caps the move
    assert log.log_start_offset == 30
    with pytest.raises(ValueError):
        log.set_retention_hold("g", -1)
    log.close()


def test_holds_are_not_durable(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, BY_SIZE, now_ms=0)
    fill(log, 60)
    log.set_retention_hold("g", 5)
    log.close()
    log = PartitionLog.open(tmp_path, BY_SIZE, now_ms=0)
    assert log.retention_floor is None  # the owner sets it again after a reopen
    assert log.enforce_retention(now_ms=10**12) > 0
    log.close()
