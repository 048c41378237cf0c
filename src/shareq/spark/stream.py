"""The streaming share-group source: ``spark.readStream.format("shareq")``.

Spark calls ``initialOffset``/``latestOffset``/``partitions``/``commit`` in one long-lived Python
process per query; ``read`` runs on executors on a freshly unpickled reader per task. So the reader
holds its share-group membership lazily in that long-lived process (:class:`ShareDriver`, never
pickled) and carries only options across the wire.

One micro-batch:

1. ``latestOffset(start, limit)``: every batch up to ``start`` has been committed by the sink, so
   its records are acknowledged first (ACCEPT, except deliveries the pipeline marked failed, see
   :mod:`shareq.spark.acks`). Then records are acquired with ShareFetch, and the exact acquired
   runs become the batch's end offset (:class:`ShareBatchOffset`), which Spark logs before running it.
2. ``partitions(start, end)`` splits the acquired runs into tasks, more tasks than topic partitions
   when there is enough data.
3. ``read(task)`` fetches the runs' bytes with a plain Fetch: a pure function of the task, so a
   replay after a crash reads the same records.

With availableNow, an empty poll ends the query only once the group has nothing left below the
end offsets recorded at the start (a share-partition may still be initialising, or another member
may hold records until their locks lapse).

While a batch is in flight its acquisition locks are renewed (RENEW) when the broker supports it;
otherwise a warning says when the group's lock duration looks too short. A killed driver or
executor loses nothing: leases lapse and the broker redelivers. Delivery is at least once.

With ``exactlyOnce`` the source never acknowledges: each end offset also names the share group and
this member, and the exactly-once sink's commit claims the batch in a transaction (see
:mod:`shareq.spark.eos`); ``latestOffset`` only forgets committed batches (ending their renewals)
and, once per run, checks that an exactly-once shareq sink announced itself for this session
before the first batch was committed (see :meth:`ShareDriver._check_claimed`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .acks import AckType, DecisionLog
from .batch import TaskPartition
from .cluster import Cluster
from .faults import fault
from .fetch import read_with_worker_cluster
from .offsets import LATEST, Run, ShareBatchOffset, TopicPartition, merge_runs, plan_tasks
from .options import ShareSourceOptions

if TYPE_CHECKING:
    from .session import AcquiredRun

log = logging.getLogger(__name__)

LOCK_DURATION_CONFIG = "share.record.lock.duration.ms"
WINDOW_CONFIG = "share.partition.max.record.locks"
ORDERING_CONFIG = "shareq.share.ordering"
WINDOW_BOUND_CONFIG = "group.share.max.partition.max.record.locks"
DEFAULT_LOCK_DURATION_MS = 30_000
LOCK_MARGIN_MS = 10_000
ASSIGNMENT_TIMEOUT_S = 30.0


class ShareDriver:
    """The query's share-group membership and its in-flight micro-batches (driver side only)."""

    def __init__(self, options: ShareSourceOptions) -> None:
        self.options = options
        self.session_id = uuid.uuid4().hex[:12]
        from .session import ShareSession  # the share consumer is needed on the driver only

        self.cluster = Cluster(options.connect)
        if options.group_configs:
            # Before joining: share.auto.offset.reset only matters for a group without state.
            self.cluster.set_group_configs(options.group_id, dict(options.group_configs))
        self.window = self._set_window()
        self.session = ShareSession(options.connect, group_id=options.group_id, topics=options.topics)
        self.decisions = DecisionLog(self.cluster, topic=options.ack_topic, group_id=options.group_id)
        self.pending: dict[int, ShareBatchOffset] = {}
        self.carry: list[AcquiredRun] = []  # acquired beyond a micro-batch's cap, for the next one
        self.target: dict[TopicPartition, int] | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.lock_duration_ms = self._lock_duration()
        self._check_lock_duration()
        self._claim_seen = False  # exactly once: the sink claimed a batch of this run
        self._renewer: threading.Thread | None = None
        if options.renew_locks and self.session.supports_renew:
            self._renewer = threading.Thread(target=self._renew_loop, name="shareq-renew", daemon=True)
            self._renewer.start()

    # -- configuration -------------------------------------------------------------------------

    def _set_window(self) -> int | None:
        """Make the group's in-flight window (``share.partition.max.record.locks``) hold a whole
        micro-batch in one partition, and say what the group got.

        A share-partition acquires nothing beyond its start offset plus the window, so with Kafka's
        default of 2,000 a micro-batch is capped at 2,000 records per partition whatever
        ``maxRecordsPerTrigger`` says. The window is only raised (never lowered) and only when the
        query did not set it itself. A broker refuses values above its
        ``group.share.max.partition.max.record.locks`` (shareq takes any positive bound, Kafka at
        most 10,000); the source then takes that bound, warns, and carries on.
        """
        want = self.options.max_records_per_trigger
        name = WINDOW_CONFIG
        if want is None or name in dict(self.options.group_configs):
            return self._window()
        current = self._window()
        if current is not None and current >= want:
            log.info("share group %s: in-flight window %s=%d", self.options.group_id, name, current)
            return current
        got = current
        for value in (want, self._broker_window_bound()):
            if value is None or (got is not None and value <= got):
                continue
            try:
                self.cluster.set_group_configs(self.options.group_id, {name: str(value)})
            except Exception as exc:  # refused: above the broker's bound, or no such API
                log.info("could not set %s=%d on group %s: %s", name, value, self.options.group_id, exc)
                continue
            got = self._window()
            break
        if got is None or got < want:
            log.warning(
                "share group %s: the cluster allows an in-flight window (%s) of %s records per "
                "partition, below maxRecordsPerTrigger=%d; micro-batches will be smaller than asked. "
                "Raise the broker's group.share.max.partition.max.record.locks to allow more.",
                self.options.group_id,
                name,
                "the default" if got is None else got,
                want,
            )
        else:
            log.info("share group %s: in-flight window %s=%d", self.options.group_id, name, got)
        return got

    def _window(self) -> int | None:
        try:
            value = self.cluster.group_config(self.options.group_id, WINDOW_CONFIG)
        except Exception as exc:  # advisory, like the lock duration check
            log.info("could not read %s of group %s: %s", WINDOW_CONFIG, self.options.group_id, exc)
            return None
        return int(value) if value else None

    def _broker_window_bound(self) -> int | None:
        try:
            value = self.cluster.broker_config(WINDOW_BOUND_CONFIG)
        except Exception as exc:
            log.info("could not read the broker's %s: %s", WINDOW_BOUND_CONFIG, exc)
            return None
        return int(value) if value else None

    def _lock_duration(self) -> int:
        try:
            value = self.cluster.group_config(self.options.group_id, LOCK_DURATION_CONFIG)
        except Exception as exc:  # the check is advisory; a broker without the API still works
            log.info("could not read %s of group %s: %s", LOCK_DURATION_CONFIG, self.options.group_id, exc)
            value = None
        return int(value) if value else DEFAULT_LOCK_DURATION_MS

    def _check_lock_duration(self) -> None:
        needed = self.options.trigger_interval_ms + LOCK_MARGIN_MS
        if self.lock_duration_ms < needed and not (self.options.renew_locks and self.session.supports_renew):
            log.warning(
                "share group %s holds record locks for %d ms, less than the trigger interval plus %d ms; "
                "a slow micro-batch will see its records redelivered to other consumers. Raise the group's "
                "%s or shorten the trigger.",
                self.options.group_id,
                self.lock_duration_ms,
                LOCK_MARGIN_MS,
                LOCK_DURATION_CONFIG,
            )

    # -- acknowledgement -----------------------------------------------------------------------

    def acknowledge_through(self, done: ShareBatchOffset) -> None:
        """Acknowledge every pending batch up to ``done`` (the sink has committed them).

        In exactly-once mode the sink's commit acknowledged them in its transaction (or dropped
        them): the batches are only forgotten, which also ends their lock renewals."""
        if self.options.exactly_once:
            self._forget_through(done)
            return
        if done.session and done.session != self.session_id and done.acquired:
            log.info(
                "batch %d was acquired by an earlier run of the query (%d records); its records are "
                "redelivered once their locks lapse",
                done.seq,
                done.record_count,
            )
        with self._lock:
            batches = [self.pending.pop(seq) for seq in sorted(self.pending) if seq <= done.seq]
            if not batches:
                return
            fault("source.before_ack", done.seq - 1)  # (a batch's end offset is its Spark batch id + 1)
            self.decisions.poll()
            acks = [ack for batch in batches for ack in self.decisions.split(batch.acquired)]
            if self.options.release_failed:
                acks = release_failed(acks)
            acks += self._release_carried_behind(acks)
            errors = self.session.acknowledge(acks)
        for error in errors:
            log.warning("acknowledgement failed (records will be redelivered): %s", error)

    def _release_carried_behind(
        self, acks: list[tuple[str, int, int, int, AckType]]
    ) -> list[tuple[str, int, int, int, AckType]]:
        """On a key-ordered group (``shareq.share.ordering=key``), records carried over to the next
        micro-batch from the acquisition of a record the pipeline now RELEASEs may hold later records
        of its key: delivered next, they would overtake it. The driver never reads keys, so every
        carried record of that partition past the released offset is released with it (it comes
        back after, in order). Called with the lock held."""
        released: dict[tuple[str, int], int] = {}
        for topic, partition, first, _last, kind in acks:
            if kind is AckType.RELEASE:
                where = (topic, partition)
                released[where] = min(first, released.get(where, first))
        if not released or not self.carry or not self._orders_by_key():
            return []
        kept: list[AcquiredRun] = []
        back: list[tuple[str, int, int, int, AckType]] = []
        for run in self.carry:
            topic, partition, first, last, _count = run
            if last > released.get((topic, partition), last):
                back.append((topic, partition, first, last, AckType.RELEASE))
            else:
                kept.append(run)
        self.carry = kept
        return back

    def _orders_by_key(self) -> bool:
        try:
            return self.cluster.group_config(self.options.group_id, ORDERING_CONFIG) == "key"
        except Exception as exc:  # a Kafka cluster, or no answer: unordered
            log.info("could not read %s of group %s: %s", ORDERING_CONFIG, self.options.group_id, exc)
            return False

    def _forget_through(self, done: ShareBatchOffset) -> None:
        with self._lock:
            batches = [self.pending.pop(seq) for seq in sorted(self.pending) if seq <= done.seq]
        if not self._claim_seen and any(batch.acquired for batch in batches):
            self._check_claimed(max(batches, key=lambda batch: batch.seq))

    def _check_claimed(self, batch: ShareBatchOffset) -> None:
        """Refuse to go on when the query's sink does not claim this run's batches: no exactly-once
        shareq sink announced itself for this session (it does before its first claim), so the
        committed batch's records were neither acknowledged nor dropped by one.

        The records' state cannot decide it: a claimed batch whose records the start offset passed
        is skipped silently by a RENEW while the acquisition it came from holds later records, and
        a dropped batch's records may still be acquired by this member."""
        with self._lock:
            self.decisions.poll()
            announced = self.session_id in self.decisions.eos_sink_sessions
        if announced:
            self._claim_seen = True
            return
        from .options import OptionError

        raise OptionError(
            f"the shareq source of group {self.options.group_id} has exactlyOnce set, but micro-batch "
            f"{batch.seq} was committed without its records being claimed: the query's sink must be a "
            "shareq sink with .option('exactlyOnce', 'true') too, with the same ackTopic as the source "
            "(the batch's records are redelivered)"
        )

    def _renew_interval(self) -> float:
        # The lock timeout the broker reports on ShareFetch beats the configured one.
        lock_ms = self.session.lock_duration_ms or self.lock_duration_ms
        return max(0.5, lock_ms / 2000.0)

    def _renew_loop(self) -> None:
        while not self._closed.wait(self._renew_interval()) and self.session.supports_renew:
            with self._lock:
                ranges = [
                    (topic, partition, first, last, AckType.RENEW)
                    for batch in self.pending.values()
                    for (topic, partition), runs in batch.acquired.items()
                    for first, last, _ in runs
                ] + [
                    (topic, partition, first, last, AckType.RENEW)
                    for topic, partition, first, last, _ in self.carry
                ]
                errors = self.session.acknowledge(ranges) if ranges else []
            for error in errors:
                # Exactly once: the batch the sink just claimed is no longer ours to renew.
                log.log(
                    logging.INFO if self.options.exactly_once else logging.WARNING,
                    "lock renewal failed: %s",
                    error,
                )

    # -- acquisition ---------------------------------------------------------------------------

    def prepare_available_now(self) -> None:
        """Fix the target: records appended after this moment are not part of the run."""
        counts = self.cluster.partition_counts(self.options.topics)
        tps = [(t, p) for t, n in counts.items() for p in range(n)]
        self.target = self.cluster.list_offsets(tps, LATEST)

    def _split_at_target(self, runs: Sequence[AcquiredRun]) -> tuple[list[AcquiredRun], list[AcquiredRun]]:
        """(runs below the availableNow target, runs at or beyond it)."""
        if self.target is None:
            return list(runs), []
        kept: list[AcquiredRun] = []
        beyond: list[AcquiredRun] = []
        for topic, partition, first, last, count in runs:
            end = self.target.get((topic, partition), 0)
            if last < end:
                kept.append((topic, partition, first, last, count))
            elif first >= end:
                beyond.append((topic, partition, first, last, count))
            else:
                kept.append((topic, partition, first, end - 1, count))
                beyond.append((topic, partition, end, last, count))
        return kept, beyond

    @staticmethod
    def _cap(runs: Sequence[AcquiredRun], room: int | None) -> tuple[list[AcquiredRun], list[AcquiredRun]]:
        """(the first ``room`` records of ``runs``, the rest); everything when ``room`` is None."""
        if room is None:
            return list(runs), []
        taken: list[AcquiredRun] = []
        rest: list[AcquiredRun] = []
        for topic, partition, first, last, count in runs:
            size = last - first + 1
            if room >= size:
                taken.append((topic, partition, first, last, count))
                room -= size
            elif room > 0:
                taken.append((topic, partition, first, first + room - 1, count))
                rest.append((topic, partition, first + room, last, count))
                room = 0
            else:
                rest.append((topic, partition, first, last, count))
        return taken, rest

    def acquire(self, max_rows: int | None) -> dict[TopicPartition, list[Run]]:
        """ShareFetch until the limit, an empty poll or the time budget; returns runs per partition.

        Only the broker's AcquiredRecords ranges are used: the driver never decodes a record.
        ``max_rows`` is a hard cap: a broker acquires whole batches (and each leader up to the
        ShareFetch's MaxRecords), so records acquired beyond it are held, locks renewed, for the next
        micro-batch rather than released (a release would count as a delivery attempt)."""
        self.session.wait_for_assignment(ASSIGNMENT_TIMEOUT_S)
        got: dict[TopicPartition, list[Run]] = {}
        count = 0

        def take(runs: Sequence[AcquiredRun]) -> None:
            nonlocal count
            room = None if max_rows is None else max_rows - count
            taken, rest = self._cap(runs, room)
            self.carry.extend(rest)
            for topic, partition, first, last, delivery_count in taken:
                got.setdefault((topic, partition), []).append((first, last, delivery_count))
                count += last - first + 1

        with self._lock:
            carried, self.carry = self.carry, []
            take(carried)
        if max_rows is not None and count >= max_rows:
            return got
        deadline = time.monotonic() + self.options.acquire_time_budget_ms / 1000.0
        wait_ms = 0 if got else self.options.poll_timeout_ms
        while True:
            remaining = None if max_rows is None else max_rows - count
            with self._lock:
                runs = self.session.acquire(max_records=remaining, wait_ms=wait_ms)
                kept, beyond = self._split_at_target(runs)
                if beyond:
                    self.session.acknowledge(
                        [(t, p, first, last, AckType.RELEASE) for t, p, first, last, _ in beyond]
                    )
                take(kept)
            if not kept:
                break
            if (max_rows is not None and count >= max_rows) or time.monotonic() >= deadline:
                break
            wait_ms = 0
        return got

    def _behind_target(self) -> dict[TopicPartition, tuple[int, int]]:
        """Partitions where the group may still have records below the availableNow target:
        ``(start offset, target)``; a start offset of -1 is a share-partition not initialised yet.

        Kafka reports the start offset of the previous share-state write, so it can trail the
        acknowledgements; its lag (records not yet delivered to completion, up to the log end) does
        not. A partition is done when its start offset reached the target or its lag is no more than
        the records appended past the target."""
        if self.target is None:
            return {}
        wanted = [tp for tp, end in sorted(self.target.items()) if end > 0]
        if not wanted:
            return {}
        try:
            progress = self.cluster.share_progress(self.options.group_id, wanted)
            ends = self.cluster.list_offsets(wanted, LATEST)
        except Exception as exc:  # without the API, the first empty poll ends the run as before
            log.info("could not describe the start offsets of group %s: %s", self.options.group_id, exc)
            return {}
        behind: dict[TopicPartition, tuple[int, int]] = {}
        for tp in wanted:
            start, lag = progress[tp]
            target = self.target[tp]
            if start >= target or (start >= 0 and lag is not None and lag <= max(0, ends[tp] - target)):
                continue
            behind[tp] = (start, target)
        return behind

    def _acquire_until_target(self, max_rows: int | None) -> dict[TopicPartition, list[Run]]:
        """With availableNow, an empty poll ends the run only once the group has nothing left below the
        target. Until then records may still come: a share-partition is still initialising (Kafka
        answers a new member's first fetches empty for a few seconds), or another member holds records
        that return when their locks lapse. So poll on, up to the lock duration plus a margin."""
        deadline = time.monotonic() + (self.lock_duration_ms + LOCK_MARGIN_MS) / 1000.0
        while behind := self._behind_target():
            if time.monotonic() >= deadline:
                log.warning(
                    "share group %s: availableNow ends with records below its target not delivered to "
                    "this query (partition: (start offset, target)): %s",
                    self.options.group_id,
                    behind,
                )
                return {}
            got = self.acquire(max_rows)
            if got:
                return got
        return {}

    def next_batch(self, start: ShareBatchOffset, max_rows: int | None) -> ShareBatchOffset | None:
        got = self.acquire(max_rows)
        if not got and self.target is not None and not self.pending:
            # Everything acquired so far is acknowledged: an empty poll may still not be the end.
            got = self._acquire_until_target(max_rows)
        if not got:
            return None
        end = ShareBatchOffset(
            seq=start.seq + 1,
            session=self.session_id,
            acquired={tp: merge_runs(runs) for tp, runs in got.items()},
            exactly_once=self.options.exactly_once,
            group=self.options.group_id if self.options.exactly_once else "",
            member=self.session.member_id if self.options.exactly_once else "",
        )
        with self._lock:
            self.pending[end.seq] = end
        return end

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            carried, self.carry = self.carry, []
            if carried:  # never part of a micro-batch: hand them back at once
                self.session.acknowledge(
                    [(t, p, first, last, AckType.RELEASE) for t, p, first, last, _ in carried]
                )
        self.session.close()
        self.cluster.close()


class ShareStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Spark's view of the share source; see the module docstring for the protocol."""

    def __init__(self, options: ShareSourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._driver: ShareDriver | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors get options and schema only; the membership stays in the driver's process.
        return {"options": self.options, "schema": self.schema}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.options = state["options"]
        self.schema = state["schema"]
        self._driver = None

    @property
    def driver(self) -> ShareDriver:
        if self._driver is None:
            self._driver = ShareDriver(self.options)
        return self._driver

    def initialOffset(self) -> dict[str, Any]:
        # Spark may run a first, empty micro-batch at the initial offset: in exactly-once mode it
        # still says so, and the sink finds nothing to claim.
        eos = self.options.exactly_once
        return ShareBatchOffset(seq=0, exactly_once=eos, group=self.options.group_id if eos else "").to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records_per_trigger is not None:
            return ReadMaxRows(self.options.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.driver.prepare_available_now()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = ShareBatchOffset.from_json(start)
        driver = self.driver
        driver.acknowledge_through(begin)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = driver.next_batch(begin, max_rows)
        return start if end is None else end.to_json()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if start == end:
            return []
        batch = ShareBatchOffset.from_json(end)
        tasks = plan_tasks(
            batch.acquired,
            min_tasks=self.options.min_partitions,
            max_records_per_task=self.options.max_records_per_partition,
        )
        return [TaskPartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TaskPartition)
        yield from read_with_worker_cluster(
            self.options.connect,
            partition.task,
            self.schema,
            fail_on_data_loss=self.options.fail_on_data_loss,
        )

    def commit(self, end: dict[str, Any]) -> None:
        # Arrives one batch late and never while idle; latestOffset already acknowledged.
        if self._driver is not None:
            self._driver.acknowledge_through(ShareBatchOffset.from_json(end))

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()
            self._driver = None


def release_failed(
    acks: list[tuple[str, int, int, int, AckType]],
) -> list[tuple[str, int, int, int, AckType]]:
    """``failedRows=release``: REJECT decisions become RELEASEs (the group's backoff then spaces
    out the redeliveries; its delivery limit still archives a record that keeps failing)."""
    return [(t, p, f, la, AckType.RELEASE if k is AckType.REJECT else k) for t, p, f, la, k in acks]
