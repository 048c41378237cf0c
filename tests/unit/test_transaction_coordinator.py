"""The transaction coordinator (sans-I/O): transitions, error codes, timers, records, and a
property test that replaying the durable records (with crashes between PrepareX, the markers and
CompleteX) gives the live state, on the coordinator and on every participant partition."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.transaction import (
    TV_2,
    TransactionCoordinator,
    TxnConfig,
    TxnErrorCode,
    TxnMetadata,
    TxnRequestError,
    TxnState,
    TxnWrite,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from shareq.coordinators.transaction.state import MAX_PRODUCER_EPOCH
from shareq.log.transactions import CONTROL_ABORT, CONTROL_COMMIT, PartitionTxnState

T1 = "txn-1"


def allocator(start: int = 1000) -> itertools.count[int]:
    return itertools.count(start)


def apply(coordinator: TransactionCoordinator, write: TxnWrite | None) -> TxnMetadata | None:
    if write is None:
        return None
    coordinator.replay(write.metadata.transactional_id, write.metadata)
    return write.metadata


def complete(coordinator: TransactionCoordinator, txn_id: str, now: int) -> TxnMetadata | None:
    return apply(coordinator, coordinator.complete(txn_id, now_ms=now))


def test_init_add_commit_and_retry() -> None:
    c = TransactionCoordinator()
    ids = allocator()
    meta = apply(c, c.init_producer_id(T1, 60_000, now_ms=0, allocate=lambda: next(ids)))
    assert meta is not None and (meta.producer_id, meta.producer_epoch, meta.state) == (
        1000,
        0,
        TxnState.EMPTY,
    )
    ongoing = apply(c, c.add_partitions(T1, 1000, 0, [("t", 0), ("t", 1)], now_ms=5))
    assert ongoing is not None and ongoing.state is TxnState.ONGOING and ongoing.start_ms == 5
    assert c.add_partitions(T1, 1000, 0, [("t", 1)], now_ms=6) is None  # already in
    assert c.verify_produce(1000, 0, ("t", 1)) is TxnErrorCode.NONE
    assert c.verify_produce(1000, 0, ("t", 2)) is TxnErrorCode.TRANSACTION_ABORTABLE
    assert c.verify_produce(1000, 1, ("t", 1)) is TxnErrorCode.INVALID_PRODUCER_EPOCH
    decision = c.end_txn(T1, 1000, 0, True, now_ms=7)
    assert decision is not None and decision.decision and decision.metadata.state is TxnState.PREPARE_COMMIT
    apply(c, decision)
    with pytest.raises(TxnRequestError) as busy:
        c.add_partitions(T1, 1000, 0, [("t", 0)], now_ms=8)
    assert busy.value.code is TxnErrorCode.CONCURRENT_TRANSACTIONS
    done = complete(c, T1, 9)
    assert done is not None and done.state is TxnState.COMPLETE_COMMIT and not done.partitions
    assert c.end_txn(T1, 1000, 0, True, now_ms=10) is None  # a retried commit
    with pytest.raises(TxnRequestError) as wrong:
        c.end_txn(T1, 1000, 0, False, now_ms=10)
    assert wrong.value.code is TxnErrorCode.INVALID_TXN_STATE


def test_init_fences_an_open_transaction_and_bumps_the_epoch() -> None:
    c = TransactionCoordinator()
    ids = allocator()
    apply(c, c.init_producer_id(T1, 60_000, now_ms=0, allocate=lambda: next(ids)))
    apply(c, c.add_partitions(T1, 1000, 0, [("t", 0)], now_ms=1))
    fence = c.init_producer_id(T1, 60_000, now_ms=2, allocate=lambda: next(ids))
    assert (
        fence.decision
        and fence.metadata.state is TxnState.PREPARE_ABORT
        and fence.metadata.producer_epoch == 1
    )
    apply(c, fence)
    with pytest.raises(TxnRequestError) as busy:
        c.init_producer_id(T1, 60_000, now_ms=3, allocate=lambda: next(ids))
    assert busy.value.code is TxnErrorCode.CONCURRENT_TRANSACTIONS
    complete(c, T1, 3)
    again = apply(c, c.init_producer_id(T1, 60_000, now_ms=4, allocate=lambda: next(ids)))
    assert again is not None and (again.producer_id, again.producer_epoch) == (1000, 2)
    with pytest.raises(TxnRequestError) as fenced:
        c.end_txn(T1, 1000, 0, True, now_ms=5)
    assert fenced.value.code is TxnErrorCode.PRODUCER_FENCED
    with pytest.raises(TxnRequestError) as mapping:
        c.add_partitions(T1, 999, 2, [("t", 0)], now_ms=5)
    assert mapping.value.code is TxnErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_kip_360_recovery_and_timeouts_bounds() -> None:
    c = TransactionCoordinator(TxnConfig(max_timeout_ms=10_000))
    ids = allocator()
    with pytest.raises(TxnRequestError) as too_long:
        c.init_producer_id(T1, 20_000, now_ms=0, allocate=lambda: next(ids))
    assert too_long.value.code is TxnErrorCode.INVALID_TRANSACTION_TIMEOUT
    apply(c, c.init_producer_id(T1, 5_000, now_ms=0, allocate=lambda: next(ids)))
    bumped = apply(
        c,
        c.init_producer_id(
            T1, 5_000, producer_id=1000, producer_epoch=0, now_ms=1, allocate=lambda: next(ids)
        ),
    )
    assert bumped is not None and bumped.producer_epoch == 1
    with pytest.raises(TxnRequestError) as stale:
        c.init_producer_id(
            T1, 5_000, producer_id=1000, producer_epoch=0, now_ms=2, allocate=lambda: next(ids)
        )
    assert stale.value.code is TxnErrorCode.PRODUCER_FENCED


def test_timeout_aborts_with_a_fence_and_idle_ids_expire() -> None:
    c = TransactionCoordinator(TxnConfig(id_expiration_ms=1_000_000))
    ids = allocator()
    apply(c, c.init_producer_id(T1, 5_000, now_ms=0, allocate=lambda: next(ids)))
    apply(c, c.add_partitions(T1, 1000, 0, [("t", 0)], now_ms=100))
    assert c.next_deadline() == 5_100
    assert c.expire(5_099) == ([], [])
    aborts, expired = c.expire(5_100)
    assert expired == [] and len(aborts) == 1
    assert aborts[0].metadata.state is TxnState.PREPARE_ABORT and aborts[0].metadata.producer_epoch == 1
    apply(c, aborts[0])
    assert c.next_deadline() is None  # a decision has no timer: it completes at once
    done = complete(c, T1, 5_200)
    assert done is not None
    assert c.next_deadline() == 5_200 + 1_000_000
    assert c.expire(1_005_200) == ([], [T1])


def test_records_round_trip() -> None:
    meta = TxnMetadata(
        transactional_id="é-id",
        producer_id=2**40,
        producer_epoch=7,
        timeout_ms=60_000,
        state=TxnState.PREPARE_COMMIT,
        partitions=frozenset({("a", 0), ("b", 3)}),
        start_ms=1,
        update_ms=2,
    )
    assert decode_key(encode_key(meta.transactional_id)) == meta.transactional_id
    assert decode_value(meta.transactional_id, encode_value(meta)) == meta
    assert TxnState.PREPARE_EPOCH_FENCE.display == "PrepareEpochFence"


def test_records_keep_version_0_until_transaction_version_2_fields_are_set() -> None:
    meta = TxnMetadata(
        transactional_id="x", producer_id=5, producer_epoch=0, timeout_ms=1, state=TxnState.EMPTY
    )
    assert encode_value(meta)[:2] == b"\x00\x00"
    rotating = dataclasses.replace(
        meta, state=TxnState.PREPARE_ABORT, next_producer_id=6, previous_producer_id=4, client_version=TV_2
    )
    assert encode_value(rotating)[:2] == b"\x00\x01"
    assert decode_value("x", encode_value(rotating)) == rotating


# -- transaction.version 2 (KIP-890 part 2) -------------------------------------------------------


def test_tv2_every_end_txn_bumps_the_epoch_and_retries_are_recognised() -> None:
    c = TransactionCoordinator()
    ids = allocator()
    apply(c, c.init_producer_id(T1, 60_000, now_ms=0, allocate=lambda: next(ids)))
    assert c.verify_partitions(T1, 1000, 0, [("t", 0)]) == {("t", 0): TxnErrorCode.TRANSACTION_ABORTABLE}
    opened = apply(c, c.add_partitions(T1, 1000, 0, [("t", 0)], now_ms=1, client_version=TV_2))
    assert opened is not None and opened.state is TxnState.ONGOING and opened.client_version == TV_2
    assert c.verify_partitions(T1, 1000, 0, [("t", 0)]) == {("t", 0): TxnErrorCode.NONE}
    decision = apply(c, c.end_txn(T1, 1000, 0, True, now_ms=2, tv2=True))
    assert decision is not None and decision.state is TxnState.PREPARE_COMMIT and decision.producer_epoch == 1
    assert decision.partitions == {("t", 0)}  # the markers go out at the bumped epoch
    with pytest.raises(TxnRequestError) as busy:  # the retry while the markers are written
        c.end_txn(T1, 1000, 0, True, now_ms=3, tv2=True)
    assert busy.value.code is TxnErrorCode.CONCURRENT_TRANSACTIONS
    done = complete(c, T1, 3)
    assert done is not None and (done.state, done.producer_epoch) == (TxnState.COMPLETE_COMMIT, 1)
    assert c.end_txn(T1, 1000, 0, True, now_ms=4, tv2=True) is None  # the retry, answered again
    with pytest.raises(TxnRequestError) as other:  # a retry of what was not decided
        c.end_txn(T1, 1000, 0, False, now_ms=4, tv2=True)
    assert other.value.code is TxnErrorCode.INVALID_TXN_STATE
    with pytest.raises(TxnRequestError) as nothing_open:
        c.end_txn(T1, 1000, 1, True, now_ms=4, tv2=True)
    assert nothing_open.value.code is TxnErrorCode.INVALID_TXN_STATE
    empty_abort = apply(c, c.end_txn(T1, 1000, 1, False, now_ms=5, tv2=True))
    assert empty_abort is not None and empty_abort.state is TxnState.PREPARE_ABORT
    assert (empty_abort.producer_epoch, empty_abort.partitions, empty_abort.start_ms) == (2, frozenset(), 5)
    complete(c, T1, 6)
    with pytest.raises(TxnRequestError) as fenced:
        c.end_txn(T1, 1000, 0, True, now_ms=7, tv2=True)
    assert fenced.value.code is TxnErrorCode.PRODUCER_FENCED
    with pytest.raises(TxnRequestError) as stale_add:
        c.add_partitions(T1, 1000, 1, [("t", 0)], now_ms=7, client_version=TV_2)
    assert stale_add.value.code is TxnErrorCode.PRODUCER_FENCED
    # a client before KIP-890 on the same id: no bump
    apply(c, c.add_partitions(T1, 1000, 2, [("t", 1)], now_ms=8))
    tv1 = apply(c, c.end_txn(T1, 1000, 2, True, now_ms=9))
    assert tv1 is not None and tv1.producer_epoch == 2 and tv1.client_version == 0


def test_tv2_an_exhausted_epoch_moves_to_a_new_producer_id_at_completion() -> None:
    c = TransactionCoordinator()
    last = MAX_PRODUCER_EPOCH - 1
    c.replay(
        T1,
        TxnMetadata(
            transactional_id=T1,
            producer_id=7,
            producer_epoch=last,
            timeout_ms=60_000,
            state=TxnState.ONGOING,
            partitions=frozenset({("t", 0)}),
            start_ms=0,
            update_ms=0,
            client_version=TV_2,
        ),
    )
    decision = apply(c, c.end_txn(T1, 7, last, True, now_ms=1, tv2=True, allocate=lambda: 8))
    assert decision is not None
    assert (decision.producer_id, decision.producer_epoch, decision.next_producer_id) == (7, last + 1, 8)
    # the decision is durable with the next id: a coordinator replaying it completes to it
    replayed = TransactionCoordinator()
    replayed.replay(T1, decode_value(T1, encode_value(decision)))
    for coordinator in (c, replayed):
        done = complete(coordinator, T1, 2)
        assert done is not None
        assert (done.producer_id, done.producer_epoch, done.previous_producer_id) == (8, 0, 7)
        assert coordinator.by_producer(8) == done and coordinator.by_producer(7) is None
        assert coordinator.end_txn(T1, 7, last, True, now_ms=3, tv2=True) is None  # the retry
    with pytest.raises(TxnRequestError) as gone:
        c.add_partitions(T1, 7, last, [("t", 0)], now_ms=4, client_version=TV_2)
    assert gone.value.code is TxnErrorCode.INVALID_PRODUCER_ID_MAPPING


# -- replay equals live, with crashes anywhere on the commit path -----------------------------


@dataclass
class Cluster:
    """The coordinator plus its durable logs, the way the shell drives them."""

    live: TransactionCoordinator = field(default_factory=TransactionCoordinator)
    state_log: list[tuple[str, TxnMetadata | None]] = field(default_factory=list)
    partitions: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)
    views: dict[tuple[str, int], PartitionTxnState] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=allocator)
    now: int = 0

    def persist(self, write: TxnWrite) -> None:
        meta = write.metadata
        self.state_log.append((meta.transactional_id, meta))
        self.live.replay(meta.transactional_id, meta)

    def append(self, tp: tuple[str, int], pid: int, kind: int) -> None:
        """kind -1: a transactional data record; else a marker."""
        log = self.partitions.setdefault(tp, [])
        view = self.views.setdefault(tp, PartitionTxnState())
        offset = len(log)
        log.append((pid, kind))
        if kind < 0:
            view.observe_data(pid, offset)
        else:
            view.observe_marker(pid, kind, offset, offset)

    def markers(self, meta: TxnMetadata, *, recovering: bool, stop_after: int | None = None) -> bool:
        """Write the decision's markers; False if the 'crash' stopped it early."""
        kind = CONTROL_COMMIT if meta.state is TxnState.PREPARE_COMMIT else CONTROL_ABORT
        for n, tp in enumerate(sorted(meta.partitions)):
            if stop_after is not None and n >= stop_after:
                return False
            if recovering and not self.views.setdefault(tp, PartitionTxnState()).is_open(meta.producer_id):
                continue
            self.append(tp, meta.producer_id, kind)
        return True

    def decide(self, write: TxnWrite, crash_at: int | None) -> bool:
        """PrepareX, markers, CompleteX; ``crash_at`` 0: after PrepareX, k: after k markers."""
        self.persist(write)
        if crash_at is not None and not self.markers(write.metadata, recovering=False, stop_after=crash_at):
            return False
        if crash_at is not None and crash_at >= len(write.metadata.partitions):
            return False  # all markers written, CompleteX lost
        if crash_at is None:
            self.markers(write.metadata, recovering=False)
        self.persist(self.live.complete(write.metadata.transactional_id, now_ms=self.now))
        return True

    def restart(self) -> None:
        """A new coordinator from the state log; partition views from their logs; recovery."""
        replayed = TransactionCoordinator()
        for txn_id, meta in self.state_log:
            replayed.replay(txn_id, meta)
        assert list(replayed) == list(self.live)
        views: dict[tuple[str, int], PartitionTxnState] = {}
        for tp, log in self.partitions.items():
            view = views[tp] = PartitionTxnState()
            for offset, (pid, kind) in enumerate(log):
                if kind < 0:
                    view.observe_data(pid, offset)
                else:
                    view.observe_marker(pid, kind, offset, offset)
            live = self.views.setdefault(tp, PartitionTxnState())
            assert (view.ongoing, view.aborted) == (live.ongoing, live.aborted)
        self.live, self.views = replayed, views
        for meta in self.live.preparing():
            self.markers(meta, recovering=True)
            self.persist(self.live.complete(meta.transactional_id, now_ms=self.now))


