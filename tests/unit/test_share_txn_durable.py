"""Durable TX_PENDING: replay of the state log equals the live engine, crashes included.

A hypothesis test interleaves acquire, acknowledge, stage, COMMIT/ABORT markers (some reaching the
state log just before a crash), lock expiry, member departure, failed writes, snapshots (forced
often), pruning and crashes. Every write goes to two persisters: the in-memory one and a share
coordinator shard whose records are kept as encoded bytes and pruned at its prune offset. After
each step the shard's log, loaded from bytes by ``ShardLoader``, must equal the in-memory state, an
engine rebuilt from it must agree with the live one, and no record staged by a committed
transaction is ever acquired again.
"""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shareq.coordinators.share.loader import ShardLoader
from shareq.coordinators.share.records import (
    MARKER_KEY,
    ShareSnapshot,
    ShareTxnMarker,
    ShareTxnStage,
    StateRecord,
    decode_record,
    encode_record,
)
from shareq.coordinators.share.shard import ShareCoordinatorConfig, ShareCoordinatorShard
from shareq.persister.memory import MemoryPersister
from shareq.share import (
    AcknowledgementBatch,
    AcknowledgeType,
    PendingWrite,
    RecordState,
    ShareConfig,
    SharePartition,
    ShareRequestError,
)
from shareq.share.persister import ShareState, WriteStateParams

KEY_T = uuid.UUID(int=21)
LOG_END = 200
LOCK = 1_000
A = AcknowledgeType
S = RecordState


def _key():  # type: ignore[no-untyped-def]
    from shareq.share.persister import SharePartitionKey

    return SharePartitionKey(group_id="g", topic_id=KEY_T, partition=0)


KEY = _key()


class ShardLog:
    """A share coordinator shard plus its log as encoded (offset, key, value) records."""

    def __init__(self) -> None:
        self.config = ShareCoordinatorConfig(
            snapshot_update_records_per_snapshot=3, state_topic_num_partitions=1
        )
        self.shard = ShareCoordinatorShard(0, self.config)
        self.shard.complete_load()
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.next = 0
        self.txn_records = 0

    def _append(self, records: tuple[StateRecord, ...]) -> None:
        for record in records:
            key, value = encode_record(record)
            decoded = decode_record(key, value)  # the bytes, not the objects, are what replays
            if isinstance(decoded.value, ShareTxnMarker):
                decoded = StateRecord(
                    key=MARKER_KEY,
                    value=ShareTxnMarker(
                        producer_id=record.value.producer_id,  # type: ignore[union-attr]
                        producer_epoch=decoded.value.producer_epoch,
                        commit=decoded.value.commit,
                    ),
                )
            if isinstance(decoded.value, ShareTxnStage | ShareTxnMarker):
                self.txn_records += 1
            self.shard.replay(decoded.key, decoded.value, self.next)
            self.log.append((self.next, key, value))
            self.next += 1

    def write(self, params: WriteStateParams) -> None:
        result = self.shard.handle_write(params, now_ms=0)
        assert result.response == 0, result.response
        self._append(result.records)

    def initialize(self, start: int) -> None:
        self._append(self.shard.handle_initialize(KEY, state_epoch=0, start_offset=start, now_ms=0).records)

    def marker(self, pid: int, commit: bool) -> None:
        self._append(self.shard.handle_marker(pid, 0, commit=commit).records)

    def prune(self) -> None:
        floor = self.shard.prune_offset()
        self.log = [r for r in self.log if r[0] >= floor]

    def loaded(self) -> ShareState | None:
        shard = ShareCoordinatorShard(0, self.config)
        loader = ShardLoader()
        loader.feed(self.log)
        loader.finish(shard)
        shard.complete_load()
        return shard.state(KEY)


