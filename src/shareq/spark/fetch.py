"""Executor side of both sources: read a task's offset runs with a plain Fetch.

The log is immutable below the high watermark, so this is a pure function of the task; a replayed
micro-batch reads the same bytes. Offsets inside a run that the log does not hold (control records,
compacted-away records) are skipped, as a share consumer skips them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from kio.schema.errors import ErrorCode
from pyspark.sql.types import StructType

from shareq.client import BrokerConnectionError, ClientError, KafkaError
from shareq.heap import freeze_once_per_process

from .cluster import Cluster
from .decode import RunCursor, decode_into
from .offsets import EARLIEST, ReadTask
from .options import ConnectOptions
from .schema import ArrowBuilder

log = logging.getLogger(__name__)

MIN_FETCH_BYTES = 64 * 1024
MAX_FETCH_BYTES = 8 * 1024 * 1024
BATCH_ALLOWANCE = 1024 * 1024
FIRST_GUESS_RECORD_BYTES = 256
STALL_S = 60.0  # how long a task retries a partition without a leader before it fails
RETRIABLE_FETCH = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.leader_not_available,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.request_timed_out,
}


_WORKER_CLUSTERS: dict[ConnectOptions, Cluster] = {}
# Bytes per record last seen in a partition by this Python worker: the next task's first Fetch asks
# for about what it needs instead of a blind guess (a task reads a slice of a partition).
_RECORD_BYTES: dict[tuple[str, int], int] = {}


def read_with_worker_cluster(
    connect: ConnectOptions, task: ReadTask, schema: StructType, *, fail_on_data_loss: bool = True
) -> Iterator[Any]:
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
            for batch in read_task(cluster, task, schema, fail_on_data_loss=fail_on_data_loss):
                started = True
                yield batch
            # Spark's daemon runs a full collection after each task of a reused worker
            freeze_once_per_process()
            return
        except DataLossError:
            raise
        except ClientError:
            _WORKER_CLUSTERS.pop(connect, None)
            cluster.close()
            if started or attempt == 2:
                raise


class DataLossError(ClientError):
    """Planned records are no longer in the log, and the query was asked to fail on data loss."""


def _lost(task: ReadTask, first: int, last: int, why: str, fail: bool) -> None:
    text = (
        f"{task.topic}-{task.partition}: offsets {first}..{last} of the task are no longer in the log ({why})"
    )
    if fail:
        raise DataLossError(text + "; set failOnDataLoss to false to skip them")
    log.warning("%s; skipped (failOnDataLoss is false)", text)


def read_task(
    cluster: Cluster,
    task: ReadTask,
    schema: StructType,
    *,
    batch_rows: int = 8192,
    fail_on_data_loss: bool = True,
) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch`` es holding exactly the task's offsets present in the log.

    Each Fetch asks for about the bytes the remaining records need (learnt from the previous
    fetch, or from the worker's previous task in the partition), so a task does not pull a whole
    partition to read a slice of it. Offsets below the log
    start (deleted since planning) or beyond the log end (a truncated log) are data loss: an error,
    or with ``fail_on_data_loss=False`` a warning and skipped.
    """
    builder = ArrowBuilder(schema, topic=task.topic, partition=task.partition, batch_rows=batch_rows)
    cursor = RunCursor(task.runs)
    position = task.first_offset
    last = task.last_offset
    record_bytes = _RECORD_BYTES.get((task.topic, task.partition), FIRST_GUESS_RECORD_BYTES)
    retries = 0
    stalled_until = time.monotonic() + STALL_S
    while position <= last and not cursor.done:
        remaining = last - position + 1
        # A task's range rarely starts or ends on a batch boundary: allow about a batch either side.
        need = remaining * record_bytes
        want = min(MAX_FETCH_BYTES, max(MIN_FETCH_BYTES, int(need * 1.1) + min(need, BATCH_ALLOWANCE)))
        try:
            blob = cluster.fetch_raw(task.topic, task.partition, position, max_bytes=want)
        except (KafkaError, BrokerConnectionError) as exc:
            if isinstance(exc, BrokerConnectionError) or exc.code in RETRIABLE_FETCH or exc.retriable:
                # A leader moved or went away (a broker of a cluster killed): retry where the task
                # stands, with fresh metadata, while the cluster elects a new leader.
                retries += 1
                if time.monotonic() >= stalled_until:
                    raise
                time.sleep(min(0.1 * 2**retries, 1.0))
                cluster.forget_leaders(task.topic)
                continue
            if exc.code != ErrorCode.offset_out_of_range:
                raise
            log_start = cluster.list_offsets([(task.topic, task.partition)], EARLIEST)[
                (task.topic, task.partition)
            ]
            if log_start <= position:
                raise
            _lost(task, position, min(last, log_start - 1), "deleted", fail_on_data_loss)
            position = log_start
            continue
        next_offset, _, used = decode_into(blob, cursor, builder, share=task.share, position=position)
        if next_offset <= position:
            if len(blob) >= want:
                record_bytes *= 4  # one batch is larger than asked for: ask for more
                continue
            _lost(task, position, last, f"the log ends at {position}", fail_on_data_loss)
            break
        record_bytes = max(16, used // max(1, next_offset - position))
        _RECORD_BYTES[(task.topic, task.partition)] = record_bytes
        retries, stalled_until = 0, time.monotonic() + STALL_S
        position = next_offset
        if builder.full:
            yield builder.flush()
    if len(builder):
        yield builder.flush()
