"""Reading a whole (small, internal) log back at start-up: every keyed record, in order.

The group-metadata log (``__consumer_offsets``) is replayed this way by the share-group and the
consumer-group coordinators alike; reads go a chunk at a time, never the whole log at once.
"""

from __future__ import annotations

from collections.abc import Iterator

from .partition_log import PartitionLog
from .records import decode_batches

READ_CHUNK = 1 << 20


def keyed_records(log: PartitionLog, chunk: int = READ_CHUNK) -> Iterator[tuple[bytes, bytes | None]]:
    """(key, value) of every record with a key, from the log start to its end as it is now."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, chunk)
        if not data.batches:
            break
        for batch in decode_batches(data.records, verify_crc=False):
            for record in batch.records:
                if record.offset >= offset and record.key is not None:
                    yield record.key, record.value
        offset = data.batches[-1][1] + 1
