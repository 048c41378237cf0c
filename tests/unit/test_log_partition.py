"""PartitionLog against real files: appends, reads, rolls, recovery, indexes, retention, timestamps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from shareq.log.batch import crc_ok, iter_batches, read_batch_header
from shareq.log.config import LogConfig
from shareq.log.errors import (
    CorruptRecordError,
    LogIOError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from shareq.log.partition_log import CHECKPOINT_FILE, PartitionLog, TimestampOffset
from shareq.log.records import Record, decode_batches, encode_batch

SMALL = LogConfig(segment_bytes=4_000, index_interval_bytes=256)


def batch(*values: bytes, ts: int = 1_000, **kw: int) -> bytes:
    return encode_batch([Record(key=b"k", value=v, timestamp=ts) for v in values], **kw)  # type: ignore[arg-type]


def values(data: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for b in decode_batches(data) for r in b.records]


def fill(log: PartitionLog, n: int, *, per_batch: int = 3, ts0: int = 1_000) -> list[tuple[int, bytes]]:
    """Append ``n`` batches; return every (offset, value) written."""
    written = []
    for i in range(n):
        vals = [b"v%d-%d" % (i, j) for j in range(per_batch)]
        info = log.append(batch(*vals, ts=ts0 + i), now_ms=ts0 + i)
        written += list(zip(range(info.first_offset, info.last_offset + 1), vals, strict=True))
    return written


def read_all(
    log: PartitionLog, start: int | None = None, max_bytes: int = 1000
) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        assert data.batches, offset
        out += [(o, v) for o, v in values(data.records) if o >= offset]
        offset = data.batches[-1][1] + 1
    return out


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


def test_empty_log(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(), now_ms=0)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    empty = log.read(0, 100)
    assert empty.records == b"" and empty.batches == ()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    assert log.offset_for_timestamp(0) is None
    log.close()
    assert (log_dir / "00000000000000000000.log").exists()


def test_append_assigns_offsets_and_keeps_crc_valid(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(), now_ms=0)
    a = log.append(batch(b"a", b"b", base_offset=777), now_ms=5, leader_epoch=3)
    b = log.append(batch(b"c"), now_ms=6)
    assert (a.first_offset, a.last_offset, a.record_count, a.duplicate) == (0, 1, 2, False)
    assert (b.first_offset, b.last_offset) == (2, 2)
    assert log.log_end_offset == 3
    data = log.read(0, 10_000)
    assert data.batches == ((0, 1), (2, 2))
    headers = list(iter_batches(data.records))
    assert [h.base_offset for _, h in headers] == [0, 2]
    assert headers[0][1].partition_leader_epoch == 3
    assert all(crc_ok(data.records, pos, h) for pos, h in headers)
    assert values(data.records) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert log.size_bytes == len(data.records)


def test_read_starts_at_the_batch_containing_the_offset(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 100)
    for offset in (0, 1, 2, 3, 4, 150, 298, 299):
        data = log.read(offset, 1)
        assert len(data.batches) == 1  # at least one whole batch even above max_bytes
        first, last = data.batches[0]
        assert first <= offset <= last
    assert read_all(log) == written
    assert log.segment_count > 1


def test_read_respects_max_bytes_and_min_one_batch(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(), now_ms=0)
    fill(log, 10)
    size = read_batch_header(log.read(0, 1).records).size
    assert len(log.read(0, 3 * size).batches) == 3
    assert len(log.read(0, 3 * size - 1).batches) == 2
    assert log.read(0, 5, min_one_batch=False).batches == ()
    assert len(log.read(0, 5).records) == size


def test_read_out_of_range(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(), now_ms=0)
    fill(log, 2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    assert log.read(6, 100).batches == ()


def test_segments_roll_by_size_and_time(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(segment_bytes=1_000, segment_ms=100), now_ms=0)
    one = batch(b"x" * 100)
    size = len(one)
    for _ in range(1_000 // size):
        log.append(one, now_ms=0)
    assert log.segment_count == 1
    log.append(one, now_ms=0)
    assert log.segment_count == 2
    log.append(one, now_ms=99)
    assert log.segment_count == 2
    log.append(one, now_ms=100)
    assert log.segment_count == 3
    names = sorted(p.name for p in log_dir.glob("*.log"))
    assert names[1] == f"{1_000 // size:020d}.log"


def test_corrupt_and_oversized_appends_are_refused_and_write_nothing(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(max_message_bytes=500), now_ms=0)
    good = batch(b"ok")
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    for raw in (bytes(bad_crc), bytes(bad_magic), good[:-3], good + good[:10], b"", good[:60]):
        with pytest.raises(CorruptRecordError):
            log.append(raw, now_ms=0)
    with pytest.raises(RecordTooLargeError):
        log.append(batch(b"x" * 600), now_ms=0)
    assert (log.log_end_offset, log.size_bytes) == (0, 0)
    assert log.append(good + good, now_ms=0).last_offset == 1


def test_compressed_batches_pass_through_untouched(log_dir: Path) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=4, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i in range(50):
        builder.append(i, timestamp=10 + i, key=None, value=b"zstd %d" % i, headers=[])
    raw = bytes(builder.build())
    log = PartitionLog.open(log_dir, LogConfig(), now_ms=0)
    log.append(batch(b"first", ts=0), now_ms=0)
    info = log.append(raw, now_ms=0)
    assert (info.first_offset, info.last_offset) == (1, 50)
    got = log.read(1, 1 << 20).records
    assert got[8:12] == raw[8:12] and got[16:] == raw[16:]  # only offset and leader epoch patched
    assert read_batch_header(got).base_offset == 1
    assert log.offset_for_timestamp(30) == TimestampOffset(30, 21)  # the record inside, as Kafka
    assert log.max_timestamp_offset() == TimestampOffset(59, 50)


def test_reopen_after_clean_close_keeps_everything(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 60)
    log.close()
    with pytest.raises(LogIOError):
        log.read(0, 10)
    stamp = (log_dir / CHECKPOINT_FILE).stat().st_mtime_ns
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert (log_dir / CHECKPOINT_FILE).stat().st_mtime_ns == stamp  # clean: nothing to recover or record
    assert log.log_end_offset == 180
    assert read_all(log) == written
    written += fill(log, 5)
    assert read_all(log) == written


def test_reopen_without_close_recovers(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 60)
    # no close: like a killed process (the page cache keeps the writes)
    again = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert read_all(again) == written
    again.close()


def _active_log(log_dir: Path) -> Path:
    return sorted(log_dir.glob("*.log"))[-1]


@pytest.mark.parametrize("clean", [True, False])
def test_torn_tail_is_truncated_to_the_last_whole_batch(log_dir: Path, clean: bool) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 50)
    if clean:
        log.close()
    path = _active_log(log_dir)
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(batch(b"half a batch", base_offset=150)[:40])
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert path.stat().st_size == size
    assert log.log_end_offset == 150
    assert read_all(log) == written
    assert log.append(batch(b"next"), now_ms=0).first_offset == 150


def test_corrupt_crc_at_the_tail_is_dropped(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 40)
    last = log.append(batch(b"doomed", b"too"), now_ms=0)
    path = _active_log(log_dir)
    with open(path, "r+b") as f:
        f.seek(-2, os.SEEK_END)
        f.write(b"\xff\xff")
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert log.log_end_offset == last.first_offset
    assert read_all(log) == written


def test_corrupt_crc_at_the_tail_is_dropped_after_a_clean_close(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 40)
    last = log.append(batch(b"doomed"), now_ms=0)
    log.close()
    path = _active_log(log_dir)
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        byte = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert log.log_end_offset == last.first_offset
    assert read_all(log) == written


def test_garbage_after_a_crash_in_a_middle_segment_drops_later_segments(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    fill(log, 100)
    segments = sorted(log_dir.glob("*.log"))
    assert len(segments) >= 3
    (log_dir / CHECKPOINT_FILE).unlink()  # no recovery point: everything is checked
    with open(segments[1], "r+b") as f:
        f.seek(100)
        f.write(b"\x00" * 20)
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert len(sorted(log_dir.glob("*.log"))) == 2
    data = read_all(log)
    assert data and data[-1][0] == log.log_end_offset - 1
    assert log.log_end_offset < int(segments[2].stem)


@pytest.mark.parametrize("damage", ["delete", "garbage", "truncate"])
def test_indexes_are_rebuilt(log_dir: Path, damage: str) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 80)
    log.close()
    for path in list(log_dir.glob("*.index")) + list(log_dir.glob("*.timeindex")):
        if damage == "delete":
            path.unlink()
        elif damage == "garbage":
            path.write_bytes(b"\x7f" * 24)
        else:
            path.write_bytes(path.read_bytes()[:-3])
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert read_all(log) == written
    assert log.offset_for_timestamp(1_050) == TimestampOffset(1_050, 150)
    log.close()
    first = log_dir / "00000000000000000000.index"
    assert first.stat().st_size > 0 and first.stat().st_size % 8 == 0


def test_offset_for_timestamp(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    for i in range(100):
        log.append(
            encode_batch([Record(value=b"a", timestamp=10 * i), Record(value=b"b", timestamp=10 * i + 5)]),
            now_ms=0,
        )
    assert log.offset_for_timestamp(0) == TimestampOffset(0, 0)
    assert log.offset_for_timestamp(5) == TimestampOffset(5, 1)
    assert log.offset_for_timestamp(6) == TimestampOffset(10, 2)
    assert log.offset_for_timestamp(995) == TimestampOffset(995, 199)
    assert log.offset_for_timestamp(996) is None
    for ts in range(0, 1000, 7):
        found = log.offset_for_timestamp(ts)
        assert found is not None
        expected_offset = 2 * (ts // 10) + (1 if ts % 10 and ts % 10 <= 5 else 0) + (2 if ts % 10 > 5 else 0)
        assert found.offset == expected_offset, ts
    log.close()
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert log.offset_for_timestamp(500) == TimestampOffset(500, 100)


def test_offset_for_timestamp_with_unordered_timestamps(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    stamps = [50, 10, 70, 20, 90, 30]
    for ts in stamps:
        log.append(batch(b"v", ts=ts), now_ms=0)
    assert log.offset_for_timestamp(60) == TimestampOffset(70, 2)
    assert log.offset_for_timestamp(15) == TimestampOffset(50, 0)
    assert log.offset_for_timestamp(85) == TimestampOffset(90, 4)


def test_retention_by_time(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(segment_bytes=1_000, retention_ms=1_000), now_ms=0)
    for i in range(30):
        log.append(batch(b"x" * 80, ts=i * 100), now_ms=i * 100)
    segments = log.segment_count
    assert segments > 3
    assert log.enforce_retention(now_ms=1_000) == 0
    deleted = log.enforce_retention(now_ms=3_000)
    assert 0 < deleted < segments
    assert log.log_start_offset > 0
    assert len(list(log_dir.glob("*.log"))) == segments - deleted
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.read(log.log_start_offset, 100).batches[0][0] == log.log_start_offset
    remaining = log.segment_count
    assert log.enforce_retention(now_ms=10**9) == remaining - 1
    assert log.segment_count == 1  # never the active one
    start = log.log_start_offset
    log.close()
    log = PartitionLog.open(log_dir, LogConfig(segment_bytes=1_000, retention_ms=1_000), now_ms=0)
    assert log.log_start_offset == start


def test_retention_by_size(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=1_000, retention_bytes=2_500, retention_ms=-1)
    log = PartitionLog.open(log_dir, config, now_ms=0)
    for i in range(40):
        log.append(batch(b"x" * 80, ts=i), now_ms=0)
    total = log.size_bytes
    assert log.enforce_retention(now_ms=10**12) > 0
    # Whole segments go while the rest still holds at least retention_bytes (Kafka's rule).
    assert total - 1_000 >= 2_500
    assert log.size_bytes < 2_500 + 1_000 and log.size_bytes < total
    assert log.enforce_retention(now_ms=10**12) == 0


def test_advance_log_start(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 60)
    segments = log.segment_count
    log.advance_log_start(150)
    assert log.log_start_offset == 150
    assert log.segment_count < segments
    with pytest.raises(OffsetOutOfRangeError):
        log.read(149, 100)
    assert read_all(log)[0][0] == 150
    log.advance_log_start(50)  # never backwards
    assert log.log_start_offset == 150
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start(181)
    log.close()
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    assert log.log_start_offset == 150
    assert read_all(log) == [w for w in written if w[0] >= 150]


def test_flush_interval_and_delete(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(flush_interval_messages=1), now_ms=0)
    log.append(batch(b"a"), now_ms=0)
    log.flush()
    log.delete()
    assert not log_dir.exists()


_DISK_FULL = """
import resource, signal, sys
from pathlib import Path
from shareq.log.config import LogConfig
from shareq.log.errors import LogIOError
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, encode_batch
log = PartitionLog.open(Path(sys.argv[1]), LogConfig(), now_ms=0)
log.append(encode_batch([Record(key=b"k", value=b"kept", timestamp=1_000)]), now_ms=0)
size = log.size_bytes
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 2_000, limit[1]))
try:
    log.append(encode_batch([Record(value=b"y" * 5_000)]), now_ms=0)
    print("appended")
