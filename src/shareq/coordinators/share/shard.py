"""ShareCoordinatorShard: the share-group state of one state-topic partition.

Handlers decide and never mutate: each returns a ``CoordinatorResult`` holding the records to
append and the response to give once they are durable. ``replay`` applies one record (every fresh
write, and the reference way to load a log); ``restore`` installs a share-partition as the bulk
loader (``loader.ShardLoader``) computed it, which a property test holds equal to replaying.

Per share-partition the shard keeps the combined state (snapshot plus updates so far), the count of
updates since the latest snapshot and that snapshot's log offset. The minimum of those offsets over
all keys is the prune offset: no record below it is needed to rebuild any state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from kio.schema.errors import ErrorCode

from shareq.share.persister import (
    NO_START_OFFSET,
    STATE_ACKNOWLEDGED,
    STATE_ARCHIVED,
    STATE_ARCHIVING,
    STATE_AVAILABLE,
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    SharePartitionKey,
    ShareState,
    ShareStateSummary,
    StateBatch,
    WriteStateParams,
)

from .combiner import combine_state_batches, prune_joined
from .delays import combine_delays, prune_delays
from .pending import add_staged, resolve_marker
from .records import MARKER_KEY, ShareSnapshot, ShareTxnMarker, ShareTxnStage, ShareUpdate, StateRecord

R = TypeVar("R")
NO_LEADER_EPOCH = -1
_PERSISTED_STATES = frozenset({STATE_AVAILABLE, STATE_ACKNOWLEDGED, STATE_ARCHIVING, STATE_ARCHIVED})


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareCoordinatorConfig:
    """Kafka's ``share.coordinator.*`` settings that shape the state topic."""

    snapshot_update_records_per_snapshot: int = 500
    cold_partition_snapshot_interval_ms: int = 300_000
    state_topic_prune_interval_ms: int = 300_000
    state_topic_num_partitions: int = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorResult(Generic[R]):
    """Records to append, and the response to give once they are durable."""

    records: tuple[StateRecord, ...]
    response: R


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadResult:
    error: ErrorCode
    state: ShareState | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadSummaryResult:
    error: ErrorCode
    summary: ShareStateSummary | None = None


class _KeyState:
    """Soft state of one share-partition (changed only by ``replay`` and ``restore``).

    While a partition is replayed record by record before ``complete_load``, updates are queued in
    ``pending`` and folded into ``current`` in one pass on first use.
    """

    __slots__ = ("_current", "pending", "snapshot_offset", "updates_since_snapshot")

    def __init__(self, current: ShareSnapshot, snapshot_offset: int) -> None:
        self._current = current  # the combined state, shaped as a snapshot
        self.pending: list[ShareUpdate] = []
        self.snapshot_offset = snapshot_offset
        self.updates_since_snapshot = 0

    @property
    def current(self) -> ShareSnapshot:
        if self.pending:
            self._current = fold_updates(self._current, self.pending)
            self.pending = []
        return self._current

    @current.setter
    def current(self, value: ShareSnapshot) -> None:
        self._current = value
        self.pending = []


def _apply(cur: ShareSnapshot, update: ShareUpdate, batches: tuple[StateBatch, ...] | None) -> ShareSnapshot:
    """``update`` applied to ``cur`` (``batches``: the combined batches if already known)."""
    start = cur.start_offset if update.start_offset == NO_START_OFFSET else update.start_offset
    if batches is None:
        if update.state_batches or update.start_offset != NO_START_OFFSET:
            batches = combine_state_batches(cur.state_batches, update.state_batches, start)
        else:
            batches = cur.state_batches
    dcc = update.delivery_complete_count
    return ShareSnapshot(
        snapshot_epoch=cur.snapshot_epoch,
        state_epoch=cur.state_epoch,
        leader_epoch=update.leader_epoch,
        start_offset=start,
        delivery_complete_count=cur.delivery_complete_count
        if dcc == UNINITIALIZED_DELIVERY_COMPLETE_COUNT
        else dcc,
        create_timestamp=cur.create_timestamp,
        write_timestamp=cur.write_timestamp,
        state_batches=batches,
        pending_txn_batches=cur.pending_txn_batches,
        delays=combine_delays(cur.delays, update.state_batches, update.delays, start)
        if cur.delays or update.delays
        else (),
    )


def apply_stage(cur: ShareSnapshot, stage: ShareTxnStage) -> ShareSnapshot:
    """``cur`` with the entries of a txn stage record added to its pending ones."""
    return replace(cur, pending_txn_batches=add_staged(cur.pending_txn_batches, stage.batches))


