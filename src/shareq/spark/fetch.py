"""Executor side of both sources: read a task's offset runs with a plain Fetch.

The log is immutable below the high watermark, so this is a pure function of the task; a replayed
micro-batch reads the same bytes. Offsets inside a run that the log does not hold (control records,
compacted-away or aborted records) are skipped, as a share consumer skips them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.types import StructType

from .cluster import Cluster
from .offsets import ReadTask
from .schema import ArrowBuilder

log = logging.getLogger(__name__)

FETCH_MAX_BYTES = 4 * 1024 * 1024


def read_task(
    cluster: Cluster, task: ReadTask, schema: StructType, *, batch_rows: int = 8192
) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch`` es holding exactly the task's offsets present in the log."""
    builder = ArrowBuilder(schema, topic=task.topic, partition=task.partition, batch_rows=batch_rows)
    runs = task.runs
    run_index = 0
    position = task.first_offset
    last = task.last_offset
    while position <= last and run_index < len(runs):
        records, next_offset = cluster.fetch(task.topic, task.partition, position, max_bytes=FETCH_MAX_BYTES)
        for record in records:
            offset = record.offset
            if offset < position:
                continue  # a batch starts before the fetch offset
            while run_index < len(runs) and runs[run_index][1] < offset:
                run_index += 1
            if run_index == len(runs):
                break
            first, _, count = runs[run_index]
            if offset >= first:
                builder.add(record, count if task.share else None)
                if builder.full:
                    yield builder.flush()
        if next_offset <= position:
            log.warning(
                "%s-%d: log ends at %d before the planned offset %d; the rest of the task is gone",
                task.topic,
                task.partition,
                position,
                last,
            )
            break
        position = next_offset
    if len(builder):
        yield builder.flush()