except LogIOError as exc:
    print("refused", exc)
resource.setrlimit(resource.RLIMIT_FSIZE, limit)
print(log.log_end_offset, log.size_bytes, size)
log.append(encode_batch([Record(key=b"k", value=b"after", timestamp=1_000)]), now_ms=0)
log.close()
"""


@pytest.mark.timeout(60)
def test_disk_full_leaves_the_log_consistent(log_dir: Path) -> None:
    """A write cut short by the disk (here: the file-size limit, which fails like ENOSPC after a
    partial write) is truncated back; the log stays usable once space returns. A child process
    runs it, so the lowered limit touches nothing else."""
    result = subprocess.run(
        [sys.executable, "-c", _DISK_FULL, str(log_dir)], capture_output=True, text=True, timeout=50
    )
    assert result.returncode == 0, result.stderr
    refused, state = result.stdout.splitlines()
    assert refused.startswith("refused") and "failed" in refused
    end, size_after, size_before = map(int, state.split())
    assert (end, size_after) == (1, size_before)
    log = PartitionLog.open(log_dir, LogConfig(), now_ms=0)
    assert values(log.read(0, 10_000).records) == [(0, b"kept"), (1, b"after")]


_WRITER = """
import sys
from pathlib import Path
from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.log.records import Record, encode_batch
log = PartitionLog.open(Path(sys.argv[1]), LogConfig(segment_bytes=5_000), now_ms=0)
i = 0
while True:
    info = log.append(encode_batch([Record(value=b"%d" % i)]), now_ms=0)
    print(info.last_offset, flush=True)
    i += 1