def apply_marker(cur: ShareSnapshot, marker: ShareTxnMarker) -> ShareSnapshot:
    """``cur`` once ``marker`` settled its producer's pending entries (``cur`` itself if none)."""
    if not cur.pending_txn_batches:
        return cur
    batches, pending, start = resolve_marker(
        cur.state_batches,
        cur.pending_txn_batches,
        cur.start_offset,
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        commit=marker.commit,
    )
    if pending is cur.pending_txn_batches:
        return cur
    return replace(cur, state_batches=batches, pending_txn_batches=pending, start_offset=start)


def fold_updates(cur: ShareSnapshot, updates: list[ShareUpdate]) -> ShareSnapshot:
    """Apply ``updates`` in order; one combine when the start offset never moves backwards."""
    start = cur.start_offset
    monotonic = True
    dcc = cur.delivery_complete_count
    for u in updates:
        if u.start_offset != NO_START_OFFSET:
            if u.start_offset < start:
                monotonic = False
                break
            start = u.start_offset
        if u.delivery_complete_count != UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
            dcc = u.delivery_complete_count
    if not monotonic:
        for u in updates:
            cur = _apply(cur, u, None)
        return cur
    layered = [b for u in updates for b in u.state_batches]
    delays = cur.delays
    if delays or any(u.delays for u in updates):
        for u in updates:
            delays = combine_delays(delays, u.state_batches, u.delays, NO_START_OFFSET)
        delays = prune_delays(delays, start)
    return ShareSnapshot(
        snapshot_epoch=cur.snapshot_epoch,
        state_epoch=cur.state_epoch,
        leader_epoch=updates[-1].leader_epoch,
        start_offset=start,
        delivery_complete_count=dcc,
        create_timestamp=cur.create_timestamp,
        write_timestamp=cur.write_timestamp,
        state_batches=combine_state_batches(cur.state_batches, layered, start)
        if layered or start != cur.start_offset
        else cur.state_batches,
        pending_txn_batches=cur.pending_txn_batches,
        delays=delays,
    )


def _to_share_state(s: ShareSnapshot, leader_epoch: int | None = None) -> ShareState:
    return ShareState(
        state_epoch=s.state_epoch,
        leader_epoch=s.leader_epoch if leader_epoch is None else leader_epoch,
        start_offset=s.start_offset,
        delivery_complete_count=s.delivery_complete_count,
        state_batches=s.state_batches,
        pending_txn_batches=s.pending_txn_batches,
        delays=s.delays,
    )


def _delta(batches: tuple[StateBatch, ...], start: int, joined: bool) -> tuple[StateBatch, ...]:
    """The batches an update carries: ``batches`` normalized and pruned below ``start``."""
    if joined:  # the engine's deltas (one, or hundreds when types alternate): only pruned
        return prune_joined(batches, start)
    return combine_state_batches((), batches, start)


def _shape(batches: tuple[StateBatch, ...]) -> bool | None:
    """None if a batch is malformed (offsets, state or count), else whether the batches are
    joined (see ``combine_state_batches``): one walk checks both, however many batches a write carries."""
    persisted = _PERSISTED_STATES
    joined = True
    prev_last = prev_state = prev_count = -2
    for first, last, state, count in batches:
        if not (0 <= first <= last and state in persisted and 0 <= count < 1 << 15):
            return None
        if joined and (
            first <= prev_last or (first == prev_last + 1 and state == prev_state and count == prev_count)
        ):
            joined = False
        prev_last, prev_state, prev_count = last, state, count
    return joined


