"""Micro-batch offsets and read planning: pure functions, no Spark and no network.

A share group has no consumer position, so a micro-batch offset of the share source is not a
position: it is the exact set of records the query *acquired* for that micro-batch, as runs
``[first, last, delivery_count]`` per topic and partition, plus a sequence number and the id of the
reader session that acquired them. Spark writes it to its offset log before running the batch, so
a replay after a crash reads exactly the same records (``read`` is a pure function of the runs,
because the log is immutable), and the session id tells a restarted query which acquisitions are
not its own to acknowledge.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# A run of consecutive offsets acquired with one delivery count: (first, last, delivery_count).
Run = tuple[int, int, int]
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareBatchOffset:
    """The end offset of one share micro-batch: what was acquired, by whom, in which order."""

    seq: int
    session: str = ""
    acquired: Mapping[TopicPartition, tuple[Run, ...]] = field(default_factory=dict)
    # Exactly-once mode: the sink's commit claims the batch in the acquiring member's name.
    exactly_once: bool = False
    group: str = ""
    member: str = ""

    @property
    def record_count(self) -> int:
        return sum(last - first + 1 for runs in self.acquired.values() for first, last, _ in runs)

    def to_json(self) -> dict[str, Any]:
        """The dict handed to Spark (string keys, primitive values, deterministic order)."""
        topics: dict[str, dict[str, list[list[int]]]] = {}
        for (topic, partition), runs in sorted(self.acquired.items()):
            topics.setdefault(topic, {})[str(partition)] = [list(run) for run in runs]
        out: dict[str, Any] = {"seq": self.seq, "session": self.session, "acquired": topics}
        if self.exactly_once:
            out.update(eos=True, group=self.group, member=self.member)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShareBatchOffset:
        acquired: dict[TopicPartition, tuple[Run, ...]] = {}
        for topic, partitions in dict(data.get("acquired", {})).items():
            for partition, runs in dict(partitions).items():
                acquired[(str(topic), int(partition))] = tuple(
                    (int(first), int(last), int(count)) for first, last, count in runs
                )
        return cls(
            seq=int(data.get("seq", 0)),
            session=str(data.get("session", "")),
            acquired=acquired,
            exactly_once=bool(data.get("eos", False)),
            group=str(data.get("group", "")),
            member=str(data.get("member", "")),
        )


def coalesce(records: Iterable[tuple[int, int]]) -> tuple[Run, ...]:
    """Turn ``(offset, delivery_count)`` pairs into sorted runs of consecutive offsets, equal counts."""
    runs: list[list[int]] = []
    for offset, count in sorted(set(records)):
        if runs and runs[-1][1] + 1 == offset and runs[-1][2] == count:
            runs[-1][1] = offset
        elif runs and runs[-1][1] >= offset:
            continue  # the same offset twice with two counts: keep the first seen
        else:
            runs.append([offset, offset, count])
    return tuple((first, last, count) for first, last, count in runs)


def merge_runs(runs: Iterable[Run]) -> tuple[Run, ...]:
    """Sort runs and join neighbours with equal delivery counts (runs must not overlap)."""
    out: list[Run] = []
    for first, last, count in sorted(runs):
        if out and out[-1][1] + 1 == first and out[-1][2] == count:
            out[-1] = (out[-1][0], last, count)
        else:
            out.append((first, last, count))
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadTask:
    """One Spark task's worth of one partition: offset runs to fetch with a plain Fetch.

    ``runs`` carry delivery counts for the share source; the batch source uses count 0 and
    ``share=False`` (its ``deliveryCount`` column is null).
    """

    topic: str
    partition: int
    runs: tuple[Run, ...]
    share: bool = True

    @property
    def first_offset(self) -> int:
        return self.runs[0][0]

    @property
    def last_offset(self) -> int:
        return self.runs[-1][1]

    @property
    def record_count(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.runs)


def _split_runs(runs: Sequence[Run], pieces: int) -> Iterator[tuple[Run, ...]]:
    """Cut runs into ``pieces`` consecutive groups of nearly equal record counts."""
    total = sum(last - first + 1 for first, last, _ in runs)
    sizes = [total // pieces + (1 if i < total % pieces else 0) for i in range(pieces)]
    current: list[Run] = []
    size_index, size = 0, 0
    for first, last, count in runs:
        start = first
        while start <= last:
            take = min(last - start + 1, sizes[size_index] - size)
            current.append((start, start + take - 1, count))
            size += take
            start += take
            if size == sizes[size_index]:
                yield tuple(current)
                current, size = [], 0
                size_index += 1


def plan_tasks(
    acquired: Mapping[TopicPartition, Sequence[Run]],
    *,
    min_tasks: int | None,
    max_records_per_task: int | None,
    share: bool = True,
) -> list[ReadTask]:
    """Split per-partition runs into tasks, as Spark's Kafka source splits offset ranges: one task
    per partition, more where a partition holds over ``max_records_per_task`` records
    (``maxRecordsPerPartition``, no cap when None), and at least ``min_tasks`` tasks in all when
    there are that many records (``minPartitions``; more tasks than partitions is the point of a
    share group). Each partition gets tasks in proportion to its records.

    The largest tasks come first. Spark starts a stage's tasks in index order, and a share
    micro-batch is often uneven (a broker hands out one partition's records until MaxRecords, so a
    micro-batch is the tail of one partition and most of the next): in partition order, the small
    task of the tail would go first and push one large task into a wave of its own on an
    otherwise idle core (longest first keeps the waves full).
    """
    counts = {tp: sum(last - first + 1 for first, last, _ in runs) for tp, runs in acquired.items()}
    total = sum(counts.values())
    tasks: list[ReadTask] = []
    for tp, runs in sorted(acquired.items()):
        n = counts[tp]
        if n == 0:
            continue
        pieces = 1 if max_records_per_task is None else -(-n // max_records_per_task)
        if min_tasks:
            pieces = max(pieces, -(-min_tasks * n // total))
        for group in _split_runs(sorted(runs), min(pieces, n)):
            tasks.append(ReadTask(topic=tp[0], partition=tp[1], runs=group, share=share))
    tasks.sort(key=lambda task: task.record_count, reverse=True)  # stable: ties stay in order
    return tasks


def batch_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[Run, ...]]:
    """Offset ranges ``[start, end)`` per partition as single runs (batch source; count 0)."""
    out: dict[TopicPartition, tuple[Run, ...]] = {}
    for tp, end_offset in end.items():
        first = start.get(tp, 0)
        if end_offset > first:
            out[tp] = ((first, end_offset - 1, 0),)
    return out


EARLIEST = -2
LATEST = -1


def parse_offset_spec(
    spec: str, assigned: Collection[TopicPartition], *, name: str
) -> dict[TopicPartition, int]:
    """Resolve ``startingOffsets``/``endingOffsets`` (``name``) for the ``assigned`` partitions:
    ``earliest``, ``latest`` or Spark's JSON form ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest,
    -1 latest). The JSON must name exactly the assigned partitions, as Spark's connector requires (a
    partition left out is an error, not a default). Offsets may still be the EARLIEST/LATEST sentinels.
    """
    text = spec.strip()
    if text.lower() == "earliest":
        return dict.fromkeys(assigned, EARLIEST)
    if text.lower() == "latest":
        return dict.fromkeys(assigned, LATEST)
    try:
        data = json.loads(text)
        specified = {
            (str(topic), int(partition)): int(offset)
            for topic, by_partition in dict(data).items()
            for partition, offset in dict(by_partition).items()
        }
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be 'earliest', 'latest' or JSON such as "
            f'{{"topicA": {{"0": 23, "1": -1}}}}, got {spec!r}'
        ) from exc
    if set(specified) != set(assigned):
        raise ValueError(
            f"partitions specified in {name} don't match those the query reads; name every one "
            f"(use -1 for latest, -2 for earliest). Specified: {_names(specified)} "
            f"Assigned: {_names(assigned)}"
        )
    return specified


def _names(tps: Iterable[TopicPartition]) -> str:
    return "{" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + "}"
