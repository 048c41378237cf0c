"""The batch source: ``spark.read.format("shareq")`` reads topics by offset ranges, like Spark's
Kafka source (``startingOffsets``/``endingOffsets``). It has no side effects: no group, no commits.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .cluster import Cluster
from .fetch import read_with_worker_cluster
from .offsets import EARLIEST, LATEST, ReadTask, TopicPartition, batch_ranges, parse_offset_spec, plan_tasks
from .options import BatchSourceOptions


@dataclass(frozen=True, slots=True)
class TaskPartition(InputPartition):
    """A Spark input partition carrying one read task (picklable, plain values)."""

    task: ReadTask


def resolve_offsets(cluster: Cluster, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Replace the EARLIEST/LATEST sentinels by the log's current offsets."""
    earliest = [tp for tp, off in wanted.items() if off == EARLIEST]
    latest = [tp for tp, off in wanted.items() if off == LATEST]
    out = dict(wanted)
    if earliest:
        out.update(cluster.list_offsets(earliest, EARLIEST))
    if latest:
        out.update(cluster.list_offsets(latest, LATEST))
    return out


class BatchReader(DataSourceReader):
    """Plans offset ranges on the driver, fetches them on executors."""

    def __init__(self, options: BatchSourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def offset_ranges(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """The resolved ``[start, end)`` offsets per partition."""
        with Cluster(self.options.connect) as cluster:
            counts = cluster.partition_counts(self.options.topics)
            start = parse_offset_spec(self.options.starting_offsets, counts, default=EARLIEST)
            end = parse_offset_spec(self.options.ending_offsets, counts, default=LATEST)
            if any(off == LATEST for off in start.values()) and self.options.starting_offsets != "latest":
                raise ValueError("startingOffsets may not name -1 (latest) for a partition in a batch query")
            return resolve_offsets(cluster, start), resolve_offsets(cluster, end)

    def partitions(self) -> list[InputPartition]:
        start, end = self.offset_ranges()
        tasks = plan_tasks(
            batch_ranges(start, end),
            min_tasks=self.options.min_partitions,
            max_records_per_task=self.options.max_records_per_partition,
            share=False,
        )
        return [TaskPartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TaskPartition)
        yield from read_with_worker_cluster(self.options.connect, partition.task, self.schema)