class ShareCoordinatorShard:
    """Share-group state of one ``__share_group_state`` partition (sans-I/O)."""

    def __init__(self, partition: int, config: ShareCoordinatorConfig | None = None) -> None:
        self.partition = partition
        self.config = config or ShareCoordinatorConfig()
        self._keys: dict[SharePartitionKey, _KeyState] = {}
        self._next_offset = 0
        self._loaded = False
        # The last ShareUpdate a handler produced, with the state it applies to and the state it
        # yields, so replaying it right away need not combine the batches a second time. A cache
        # only: replay checks both identities and otherwise recomputes.
        self._memo: tuple[ShareSnapshot, ShareUpdate, tuple[StateBatch, ...]] | None = None

    # -- loading -------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._loaded

    def complete_load(self) -> None:
        """Replay has reached the end of the log: start serving requests."""
        self._loaded = True

    # -- handlers (pure) -----------------------------------------------------------------------

    def handle_initialize(
        self, key: SharePartitionKey, *, state_epoch: int, start_offset: int, now_ms: int
    ) -> CoordinatorResult[ErrorCode]:
        """(Re)initialize: a fresh snapshot with no batches at ``state_epoch``."""
        if not self._loaded:
            return CoordinatorResult(records=(), response=ErrorCode.coordinator_load_in_progress)
        if start_offset < NO_START_OFFSET:
            return CoordinatorResult(records=(), response=ErrorCode.invalid_request)
        ks = self._keys.get(key)
        if ks is not None and state_epoch < ks.current.state_epoch:
            return CoordinatorResult(records=(), response=ErrorCode.fenced_state_epoch)
        snapshot = ShareSnapshot(
            snapshot_epoch=0 if ks is None else ks.current.snapshot_epoch + 1,
            state_epoch=state_epoch,
            leader_epoch=NO_LEADER_EPOCH,
            start_offset=start_offset,
            delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
            create_timestamp=now_ms,
            write_timestamp=now_ms,
            state_batches=(),
        )
        return CoordinatorResult(records=(StateRecord(key=key, value=snapshot),), response=ErrorCode.none)

    def handle_write(self, params: WriteStateParams, *, now_ms: int) -> CoordinatorResult[ErrorCode]:
        """A ShareUpdate delta, or a ShareSnapshot when one is due or no larger than the delta."""
        if not self._loaded:
            return CoordinatorResult(records=(), response=ErrorCode.coordinator_load_in_progress)
        joined = _shape(params.state_batches)
        if params.start_offset < NO_START_OFFSET or joined is None:
            return CoordinatorResult(records=(), response=ErrorCode.invalid_request)
        key = params.key
        ks = self._keys.get(key)
        if ks is None:
            start = params.start_offset
            snapshot = ShareSnapshot(
                snapshot_epoch=0,
                state_epoch=params.state_epoch,
                leader_epoch=params.leader_epoch,
                start_offset=start,
                delivery_complete_count=params.delivery_complete_count,
                create_timestamp=now_ms,
                write_timestamp=now_ms,
                state_batches=combine_state_batches((), params.state_batches, start),
                delays=prune_delays(params.delays, start),
            )
            return CoordinatorResult(records=(StateRecord(key=key, value=snapshot),), response=ErrorCode.none)
        cur = ks.current
        if params.state_epoch < cur.state_epoch:
            return CoordinatorResult(records=(), response=ErrorCode.fenced_state_epoch)
        if params.leader_epoch != NO_LEADER_EPOCH and params.leader_epoch < cur.leader_epoch:
            return CoordinatorResult(records=(), response=ErrorCode.fenced_leader_epoch)
        leader_epoch = cur.leader_epoch if params.leader_epoch == NO_LEADER_EPOCH else params.leader_epoch
        if params.staged:
            return self._stage(params, cur.snapshot_epoch, leader_epoch)
        start = cur.start_offset if params.start_offset == NO_START_OFFSET else params.start_offset
        combined = combine_state_batches(cur.state_batches, params.state_batches, start, joined=joined)
        dcc = params.delivery_complete_count
        if (
            ks.updates_since_snapshot >= self.config.snapshot_update_records_per_snapshot
            or params.state_epoch != cur.state_epoch
            or len(combined) <= len(params.state_batches)
        ):
            value: ShareSnapshot | ShareUpdate = ShareSnapshot(
                snapshot_epoch=cur.snapshot_epoch + 1,
                state_epoch=params.state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start,
                delivery_complete_count=cur.delivery_complete_count
                if dcc == UNINITIALIZED_DELIVERY_COMPLETE_COUNT
                else dcc,
                create_timestamp=cur.create_timestamp,
                write_timestamp=now_ms,
                state_batches=combined,
                pending_txn_batches=cur.pending_txn_batches,
                delays=combine_delays(cur.delays, params.state_batches, params.delays, start)
                if cur.delays or params.delays
                else (),
            )
        else:
            value = ShareUpdate(
                snapshot_epoch=cur.snapshot_epoch,
                leader_epoch=leader_epoch,
                start_offset=params.start_offset,
                delivery_complete_count=dcc,
                state_batches=_delta(params.state_batches, start, joined),
                delays=prune_delays(params.delays, start),
            )
            self._memo = (cur, value, combined)
        return CoordinatorResult(records=(StateRecord(key=key, value=value),), response=ErrorCode.none)

    def _stage(
        self, params: WriteStateParams, snapshot_epoch: int, leader_epoch: int
    ) -> CoordinatorResult[ErrorCode]:
        """A txn stage record: acknowledgements staged by one transaction, pending its marker."""
        staged = params.staged
        pid, epoch = staged[0].producer_id, staged[0].producer_epoch
        for b in staged:
            if (
                b.producer_id != pid
                or b.producer_epoch != epoch
                or not 0 <= b.first_offset <= b.last_offset
                or b.delivery_state not in _PERSISTED_STATES
                or params.state_batches
            ):
                return CoordinatorResult(records=(), response=ErrorCode.invalid_request)
        value = ShareTxnStage(
            snapshot_epoch=snapshot_epoch,
            leader_epoch=leader_epoch,
            producer_id=pid,
            producer_epoch=epoch,
            batches=staged,
        )
        return CoordinatorResult(records=(StateRecord(key=params.key, value=value),), response=ErrorCode.none)

    def handle_marker(self, producer_id: int, producer_epoch: int, *, commit: bool) -> CoordinatorResult[int]:
        """A transaction's marker for this state partition: a marker record when anything here is
        pending for ``producer_id`` (else nothing to write: a repeated marker is a no-op).
        The response counts the share-partitions it settles."""
        if not self._loaded:
            return CoordinatorResult(records=(), response=0)
        touched = sum(
            1
            for ks in self._keys.values()
            if any(p.producer_id == producer_id for p in ks.current.pending_txn_batches)
        )
        if not touched:
            return CoordinatorResult(records=(), response=0)
        marker = ShareTxnMarker(producer_id=producer_id, producer_epoch=producer_epoch, commit=commit)
        return CoordinatorResult(records=(StateRecord(key=MARKER_KEY, value=marker),), response=touched)

    def pending_producers(self) -> dict[int, int]:
        """Producer ids with staged entries in this state partition, and their records."""
        out: dict[int, int] = {}
        for ks in self._keys.values():
            for p in ks.current.pending_txn_batches:
                out[p.producer_id] = out.get(p.producer_id, 0) + p.last_offset - p.first_offset + 1
        return out

    def handle_read(self, key: SharePartitionKey, *, leader_epoch: int) -> CoordinatorResult[ReadResult]:
        """The state; a newer leader epoch is recorded first (so an older leader is fenced)."""
        if not self._loaded:
            return CoordinatorResult(
                records=(), response=ReadResult(error=ErrorCode.coordinator_load_in_progress)
            )
        ks = self._keys.get(key)
        if ks is None:
            return CoordinatorResult(records=(), response=ReadResult(error=ErrorCode.none))
        cur = ks.current
        if leader_epoch == NO_LEADER_EPOCH or leader_epoch == cur.leader_epoch:
            return CoordinatorResult(
                records=(), response=ReadResult(error=ErrorCode.none, state=_to_share_state(cur))
            )
        if leader_epoch < cur.leader_epoch:
            return CoordinatorResult(records=(), response=ReadResult(error=ErrorCode.fenced_leader_epoch))
        bump = ShareUpdate(
            snapshot_epoch=cur.snapshot_epoch,
            leader_epoch=leader_epoch,
            start_offset=NO_START_OFFSET,
            delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
            state_batches=(),
        )
        return CoordinatorResult(
            records=(StateRecord(key=key, value=bump),),
            response=ReadResult(error=ErrorCode.none, state=_to_share_state(cur, leader_epoch)),
        )

    def handle_read_summary(self, key: SharePartitionKey) -> CoordinatorResult[ReadSummaryResult]:
        if not self._loaded:
            return CoordinatorResult(
                records=(), response=ReadSummaryResult(error=ErrorCode.coordinator_load_in_progress)
            )
        ks = self._keys.get(key)
        if ks is None:
            return CoordinatorResult(records=(), response=ReadSummaryResult(error=ErrorCode.none))
        c = ks.current
        summary = ShareStateSummary(
            state_epoch=c.state_epoch,
            leader_epoch=c.leader_epoch,
            start_offset=c.start_offset,
            delivery_complete_count=c.delivery_complete_count,
        )
        return CoordinatorResult(
            records=(), response=ReadSummaryResult(error=ErrorCode.none, summary=summary)
        )

    def handle_delete(self, key: SharePartitionKey) -> CoordinatorResult[ErrorCode]:
        """A tombstone; deleting an unknown share-partition succeeds with no record."""
        if not self._loaded:
            return CoordinatorResult(records=(), response=ErrorCode.coordinator_load_in_progress)
        if key not in self._keys:
            return CoordinatorResult(records=(), response=ErrorCode.none)
        return CoordinatorResult(records=(StateRecord(key=key, value=None),), response=ErrorCode.none)

    # -- housekeeping (pure) -------------------------------------------------------------------

    def cold_snapshots(self, now_ms: int) -> tuple[StateRecord, ...]:
        """Fresh snapshots for share-partitions with none for the cold interval.

        Rewriting an idle share-partition's state at the log end lets pruning pass its old records.
        """
        if not self._loaded:
            return ()
        interval = self.config.cold_partition_snapshot_interval_ms
        out: list[StateRecord] = []
        for key, ks in self._keys.items():
            cur = ks.current
            if now_ms - cur.write_timestamp >= interval:
                snap = ShareSnapshot(
                    snapshot_epoch=cur.snapshot_epoch + 1,
                    state_epoch=cur.state_epoch,
                    leader_epoch=cur.leader_epoch,
                    start_offset=cur.start_offset,
                    delivery_complete_count=cur.delivery_complete_count,
                    create_timestamp=cur.create_timestamp,
                    write_timestamp=now_ms,
                    state_batches=cur.state_batches,
                    pending_txn_batches=cur.pending_txn_batches,
                    delays=cur.delays,
                )
                out.append(StateRecord(key=key, value=snap))
        return tuple(out)

    def next_deadline(self) -> int | None:
        """When the next share-partition turns cold (ms), or None without any state."""
        if not self._keys:
            return None
        interval = self.config.cold_partition_snapshot_interval_ms
        return min(ks._current.write_timestamp for ks in self._keys.values()) + interval

    def prune_offset(self) -> int:
        """Records below this offset are not needed to rebuild any share-partition."""
        if not self._keys:
            return self._next_offset
        return min(ks.snapshot_offset for ks in self._keys.values())

    # -- state ---------------------------------------------------------------------------------

    def replay(
        self,
        key: SharePartitionKey,
        value: ShareSnapshot | ShareUpdate | ShareTxnStage | ShareTxnMarker | None,
        offset: int,
    ) -> None:
        """Apply one record at ``offset``; records must come in log order."""
        self._next_offset = offset + 1
        if value is None:
            self._keys.pop(key, None)
            return
        if isinstance(value, ShareSnapshot):
            self._keys[key] = _KeyState(value, offset)
            return
        if isinstance(value, ShareTxnMarker):
            for held in self._keys.values():
                if held._current.pending_txn_batches:
                    held.current = apply_marker(held.current, value)
            return
        ks = self._keys.get(key)
        if ks is None or value.snapshot_epoch != ks._current.snapshot_epoch:
            return  # an update for a deleted or superseded snapshot: nothing to apply it to
        if isinstance(value, ShareTxnStage):
            self._memo = None
            ks.current = apply_stage(ks.current, value)
            ks.updates_since_snapshot += 1
            return
        memo = self._memo
        self._memo = None
        if memo is not None and memo[1] is value and memo[0] is ks.current:
            ks.current = _apply(memo[0], value, memo[2])
        elif self._loaded:
            ks.current = _apply(ks.current, value, None)
        else:
            ks.pending.append(value)
        ks.updates_since_snapshot += 1

    def restore(
        self,
        key: SharePartitionKey,
        current: ShareSnapshot,
        *,
        snapshot_offset: int,
        updates_since_snapshot: int,
    ) -> None:
        """Install a share-partition's state as a bulk replay computed it (``ShardLoader``)."""
        ks = _KeyState(current, snapshot_offset)
        ks.updates_since_snapshot = updates_since_snapshot
        self._keys[key] = ks

    def restore_next_offset(self, offset: int) -> None:
        """A bulk replay has passed every record below ``offset``."""
        self._next_offset = offset

    def state(self, key: SharePartitionKey) -> ShareState | None:
        """The combined state of ``key`` as replayed so far (for tests and tools)."""
        ks = self._keys.get(key)
        return None if ks is None else _to_share_state(ks.current)

    def current(self, key: SharePartitionKey) -> ShareSnapshot | None:
        """The combined state of ``key`` shaped as a snapshot (its epoch included), or None."""
        ks = self._keys.get(key)
        return None if ks is None else ks.current

    def keys(self) -> list[SharePartitionKey]:
        return list(self._keys)

    @property
    def next_offset(self) -> int:
        """The offset after the last replayed record."""
        return self._next_offset