class World:
    def __init__(self) -> None:
        self.memory = MemoryPersister()
        self.shard = ShardLog()
        self.shard.initialize(0)
        self.memory.apply(
            WriteStateParams(
                key=KEY,
                state_epoch=0,
                leader_epoch=0,
                start_offset=0,
                delivery_complete_count=0,
                state_batches=(),
            )
        )
        self.sp = self._rebuilt()
        self.now = 0
        self.committed: set[int] = set()

    def _rebuilt(self) -> SharePartition:
        sp = SharePartition(KEY, ShareConfig(record_lock_duration_ms=LOCK, delivery_count_limit=3))
        sp.initialize(self.shard.loaded())
        return sp

    def persist(self, write: PendingWrite | None, ok: bool = True) -> None:
        if write is None:
            return
        if ok:
            self.memory.apply(write.params)
            self.shard.write(write.params)
        result = self.sp.complete(write.handle, ok, self.now)
        for follow_up in result.writes:
            self.persist(follow_up)

    def acquire(self, member: str, n: int) -> None:
        start = self.sp.next_fetch_offset()
        batches = [(o, o) for o in range(start, LOG_END)]
        result = self.sp.acquire(member, batches, max_records=n, now=self.now)
        for r in result.records:
            taken = set(range(r.first_offset, r.last_offset + 1))
            assert not taken & self.committed, (
                f"committed-staged offsets delivered again: {taken & self.committed}"
            )
        self.persist(result.write)

    def owned(self, member: str) -> list[tuple[int, int]]:
        return [
            (r.first_offset, r.last_offset)
            for r in self.sp.runs()
            if r.state is S.ACQUIRED and r.member == member
        ]

    def stage(self, member: str, pid: int, ack: A, ok: bool) -> None:
        if not self.owned(member):
            self.acquire(member, 3)
        owned = self.owned(member)
        if not owned:
            return
        first, last = owned[0]
        batch = AcknowledgementBatch(first_offset=first, last_offset=last, types=(ack,))
        self.persist(self.sp.stage(member, [batch], producer_id=pid, producer_epoch=0, now=self.now), ok)

    def ack(self, member: str, ack: A) -> None:
        owned = self.owned(member)
        if not owned:
            return
        first, last = owned[-1]
        batch = AcknowledgementBatch(first_offset=first, last_offset=last, types=(ack,))
        self.persist(self.sp.acknowledge(member, [batch], now=self.now).write)

    def marker(self, pid: int, commit: bool, crash_after_log: bool) -> None:
        holding = sorted(self.sp.tx_pending_by_producer())
        if holding and pid not in holding:
            pid = holding[0]  # mostly end a transaction that holds something
        if commit:
            for r in self.sp.runs():
                if r.state is S.TX_PENDING and r.producer_id == pid:
                    self.committed.update(range(r.first_offset, r.last_offset + 1))
        self.memory.marker(pid, 0, commit=commit)
        self.shard.marker(pid, commit)
        if crash_after_log:
            self.crash()
            return
        self.persist(self.sp.end_transaction(pid, 0, commit=commit, now=self.now).write)

    def crash(self) -> None:
        self.sp = self._rebuilt()

    def check(self) -> None:
        mem = self.memory.state(KEY)
        loaded = self.shard.loaded()
        assert mem is not None and loaded is not None
        assert loaded.start_offset == mem.start_offset
        assert loaded.state_batches == mem.state_batches
        assert set(loaded.pending_txn_batches) == set(mem.pending_txn_batches)
        rebuilt = self._rebuilt()
        assert rebuilt.spso == self.sp.spso
        assert _durable_view(rebuilt) == _durable_view(self.sp)


def _durable_view(sp: SharePartition) -> dict[int, tuple[str, int | None, int | None]]:
    """Per offset at or above the SPSO: the state a restart keeps (ACQUIRED reads AVAILABLE, offsets
    not in flight read AVAILABLE too), the transaction holding it, and its count when staged."""
    out: dict[int, tuple[str, int | None, int | None]] = {}
    for r in sp.runs():
        for o in range(r.first_offset, r.last_offset + 1):
            state = S.AVAILABLE if r.state is S.ACQUIRED else r.state
            if state is S.AVAILABLE:
                continue
            staged = r.state is S.TX_PENDING
            out[o] = (state.name, r.producer_id, r.delivery_count if staged else None)
    return out


MEMBERS = st.sampled_from(["m1", "m2"])
PIDS = st.sampled_from([7, 8])
ACQUIRE = st.tuples(st.just("acquire"), MEMBERS, st.integers(1, 6))
STAGE = st.tuples(
    st.just("stage"),
    MEMBERS,
    PIDS,
    st.sampled_from([A.ACCEPT, A.REJECT, A.GAP]),
    st.sampled_from([True, True, False]),
)
MARKER = st.tuples(st.just("marker"), PIDS, st.booleans(), st.sampled_from([False, False, True]))
OPS = st.one_of(
    ACQUIRE,
    ACQUIRE,
    STAGE,
    STAGE,
    STAGE,
    MARKER,
    MARKER,
    st.tuples(st.just("ack"), MEMBERS, st.sampled_from([A.ACCEPT, A.RELEASE, A.REJECT])),
    st.tuples(st.just("advance"), st.integers(1, LOCK)),
    st.tuples(st.just("leave"), MEMBERS),
    st.tuples(st.just("crash")),
    st.tuples(st.just("prune")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=5, max_size=50))
def test_replay_equals_live_state_with_tx_pending(ops: list[tuple[object, ...]]) -> None:
    w = World()
    for op in ops:
        name = op[0]
        try:
            if name == "acquire":
                w.acquire(op[1], op[2])  # type: ignore[arg-type]
            elif name == "stage":
                w.stage(op[1], op[2], op[3], op[4])  # type: ignore[arg-type]
            elif name == "ack":
                w.ack(op[1], op[2])  # type: ignore[arg-type]
            elif name == "marker":
                w.marker(op[1], op[2], op[3])  # type: ignore[arg-type]
            elif name == "advance":
                w.now += op[1]  # type: ignore[operator]
                w.persist(w.sp.expire(w.now))
            elif name == "leave":
                w.persist(w.sp.release_member(op[1], w.now))  # type: ignore[arg-type]
            elif name == "crash":
                w.crash()
            else:
                w.shard.prune()
        except ShareRequestError:
            pass
        w.check()


def test_snapshot_carries_pending_entries_through_pruning() -> None:
    w = World()
    w.acquire("m1", 5)
    w.stage("m1", 7, A.ACCEPT, True)
    # Enough other writes to force snapshots, then prune everything below the latest one.
    for _ in range(4):
        w.acquire("m2", 1)
        w.ack("m2", A.RELEASE)
    assert any(
        isinstance(decode_record(k, v).value, ShareSnapshot) and decode_record(k, v).value.pending_txn_batches  # type: ignore[union-attr]
        for _, k, v in w.shard.log
        if v is not None and k[:2] == b"\x00\x00"
    )
    w.shard.prune()
    w.check()
    w.marker(7, True, crash_after_log=True)
    w.check()
    assert w.sp.spso >= 5 and not w.sp.tx_pending_count()