ops = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "init",
                "add",
                "produce",
                "commit",
                "abort",
                "expire",
                "restart",
                "produce2",
                "commit2",
                "abort2",
            ]
        ),
        st.integers(0, 2),  # transactional id
        st.integers(0, 3),  # partition
        st.one_of(st.none(), st.integers(0, 3)),  # crash point of a decision
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_replay_gives_the_live_state(history: list[tuple[str, int, int, int | None]]) -> None:
    cluster = Cluster()
    for op, which, partition, crash_at in history:
        cluster.now += 10
        txn_id = f"t{which}"
        meta = cluster.live.get(txn_id)
        try:
            if op == "init":
                write = cluster.live.init_producer_id(
                    txn_id, 1_000, now_ms=cluster.now, allocate=lambda: next(cluster.ids)
                )
                if write.decision:
                    if not cluster.decide(write, crash_at):
                        cluster.restart()
                else:
                    cluster.persist(write)
            elif op == "add" and meta is not None:
                add = cluster.live.add_partitions(
                    txn_id, meta.producer_id, meta.producer_epoch, [("p", partition)], now_ms=cluster.now
                )
                if add is not None:
                    cluster.persist(add)
            elif op == "produce" and meta is not None:
                tp = ("p", partition)
                if (
                    cluster.live.verify_produce(meta.producer_id, meta.producer_epoch, tp)
                    is TxnErrorCode.NONE
                ):
                    cluster.append(tp, meta.producer_id, -1)
            elif op == "produce2" and meta is not None:  # TV2: the batch adds its partition
                tp = ("p", partition)
                add = cluster.live.add_partitions(
                    txn_id,
                    meta.producer_id,
                    meta.producer_epoch,
                    [tp],
                    now_ms=cluster.now,
                    client_version=TV_2,
                )
                if add is not None:
                    cluster.persist(add)
                cluster.append(tp, meta.producer_id, -1)
            elif op in ("commit", "abort", "commit2", "abort2") and meta is not None:
                end = cluster.live.end_txn(
                    txn_id,
                    meta.producer_id,
                    meta.producer_epoch,
                    op.startswith("commit"),
                    now_ms=cluster.now,
                    tv2=op.endswith("2"),
                    allocate=lambda: next(cluster.ids),
                )
                if end is not None and not cluster.decide(end, crash_at):
                    cluster.restart()
            elif op == "expire":
                cluster.now += 1_000
                aborts, _ = cluster.live.expire(cluster.now)
                for write in aborts:
                    cluster.decide(write, None)
            elif op == "restart":
                cluster.restart()
        except TxnRequestError:
            pass
        # Invariants: a partition's open transaction belongs to an Ongoing transaction that
        # includes it; every decision is completed before anything else happens.
        assert cluster.live.preparing() == []
        for tp, view in cluster.views.items():
            for pid in view.ongoing:
                owner = cluster.live.by_producer(pid)
                assert owner is not None and owner.state is TxnState.ONGOING and tp in owner.partitions
    cluster.restart()
