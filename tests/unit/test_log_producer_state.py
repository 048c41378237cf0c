"""Idempotent producers on the partition log: duplicates, gaps, epochs, and state after reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from shareq.log.config import LogConfig
from shareq.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from shareq.log.partition_log import PRODUCER_SNAPSHOT_FILE, AppendInfo, PartitionLog
from shareq.log.records import Record, encode_batch, encode_control_batch

PID = 4242


def produce(log: PartitionLog, seq: int, n: int = 2, *, epoch: int = 0, pid: int = PID) -> AppendInfo:
    raw = encode_batch(
        [Record(value=b"%d" % (seq + i)) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    return log.append(raw, now_ms=0)


def test_retried_batch_returns_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, LogConfig(), now_ms=0)
    log.append(encode_batch([Record(value=b"plain")]), now_ms=0)
    first = produce(log, 0)
    second = produce(log, 2)
    size = log.size_bytes
    again = produce(log, 0)
    assert again.duplicate
    assert (again.first_offset, again.last_offset) == (first.first_offset, first.last_offset) == (1, 2)
    assert produce(log, 2).duplicate
    assert log.size_bytes == size and log.log_end_offset == second.last_offset + 1


def test_only_the_last_five_batches_are_remembered(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, LogConfig(), now_ms=0)
    for seq in range(0, 12, 2):
        produce(log, seq)
    assert produce(log, 2).duplicate  # 2nd of 6: still among the last five
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 0)  # fell out of the window


def test_gaps_and_epochs(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, LogConfig(), now_ms=0)
    produce(log, 0, epoch=3)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 5, epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=2)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 7, epoch=4)  # a new epoch starts at 0
    end = log.log_end_offset
    assert not produce(log, 0, epoch=4).duplicate
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=3)  # fenced now
    assert log.log_end_offset == end + 2


def test_unknown_producer_may_start_anywhere_and_sequences_wrap(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, LogConfig(), now_ms=0)
    produce(log, 0x7FFFFFFE, n=2)
    assert not produce(log, 0, n=1).duplicate  # 2**31-1 is followed by 0
    other = produce(log, 10, pid=7)
    assert not other.duplicate


def test_control_batches_move_the_epoch(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, LogConfig(), now_ms=0)
    produce(log, 0, epoch=1)
    log.append(encode_control_batch(commit=True, producer_id=PID, producer_epoch=2), now_ms=0)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, epoch=1)


def test_several_batches_of_one_producer_in_one_append(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, LogConfig(), now_ms=0)

    def raw(seq: int) -> bytes:
        return encode_batch([Record(value=b"x")] * 2, producer_id=PID, producer_epoch=0, base_sequence=seq)

    log.append(raw(0) + raw(2), now_ms=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(raw(4) + raw(7), now_ms=0)
    assert log.log_end_offset == 4
    assert produce(log, 2).duplicate


@pytest.mark.parametrize("how", ["clean", "crash", "no-snapshot"])
def test_state_survives_reopen(tmp_path: Path, how: str) -> None:
    config = LogConfig(segment_bytes=600)
    log = PartitionLog.open(tmp_path, config, now_ms=0)
    infos = [produce(log, seq) for seq in range(0, 20, 2)]
    produce(log, 0, pid=99, epoch=5)
    assert log.segment_count > 1
    if how != "crash":
        log.close()
    if how == "no-snapshot":
        (tmp_path / PRODUCER_SNAPSHOT_FILE).unlink()
    log = PartitionLog.open(tmp_path, config, now_ms=0)
    again = produce(log, 18)
    assert again.duplicate and again.first_offset == infos[-1].first_offset
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 21)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 2, pid=99, epoch=4)
    assert not produce(log, 20).duplicate


def test_stale_snapshot_beyond_a_truncated_tail_is_discarded(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path, LogConfig(), now_ms=0)
    produce(log, 0)
    produce(log, 2)
    log.close()
    segment = tmp_path / "00000000000000000000.log"
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) // 2 + 10])  # second batch torn away
    log = PartitionLog.open(tmp_path, LogConfig(), now_ms=0)
    assert log.log_end_offset == 2
    assert not produce(log, 2).duplicate  # rebuilt from the log: the torn batch is not remembered
