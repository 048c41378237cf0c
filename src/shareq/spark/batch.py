"""The batch source: ``spark.read.format("shareq")`` reads topics by offset ranges, like Spark's
Kafka source: ``subscribe``/``assign``/``subscribePattern``, and a start and an end given as offsets
(``startingOffsets``/``endingOffsets``) or as timestamps resolved with ListOffsets
(``startingTimestamp``, ``startingOffsetsByTimestamp``, and their ``ending`` twins). It has no side
effects: no group, no commits.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .cluster import Cluster
from .fetch import read_with_worker_cluster
from .offsets import EARLIEST, LATEST, ReadTask, TopicPartition, batch_ranges, parse_offset_spec, plan_tasks
from .options import BatchSourceOptions, OptionError, Subscription


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


def selected_partitions(cluster: Cluster, subscription: Subscription) -> list[TopicPartition]:
    """The partitions a batch query reads: every partition of the subscribed or matching topics,
    or exactly the assigned ones (each of which must exist)."""
    if subscription.assign:
        counts = cluster.partition_counts(sorted({t for t, _ in subscription.assign}))
        missing = [f"{t}-{p}" for t, p in subscription.assign if p >= counts[t]]
        if missing:
            raise OptionError(f"option 'assign' names partitions that do not exist: {', '.join(missing)}")
        return list(subscription.assign)
    topics = subscription.topics
    if subscription.pattern is not None:
        topics = tuple(cluster.topics_matching(subscription.pattern))
    counts = cluster.partition_counts(topics)
    return [(t, p) for t in topics for p in range(counts[t])]


def _by_timestamp(
    tps: Sequence[TopicPartition],
    every: int | None,
    each: tuple[tuple[str, int, int], ...] | None,
    name: str,
) -> dict[TopicPartition, int] | None:
    """The timestamp per partition of ``*Timestamp`` (all partitions) or ``*OffsetsByTimestamp``
    (which, as in Spark, names every partition the query reads), or None when neither is set."""
    if every is not None:
        return dict.fromkeys(tps, every)
    if each is None:
        return None
    given = {(t, p): ts for t, p, ts in each}
    if set(given) != set(tps):
        raise OptionError(
            f"option {name!r} must name every partition the query reads: "
            f"named {sorted(given)}, reading {sorted(tps)}"
        )
    return given


def _offset_spec(spec: str, tps: Sequence[TopicPartition], *, name: str) -> dict[TopicPartition, int]:
    try:
        return parse_offset_spec(spec, tps, name=name)
    except ValueError as error:
        raise OptionError(str(error)) from error


class BatchReader(DataSourceReader):
    """Plans offset ranges on the driver, fetches them on executors."""

    def __init__(self, options: BatchSourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def _start(self, cluster: Cluster, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        o = self.options
        stamps = _by_timestamp(
            tps, o.starting_timestamp, o.starting_by_timestamp, "startingOffsetsByTimestamp"
        )
        if stamps is None:
            start = _offset_spec(o.starting_offsets, tps, name="startingOffsets")
            if any(off == LATEST for off in start.values()):
                raise OptionError("startingOffsets may not name -1 (latest) for a partition in a batch query")
            return resolve_offsets(cluster, start)
        found = cluster.offsets_for_times(stamps)
        missing = sorted(tp for tp, off in found.items() if off is None)
        if missing and o.starting_timestamp_strategy == "error":
            raise ValueError(
                "no record at or after the starting timestamp in "
                + ", ".join(f"{t}-{p} (timestamp {stamps[(t, p)]})" for t, p in missing)
                + "; startingOffsetsByTimestampStrategy 'latest' starts such partitions at the log end"
            )
        return resolve_offsets(cluster, {tp: LATEST if off is None else off for tp, off in found.items()})

    def _end(self, cluster: Cluster, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        o = self.options
        stamps = _by_timestamp(tps, o.ending_timestamp, o.ending_by_timestamp, "endingOffsetsByTimestamp")
        if stamps is None:
            end = _offset_spec(o.ending_offsets, tps, name="endingOffsets")
            if any(off == EARLIEST for off in end.values()):
                raise OptionError("endingOffsets may not name -2 (earliest) for a partition in a batch query")
            return resolve_offsets(cluster, end)
        # As in Spark, a partition without a record that late is read to its end.
        found = cluster.offsets_for_times(stamps)
        return resolve_offsets(cluster, {tp: LATEST if off is None else off for tp, off in found.items()})

    def offset_ranges(self) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """The resolved ``[start, end)`` offsets per partition.

        A start below the log start offset means records are gone (retention, deleted records):
        with ``failOnDataLoss`` (the default) the query fails, otherwise it reads from the log start.
        A start after the end is an error, as in Spark."""
        with Cluster(self.options.connect) as cluster:
            tps = selected_partitions(cluster, self.options.subscription)
            start = self._start(cluster, tps)
            end = self._end(cluster, tps)
            log_start = cluster.list_offsets(tps, EARLIEST) if tps else {}
        lost = sorted(tp for tp in tps if start[tp] < log_start[tp])
        if lost and self.options.fail_on_data_loss:
            raise ValueError(
                "records to read are no longer in the log (deleted by retention or DeleteRecords): "
                + ", ".join(f"{t}-{p} [{start[(t, p)]}, {log_start[(t, p)]})" for t, p in lost)
                + ". Set failOnDataLoss to false to read from the log start instead."
            )
        for tp in lost:
            start[tp] = log_start[tp]
            end[tp] = max(end[tp], start[tp])
        backwards = sorted(tp for tp in tps if start[tp] > end[tp])
        if backwards:
            raise ValueError(
                "the starting offset is after the ending offset in "
                + ", ".join(f"{t}-{p} ({start[(t, p)]} > {end[(t, p)]})" for t, p in backwards)
            )
        return start, end

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
        if not isinstance(partition, TaskPartition):
            return  # nothing to read: Spark runs one task without a partition of ours
        yield from read_with_worker_cluster(
            self.options.connect,
            partition.task,
            self.schema,
            fail_on_data_loss=self.options.fail_on_data_loss,
        )