"""


@pytest.mark.timeout(60)
def test_acknowledged_appends_survive_sigkill(log_dir: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(log_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        acknowledged = -1
        while acknowledged < 300:
            acknowledged = int(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = PartitionLog.open(log_dir, LogConfig(segment_bytes=5_000), now_ms=0)
    assert log.log_end_offset > acknowledged
    got = read_all(log)
    assert got[: acknowledged + 1] == [(i, b"%d" % i) for i in range(acknowledged + 1)]
    assert log.segment_count > 1


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_idle_partition_keeps_one_descriptor_and_few_indexes(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    written = fill(log, 200)
    log.close()
    before = _open_fds()
    log = PartitionLog.open(log_dir, SMALL, now_ms=0)
    segments = log._segments
    assert len(segments) > 5
    assert _open_fds() == before + 1  # only the active segment
    assert [s.indexes_loaded for s in segments[:-1]] == [False] * (len(segments) - 1)
    assert read_all(log) == written
    assert _open_fds() <= before + 2  # plus one reader of an older segment
    assert sum(s.indexes_loaded for s in segments[:-1]) <= 2
    log.close()
    assert _open_fds() == before


def test_retention_by_time_after_reopen_reads_no_index(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=1_000, retention_ms=1_000)
    log = PartitionLog.open(log_dir, config, now_ms=0)
    for i in range(30):
        log.append(batch(b"x" * 80, ts=i * 100), now_ms=0)
    log.close()
    log = PartitionLog.open(log_dir, config, now_ms=0)
    assert log.enforce_retention(now_ms=2_500) > 0
    assert not any(s.indexes_loaded for s in log._segments[:-1])
    assert log.log_start_offset > 0
    assert read_all(log)[0][0] == log.log_start_offset


@pytest.mark.timeout(30)
def test_damage_inside_an_old_segment_is_reported_not_looped_over(log_dir: Path) -> None:
    log = PartitionLog.open(log_dir, LogConfig(segment_bytes=4_000, index_interval_bytes=100_000), now_ms=0)
    fill(log, 60)
    log.close()
    first = log_dir / "00000000000000000000.log"
    with open(first, "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 80)
    log = PartitionLog.open(log_dir, LogConfig(segment_bytes=4_000, index_interval_bytes=100_000), now_ms=0)
    assert log.read(0, 100).batches[0][0] == 0
    with pytest.raises(CorruptRecordError, match="damaged"):
        log.read(20, 100)
