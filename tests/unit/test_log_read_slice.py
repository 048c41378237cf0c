"""PartitionLog.read_slice: a Fetch's answer as Kafka's LogSegment.read slices it (the last batch cut
at the byte limit), never past the visible end, never a piece of share state."""

from __future__ import annotations

from pathlib import Path

import pytest

from shareq.client.records import iter_record_batches
from shareq.log.batch import read_batch_header
from shareq.log.config import LogConfig
from shareq.log.errors import OffsetOutOfRangeError
from shareq.log.partition_log import PartitionLog
from shareq.log.records import (
    CONTROL_TYPE_SHARE_DELTA,
    Record,
    encode_batch,
    encode_share_control_batch,
)

SMALL = LogConfig(segment_bytes=4_000, index_interval_bytes=256)


def batch(n: int = 3, size: int = 40, **kw: object) -> bytes:
    return encode_batch([Record(value=b"v" * size, timestamp=1_000) for _ in range(n)], **kw)  # type: ignore[arg-type]


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", LogConfig(), now_ms=0)


def test_the_slice_is_the_limit_with_the_last_batch_cut(log: PartitionLog) -> None:
    for _ in range(10):
        log.append(batch(), now_ms=1)
    size = len(batch())
    whole = log.read(0, 10 * size).records
    for limit in (size, size + 1, 2 * size + 17, 3 * size - 1, 10 * size, 50 * size):
        data = log.read_slice(0, limit)
        cut = min(limit, 10 * size)
        assert data.records == whole[:cut]
        assert data.tail == cut % size
        assert data.batches == tuple((3 * i, 3 * i + 2) for i in range(cut // size))
        # every client decodes the whole batches and drops the cut one
        assert [b.header.base_offset for b in iter_record_batches(data.records)] == [
            3 * i for i in range(cut // size)
        ]


def test_the_first_batch_comes_whole_even_above_the_limit(log: PartitionLog) -> None:
    log.append(batch(), now_ms=1)
    log.append(batch(), now_ms=1)
    size = len(batch())
    first = log.read_slice(1, 5)  # from the middle of the first batch
    assert (len(first.records), first.tail, first.batches) == (size, 0, ((0, 2),))
    assert log.read_slice(0, 5, min_one_batch=False).records == b""
    assert log.read_slice(0, 0, min_one_batch=False).records == b""


def test_nothing_at_or_past_the_end_offset(log: PartitionLog) -> None:
    for _ in range(4):
        log.append(batch(), now_ms=1)
    size = len(batch())
    for end, whole in ((3, 1), (4, 1), (6, 2), (9, 3)):  # the batch 3..5 reaches 3 and 4, not 6
        data = log.read_slice(0, 10 * size, end_offset=end)
        assert (len(data.records), data.tail) == (whole * size, 0)
    # a cut batch reaching the end offset is left out, however little of it is cut (a bare header)
    for extra in (1, 7, 30, size - 1):
        data = log.read_slice(0, size + extra, end_offset=3)
        assert (len(data.records), data.tail) == (size, 0)
        data = log.read_slice(0, size + extra, end_offset=6)
        assert (len(data.records), data.tail) == (size + extra, extra)
    assert log.read_slice(12, 100).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read_slice(13, 100)


def test_a_cut_share_state_batch_is_left_out(log: PartitionLog) -> None:
    log.append(batch(), now_ms=1)
    share = encode_share_control_batch(CONTROL_TYPE_SHARE_DELTA, b"s" * 300)
    log.append(share, now_ms=1)
    log.append(batch(), now_ms=1)
    size = len(batch())
    for extra in (1, 20, 61, 80, len(share) - 1):
        data = log.read_slice(0, size + extra)
        assert (len(data.records), data.tail, data.batches) == (size, 0, ((0, 2),))
    data = log.read_slice(0, size + len(share) + 10)  # whole, it is there (the Fetch handler cuts it)
    assert (len(data.records), data.tail, len(data.batches)) == (size + len(share) + 10, 10, 2)
    assert data.controls == (size,)


def test_a_slice_stays_in_one_segment(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", SMALL, now_ms=0)
    for _ in range(40):
        log.append(batch(), now_ms=1)
    assert log.segment_count > 1
    offset = 0
    seen = []
    while offset < log.log_end_offset:
        data = log.read_slice(offset, 1_000)
        assert data.batches and len(data.records) <= max(1_000, read_batch_header(data.records).size)
        seen += [b.header.base_offset for b in iter_record_batches(data.records)]
        offset = data.batches[-1][1] + 1
    assert seen == [3 * i for i in range(40)]
