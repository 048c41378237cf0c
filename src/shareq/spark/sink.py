"""The topic sinks: ``df.write.format("shareq")`` and ``df.writeStream.format("shareq")``.

Rows carry ``value`` (binary or string) and optionally ``key``, ``headers``
(array<struct<key: string, value: binary>>), ``topic`` (else the ``topic`` option) and ``partition``
(else by key hash, like Kafka's default partitioner). Each task produces its rows and waits for the
broker's acknowledgement before returning, so a committed Spark job means durable records.

Delivery is at least once: a retried task or a replayed micro-batch produces its rows again. Make
the consumer side idempotent (e.g. key by source topic/partition/offset) where that matters.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from shareq.heap import freeze_once_per_process

from .cluster import Cluster, OutRecord
from .faults import fault, task_batch_fault
from .options import OptionError, SinkOptions
from .schema import column


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise TypeError(
        f"cannot write {type(value).__name__} as record bytes; cast the column to binary or string"
    )


OutRow = tuple[str, int | None, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
"""A row to produce: topic, partition (None: the partitioner's), key, value, headers."""


class OutputColumns:
    """The sink's columns of one Arrow batch, read row by row as records to produce."""

    def __init__(self, batch: Any, default_topic: str | None) -> None:
        n = batch.num_rows
        self.values = column(batch, "value") or [None] * n
        self.keys = column(batch, "key") or [None] * n
        self.topics = column(batch, "topic") or [None] * n
        self.partitions = column(batch, "partition") or [None] * n
        self.headers = column(batch, "headers") or [None] * n
        self.default_topic = default_topic

    def row(self, i: int) -> OutRow:
        topic = self.topics[i] or self.default_topic
        if topic is None:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        hdrs = tuple((str(h["key"]), _as_bytes(h["value"])) for h in self.headers[i] or ())
        return topic, self.partitions[i], _as_bytes(self.keys[i]), _as_bytes(self.values[i]), hdrs


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Fail at planning time, not in a task, when rows cannot become records."""
    names = set(schema.fieldNames())
    if "value" not in names:
        raise OptionError("the shareq sink needs a 'value' column")
    if "topic" not in names and not options.topic:
        raise OptionError("the shareq sink needs a 'topic' column or the 'topic' option")


@dataclass(frozen=True, slots=True)
class SinkCommit(WriterCommitMessage):
    """What one task produced: record counts per topic."""

    counts: dict[str, int] = field(default_factory=dict)


def produce_batches(options: SinkOptions, batches: Iterator[Any]) -> SinkCommit:
    """Produce the rows of Arrow batches; returns once the broker has acknowledged all of them."""
    counts: dict[str, int] = {}
    with Cluster(options.connect) as cluster:
        for batch in batches:
            columns = OutputColumns(batch, options.topic)
            out: list[OutRecord] = []
            for i in range(batch.num_rows):
                topic, partition, key, value, hdrs = columns.row(i)
                out.append(OutRecord(topic=topic, partition=partition, key=key, value=value, headers=hdrs))
                counts[topic] = counts.get(topic, 0) + 1
            cluster.produce(out)
    freeze_once_per_process()  # see read_with_worker_cluster
    return SinkCommit(counts)


class TopicWriter(DataSourceArrowWriter):
    """Batch writes."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        return produce_batches(self.options, iterator)


class TopicStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writes: each micro-batch's tasks produce; commit has nothing left to do."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        task_batch_fault("sink.before_write")
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are durable once their task returned; nothing to finish here."""
        fault("sink.after_return", batchId)  # (the tasks' output is written: the only point here)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Already-produced records stay (at least once); the replayed batch produces them again."""
