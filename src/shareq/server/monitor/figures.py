"""Figures of each loaded share-partition, computed when asked (a scrape, a web-view push).

Both ``/metrics`` and the web view read the same figures, so they always agree. The cost is one
walk over the in-flight runs of each share-partition (runs, not records), plus, for a
share-partition with lag, one small log read to find the timestamp of the record at its SPSO.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shareq.log.batch import read_batch_header
from shareq.log.errors import LogError
from shareq.share import RecordState, SharePartition
from shareq.share.stats import SharePartitionStats

from ..partitions import Partition

if TYPE_CHECKING:
    from ..broker import Broker

STATES: tuple[RecordState, ...] = tuple(RecordState)

# A lock "about to expire" has less than this share of the group's lock duration left.
EXPIRING_FRACTION = 0.25


@dataclass(slots=True)
class Run:
    """One in-flight run as the web view draws it."""

    first: int
    last: int
    state: RecordState
    delivery_count: int
    expiring: bool  # ACQUIRED and its lock is about to expire


@dataclass(slots=True)
class SharePartitionFigures:
    group: str
    topic: str
    partition: int
    spso: int
    speo: int
    end: int  # what the group may read up to: the log end, or the LSO under read_committed
    lag: int  # records at or past the SPSO not yet delivered for good (acknowledged or archived)
    lag_seconds: float | None  # age of the record at the SPSO when it is not delivered yet
    by_state: dict[RecordState, int]
    batches: int  # in-flight runs
    expiring: int  # ACQUIRED records whose lock is about to expire
    stats: SharePartitionStats
    delayed: int  # AVAILABLE records waiting out a redelivery backoff
    next_redelivery_ms: int | None  # when the first of them is due (epoch ms)
    window_mode: str  # span (Kafka's) or count
    sp: SharePartition = field(repr=False)
    log: Partition | None = field(repr=False)
    runs: list[Run] = field(default_factory=list)  # filled by ``add_detail``
    ordering: str = "none"  # the group's shareq.share.ordering
    blocked_keys: int = 0  # key-ordered: distinct keys with a held record (at the last acquisition)
    key_waiting: int = 0  # key-ordered: records the last acquisition looked past (their key held)


def share_partition_figures(
    broker: Broker, now_ms: int, *, detail: bool = True
) -> list[SharePartitionFigures]:
    """Every loaded share-partition, ordered by group, topic and partition; with ``detail`` also the
    age of its oldest undone record (a log read, which the web view spends only on the
    share-partitions it draws, through ``add_detail``)."""
    share = broker.share
    if share is None:
        return []
    out: list[SharePartitionFigures] = []
    for sp in share.partitions:
        if not sp.initialized:
            continue
        topic = broker.topics.by_id(sp.key.topic_id)
        if topic is None:
            continue
        partition = broker.partition(topic.name, sp.key.partition)
        read_committed = share.coordinator.group_config(sp.key.group_id).isolation_level == "read_committed"
        figures = _figures(sp, topic.name, partition, now_ms, read_committed)
        figures.ordering = share.coordinator.group_config(sp.key.group_id).ordering
        if sp.key_stats is not None:
            figures.blocked_keys = sp.key_stats.blocked_keys
            figures.key_waiting = sp.key_stats.waiting
        if detail:
            add_detail(figures, now_ms, runs=False)
        out.append(figures)
    out.sort(key=lambda f: (f.group, f.topic, f.partition))
    return out


def add_detail(f: SharePartitionFigures, now_ms: int, *, runs: bool = True) -> None:
    """Fill ``lag_seconds`` (one batch header read at the SPSO) and, with ``runs``, the runs of the
    strip (a second walk over the in-flight runs)."""
    sp, spso = f.sp, f.spso
    partition = f.log
    if f.lag and partition is not None and spso < partition.log.log_end_offset:
        f.lag_seconds = _age_at(partition, spso, now_ms)
    if not runs:
        return
    soon = now_ms + int(sp.config.record_lock_duration_ms * EXPIRING_FRACTION)
    acquired = RecordState.ACQUIRED
    f.runs = [
        Run(
            run.first,
            run.last,
            run.state,
            run.count,
            run.state is acquired and run.lock is not None and run.lock.deadline <= soon,
        )
        for run in sp.in_flight()
        if run.last >= spso
    ]


def _figures(
    sp: SharePartition,
    topic: str,
    partition: Partition | None,
    now_ms: int,
    read_committed: bool,
) -> SharePartitionFigures:
    by_state = dict.fromkeys(STATES, 0)
    lock_ms = sp.config.record_lock_duration_ms
    soon = now_ms + int(lock_ms * EXPIRING_FRACTION)
    expiring = batches = 0
    spso = sp.spso
    for run in sp.in_flight():
        if run.last < spso:
            continue
        batches += 1
        size = run.last - run.first + 1
        by_state[run.state] += size
        lock = run.lock
        about_to_expire = run.state is RecordState.ACQUIRED and lock is not None and lock.deadline <= soon
        if about_to_expire:
            expiring += size
    end = sp.speo
    if partition is not None:
        plog = partition.log
        end = max(plog.visible_stable_offset if read_committed else plog.visible_end_offset, end)
    lag = max(end - spso - sp.delivery_complete_count, 0)
    delayed, next_due = sp.delayed()
    return SharePartitionFigures(
        group=sp.key.group_id,
        topic=topic,
        partition=sp.key.partition,
        spso=spso,
        speo=sp.speo,
        end=end,
        lag=lag,
        lag_seconds=None,
        by_state=by_state,
        batches=batches,
        expiring=expiring,
        stats=sp.stats,
        delayed=delayed,
        next_redelivery_ms=next_due,
        window_mode="count" if sp.config.window_count else "span",
        sp=sp,
        log=partition,
    )


def _age_at(partition: Partition, offset: int, now_ms: int) -> float | None:
    """Seconds since the batch holding ``offset`` was stamped (its first timestamp)."""
    plog = partition.log
    if offset < plog.log_start_offset:
        return None
    try:
        data = plog.read(offset, 1, end_offset=offset)
    except LogError:
        return None
    if not data.records:
        return None
    stamp = read_batch_header(data.records).base_timestamp
    return max(now_ms - stamp, 0) / 1000.0 if stamp >= 0 else None
