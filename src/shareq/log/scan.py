"""Reading a whole (small, internal) log back at start-up: every keyed record, in order.

The group-metadata log (``__consumer_offsets``) is replayed this way by the share-group and the
consumer-group coordinators alike; reads go a chunk at a time, never the whole log at once.
Control batches (transaction markers) are not keyed records: :func:`keyed_records` skips them and
:func:`log_entries` reports them, with the producer id of transactional records, for replays that
keep transactional writes pending until their marker. Share-state control batches (SHARE_CHECKPOINT,
SHARE_DELTA) are neither and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from .partition_log import PartitionLog
from .records import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, control_record_type, decode_batches

READ_CHUNK = 1 << 20
DATA = -1


class LogEntry(NamedTuple):
    """A keyed record (``marker == DATA``) or a transaction marker (``marker`` 0 ABORT, 1 COMMIT).

    ``producer_id`` is -1 for a record written outside a transaction.
    """

    key: bytes | None
    value: bytes | None
    producer_id: int
    marker: int


def log_entries(log: PartitionLog, chunk: int = READ_CHUNK) -> Iterator[LogEntry]:
    """Every keyed record and every marker, from the log start to its end as it is now."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, chunk)
        if not data.batches:
            break
        for batch in decode_batches(data.records, verify_crc=False):
            header = batch.header
            pid = header.producer_id if header.is_transactional else -1
            for record in batch.records:
                if record.offset < offset:
                    continue
                if header.is_control:
                    marker = control_record_type(record)
                    if marker in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):  # not share state
                        yield LogEntry(None, None, pid, marker)
                elif record.key is not None:
                    yield LogEntry(record.key, record.value, pid, DATA)
        offset = data.batches[-1][1] + 1


def keyed_records(log: PartitionLog, chunk: int = READ_CHUNK) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) of every record with a key, markers left out."""
    for entry in log_entries(log, chunk):
        if entry.key is not None:
            yield entry.key, entry.value
