"""A stateful property test: random appends, reads and (un)clean reopens against a simple model.

Whatever happens, a read returns exactly the bytes appended at the same offsets, whole batches
from the one holding the requested offset; a crash may only lose a torn last batch.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from shareq.log.config import LogConfig
from shareq.log.errors import OffsetOutOfRangeError
from shareq.log.partition_log import PartitionLog, TimestampOffset
from shareq.log.records import Record, encode_batch


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="shareq-log-"))
        self.directory = self.root / "t-0"
        self.config = LogConfig(
            segment_bytes=2_000, index_interval_bytes=150, retention_bytes=5_000, retention_ms=-1
        )
        self.log = PartitionLog.open(self.directory, self.config, now_ms=0)
        # (first offset, last offset, stored bytes, record timestamps)
        self.batches: list[tuple[int, int, bytes, list[int]]] = []
        self.epoch = 0
        self.start = 0
        self.pruned_end = 0  # where the log ends once every modelled batch was deleted

    def teardown(self) -> None:
        self.log.delete()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def end(self) -> int:
        return self.batches[-1][1] + 1 if self.batches else self.pruned_end

    @rule(
        sizes=st.lists(st.integers(0, 120), min_size=1, max_size=6),
        ts=st.lists(st.integers(0, 10_000), min_size=6, max_size=6),
        count=st.integers(1, 2),
    )
    def append(self, sizes: list[int], ts: list[int], count: int) -> None:
        raws = []
        expected = []
        offset = self.end
        for i in range(count):
            records = [Record(value=bytes([n % 251]) * n, timestamp=ts[j]) for j, n in enumerate(sizes)]
            raws.append(encode_batch(records, base_offset=12345 + i))
            stored = encode_batch(records, base_offset=offset, partition_leader_epoch=self.epoch)
            expected.append((offset, offset + len(records) - 1, stored, [r.timestamp or 0 for r in records]))
            offset += len(records)
        info = self.log.append(b"".join(raws), now_ms=0, leader_epoch=self.epoch)
        assert (info.first_offset, info.last_offset) == (self.end, offset - 1)
        self.batches += expected

    @rule(epoch=st.integers(0, 3))
    def change_leader_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @rule(data=st.data(), max_bytes=st.integers(1, 2_000))
    def read(self, data: st.DataObject, max_bytes: int) -> None:
        if self.start > 0 and data.draw(st.booleans()):
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(data.draw(st.integers(0, self.start - 1)), max_bytes)
            return
        offset = data.draw(st.integers(self.start, self.end))
        got = self.log.read(offset, max_bytes)
        if offset == self.end:
            assert got.records == b"" and got.batches == ()
            return
        i = next(k for k, b in enumerate(self.batches) if b[1] >= offset)
        n = len(got.batches)
        assert n >= 1
        want = self.batches[i : i + n]
        assert got.batches == tuple((b[0], b[1]) for b in want)
        assert got.records == b"".join(b[2] for b in want)
        assert n == 1 or len(got.records) <= max_bytes
        if i + n < len(self.batches) and len(got.records) + len(self.batches[i + n][2]) <= max_bytes:
            # Stopped early: allowed at a segment end, or at the last indexed batch start within
            # max_bytes (index entries are at most an interval plus one batch apart).
            biggest = max(len(b[2]) for b in self.batches)
            at_segment_end = self.batches[i + n][0] in {seg.base_offset for seg in self.log._segments}
            assert at_segment_end or max_bytes - len(got.records) < self.config.index_interval_bytes + biggest

    @precondition(lambda self: self.end > self.start)
    @rule(data=st.data(), max_bytes=st.integers(1, 2_000))
    def read_to_end_offset(self, data: st.DataObject, max_bytes: int) -> None:
        """A read bounded by ``end_offset`` covers the batch holding it (unless ``max_bytes`` cut
        first) and reads at most one index interval plus one batch beyond it."""
        offset = data.draw(st.integers(self.start, self.end - 1))
        end_offset = data.draw(st.integers(offset, self.end - 1))
        got = self.log.read(offset, max_bytes, end_offset=end_offset)
        unbounded = self.log.read(offset, max_bytes)
        n = len(got.batches)
        assert n >= 1
        assert got.batches == unbounded.batches[:n]
        assert got.records == unbounded.records[: len(got.records)]
        if got.batches[-1][1] < end_offset:
            assert got.batches == unbounded.batches  # only max_bytes (or a segment end) stopped it
        beyond = sum(len(b[2]) for b in self.batches if b[0] > end_offset and b[1] <= got.batches[-1][1])
        biggest = max(len(b[2]) for b in self.batches)
        assert beyond < self.config.index_interval_bytes + biggest

    @rule(data=st.data())
    def advance_log_start(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.end))
        self.log.advance_log_start(offset)
        self.start = max(self.start, offset)
        self._prune()

    @rule()
    def enforce_retention(self) -> None:
        self.log.enforce_retention(now_ms=0)
        new_start = self.log.log_start_offset
        assert new_start >= self.start
        assert (
            new_start == self.end or new_start == self.start or any(b[0] == new_start for b in self.batches)
        )
        self.start = new_start
        self._prune()

    def _prune(self) -> None:
        """Forget batches in segments the log deleted."""
        first_base = self.log._segments[0].base_offset
        end = self.end
        self.batches = [b for b in self.batches if b[0] >= first_base]
        if not self.batches:
            self.pruned_end = end

    @rule(ts=st.integers(0, 10_001))
    def timestamp_lookup(self, ts: int) -> None:
        expected = None
        for first, _, _, stamps in self.batches:
            hits = [(t, first + k) for k, t in enumerate(stamps) if t >= ts and first + k >= self.start]
            if hits:
                expected = TimestampOffset(*hits[0])
                break
        assert self.log.offset_for_timestamp(ts) == expected

    @rule()
    def reopen_clean(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.directory, self.config, now_ms=0)

    @rule(garbage=st.binary(min_size=1, max_size=90))
    def crash_with_garbage_tail(self, garbage: bytes) -> None:
        active = sorted(self.directory.glob("*.log"))[-1]
        with open(active, "ab") as f:
            f.write(garbage)
        self.log = PartitionLog.open(self.directory, self.config, now_ms=0)

    @precondition(lambda self: bool(self.batches))
    @rule(cut=st.integers(1, 60))
    def crash_tearing_the_last_batch(self, cut: int) -> None:
        active = sorted(self.directory.glob("*.log"))[-1]
        size = active.stat().st_size
        last = len(self.batches[-1][2])
        if size < last:
            return  # the last batch is not in the active segment file... cannot happen, but be safe
        os.truncate(active, size - min(cut, last))
        torn = self.batches.pop()
        if not self.batches:
            self.pruned_end = torn[0]
        self.log = PartitionLog.open(self.directory, self.config, now_ms=0)
        self.start = min(self.start, self.end)

    @invariant()
    def ends_agree(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        assert self.log.size_bytes == sum(len(b[2]) for b in self.batches)


LogMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_partition_log_model = LogMachine.TestCase
