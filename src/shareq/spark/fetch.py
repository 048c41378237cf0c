"""Executor side of both sources: read a task's offset runs with a plain Fetch.

The log is immutable below the high watermark, so this is a pure function of the task; a replayed
micro-batch reads the same bytes. Offsets inside a run that the log does not hold (control records,
compacted-away records) are skipped, as a share consumer skips them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.types import StructType

from shareq.client import ClientError

from .cluster import Cluster
from .decode import RunCursor, decode_into
from .offsets import ReadTask
from .options import ConnectOptions
from .schema import ArrowBuilder

log = logging.getLogger(__name__)

MIN_FETCH_BYTES = 64 * 1024
MAX_FETCH_BYTES = 8 * 1024 * 1024
FIRST_GUESS_RECORD_BYTES = 256


_WORKER_CLUSTERS: dict[ConnectOptions, Cluster] = {}


def read_with_worker_cluster(connect: ConnectOptions, task: ReadTask, schema: StructType) -> Iterator[Any]:
    """``read_task`` on connections kept for the life of the Python worker.

    Spark reuses Python workers across tasks; reconnecting and refetching metadata per task would
    cost more than reading a small task. A broken connection drops the cache and the task is
    retried once if it failed before yielding anything.
    """
    for attempt in (1, 2):
        cluster = _WORKER_CLUSTERS.get(connect)
        if cluster is None:
            cluster = _WORKER_CLUSTERS[connect] = Cluster(connect)
        started = False
        try:
            for batch in read_task(cluster, task, schema):
                started = True
                yield batch
            return
        except ClientError:
            _WORKER_CLUSTERS.pop(connect, None)
            cluster.close()
            if started or attempt == 2:
                raise


def read_task(
    cluster: Cluster, task: ReadTask, schema: StructType, *, batch_rows: int = 8192
) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch`` es holding exactly the task's offsets present in the log.

    Each Fetch asks for about the bytes the remaining records need (learnt from the previous
    fetch), so a task does not pull a whole partition to read a slice of it.
    """
    builder = ArrowBuilder(schema, topic=task.topic, partition=task.partition, batch_rows=batch_rows)
    cursor = RunCursor(task.runs)
    position = task.first_offset
    last = task.last_offset
    record_bytes = FIRST_GUESS_RECORD_BYTES
    while position <= last and not cursor.done:
        remaining = last - position + 1
        want = min(MAX_FETCH_BYTES, max(MIN_FETCH_BYTES, int(remaining * record_bytes * 1.1)))
        blob = cluster.fetch_raw(task.topic, task.partition, position, max_bytes=want)
        next_offset, _ = decode_into(blob, cursor, builder, share=task.share, position=position)
        if next_offset <= position:
            if len(blob) >= want:
                record_bytes *= 4  # one batch is larger than asked for: ask for more
                continue
            log.warning(
                "%s-%d: the log ends at %d before the planned offset %d; the rest of the task is gone",
                task.topic,
                task.partition,
                position,
                last,
            )
            break
        record_bytes = max(16, len(blob) // max(1, next_offset - position))
        position = next_offset
        if builder.full:
            yield builder.flush()
    if len(builder):
        yield builder.flush()
