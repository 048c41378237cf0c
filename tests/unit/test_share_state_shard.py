"""ShareCoordinatorShard: handlers decide, replay applies, and replay alone rebuilds the state."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from shareq.coordinators.share.placement import java_string_hash, partition_for
from shareq.coordinators.share.records import (
    ShareSnapshot,
    ShareUpdate,
    StateRecord,
    decode_record,
    encode_record,
)
from shareq.coordinators.share.shard import CoordinatorResult, ShareCoordinatorConfig, ShareCoordinatorShard
from shareq.share.persister import SharePartitionKey, ShareState, StateBatch, WriteStateParams

KEYS = [SharePartitionKey(group_id=f"g{i}", topic_id=uuid.UUID(int=i + 1), partition=i) for i in range(3)]


class Driver:
    """Runs handlers and replays what they return at consecutive offsets, keeping the bytes."""

    def __init__(self, config: ShareCoordinatorConfig) -> None:
        self.shard = ShareCoordinatorShard(0, config)
        self.shard.complete_load()
        self.log: list[tuple[bytes, bytes | None]] = []

    def apply(self, result: CoordinatorResult[object]) -> None:
        for record in result.records:
            self.shard.replay(record.key, record.value, len(self.log))
            self.log.append(encode_record(record))


@dataclass
class Model:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    dcc: int
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)

    def prune(self) -> None:
        self.offsets = {o: v for o, v in self.offsets.items() if o >= self.start_offset}


def _expand(state: ShareState) -> dict[int, tuple[int, int]]:
    return {
        o: (b.delivery_state, b.delivery_count)
        for b in state.state_batches
        for o in range(b.first_offset, b.last_offset + 1)
    }


batch_lists = st.lists(
    st.builds(
        lambda first, length, state, count: StateBatch(
            first_offset=first, last_offset=first + length, delivery_state=state, delivery_count=count
        ),
        st.integers(0, 40),
        st.integers(0, 8),
        st.sampled_from([0, 2, 4]),
        st.integers(0, 3),
    ),
    max_size=4,
).map(tuple)

ops = st.one_of(
    st.tuples(st.just("init"), st.integers(0, 2), st.integers(0, 3), st.integers(-1, 20)),
    st.tuples(
        st.just("write"),
        st.integers(0, 2),
        st.integers(0, 3),
        st.integers(-1, 4),
        st.integers(-1, 30),
        st.integers(-1, 9),
        batch_lists,
    ),
    st.tuples(st.just("read"), st.integers(0, 2), st.integers(-1, 5)),
    st.tuples(st.just("delete"), st.integers(0, 2)),
)


def _step(d: Driver, models: dict[SharePartitionKey, Model], op: tuple[object, ...], now: int) -> None:
    kind = op[0]
    key = KEYS[op[1]]  # type: ignore[index]
    m = models.get(key)
    if kind == "init":
        _, _, epoch, start = op
        assert isinstance(epoch, int) and isinstance(start, int)
        res = d.shard.handle_initialize(key, state_epoch=epoch, start_offset=start, now_ms=now)
        if m is not None and epoch < m.state_epoch:
            assert res.response == ErrorCode.fenced_state_epoch and not res.records
        else:
            assert res.response == ErrorCode.none
            models[key] = Model(state_epoch=epoch, leader_epoch=-1, start_offset=start, dcc=-1)
        d.apply(res)  # type: ignore[arg-type]
    elif kind == "write":
        _, _, epoch, leader, start, dcc, batches = op
        assert isinstance(epoch, int) and isinstance(leader, int) and isinstance(start, int)
        assert isinstance(dcc, int) and isinstance(batches, tuple)
        params = WriteStateParams(
            key=key,
            state_epoch=epoch,
            leader_epoch=leader,
            start_offset=start,
            delivery_complete_count=dcc,
            state_batches=batches,
        )
        res = d.shard.handle_write(params, now_ms=now)
        if m is None:
            m = models[key] = Model(state_epoch=epoch, leader_epoch=leader, start_offset=start, dcc=dcc)
        elif epoch < m.state_epoch:
            assert res.response == ErrorCode.fenced_state_epoch and not res.records
            return
        elif leader != -1 and leader < m.leader_epoch:
            assert res.response == ErrorCode.fenced_leader_epoch and not res.records
            return
        else:
            m.state_epoch = epoch
            m.leader_epoch = leader if leader != -1 else m.leader_epoch
            m.start_offset = start if start != -1 else m.start_offset
            m.dcc = dcc if dcc != -1 else m.dcc
        assert res.response == ErrorCode.none
        for b in batches:
            for o in range(b.first_offset, b.last_offset + 1):
                m.offsets[o] = (b.delivery_state, b.delivery_count)
        m.prune()
        d.apply(res)  # type: ignore[arg-type]
    elif kind == "read":
        _, _, leader = op
        assert isinstance(leader, int)
        res_r = d.shard.handle_read(key, leader_epoch=leader)
        if m is None:
            assert res_r.response.state is None and res_r.response.error == ErrorCode.none
        elif leader != -1 and leader < m.leader_epoch:
            assert res_r.response.error == ErrorCode.fenced_leader_epoch
        else:
            if leader != -1:
                m.leader_epoch = leader
            assert res_r.response.state is not None and res_r.response.state.leader_epoch == m.leader_epoch
        d.apply(res_r)  # type: ignore[arg-type]
    else:
        d.apply(d.shard.handle_delete(key))  # type: ignore[arg-type]
        models.pop(key, None)


@settings(max_examples=300, deadline=None)
@given(history=st.lists(ops, max_size=60), per_snapshot=st.integers(0, 4))
def test_replay_of_the_log_equals_the_live_state(
    history: list[tuple[object, ...]], per_snapshot: int
) -> None:
    d = Driver(ShareCoordinatorConfig(snapshot_update_records_per_snapshot=per_snapshot))
    models: dict[SharePartitionKey, Model] = {}
    for now, op in enumerate(history):
        _step(d, models, op, now)
    for key in KEYS:
        live = d.shard.state(key)
        m = models.get(key)
        if m is None:
            assert live is None
            continue
        assert live is not None
        assert (live.state_epoch, live.leader_epoch, live.start_offset, live.delivery_complete_count) == (
            m.state_epoch,
            m.leader_epoch,
            m.start_offset,
            m.dcc,
        )
        assert _expand(live) == m.offsets
    # Loading is replay: decode the bytes and replay them into a fresh shard.
    fresh = ShareCoordinatorShard(0)
    for offset, (k, v) in enumerate(d.log):
        rec = decode_record(k, v)
        fresh.replay(rec.key, rec.value, offset)
    for key in KEYS:
        assert fresh.state(key) == d.shard.state(key)
    # Pruning: replaying only the records from the prune offset rebuilds the same state.
    pruned = ShareCoordinatorShard(0)
    start = d.shard.prune_offset()
    for offset, (k, v) in enumerate(d.log[start:], start=start):
        rec = decode_record(k, v)
        pruned.replay(rec.key, rec.value, offset)
    for key in KEYS:
        assert pruned.state(key) == d.shard.state(key)


def _write(key: SharePartitionKey, *, epoch: int = 0, leader: int = 0, first: int = 0) -> WriteStateParams:
    return WriteStateParams(
        key=key,
        state_epoch=epoch,
        leader_epoch=leader,
        start_offset=-1,
        delivery_complete_count=1,
        state_batches=(
            StateBatch(first_offset=first, last_offset=first, delivery_state=2, delivery_count=1),
        ),
    )


def test_requests_wait_for_the_load() -> None:
    shard = ShareCoordinatorShard(0)
    assert shard.handle_write(_write(KEYS[0]), now_ms=0).response == ErrorCode.coordinator_load_in_progress
    assert shard.handle_read(KEYS[0], leader_epoch=0).response.error == ErrorCode.coordinator_load_in_progress
    shard.complete_load()
    assert shard.handle_write(_write(KEYS[0]), now_ms=0).response == ErrorCode.none


def test_stale_state_epoch_write_is_refused() -> None:
    d = Driver(ShareCoordinatorConfig())
    d.apply(d.shard.handle_initialize(KEYS[0], state_epoch=3, start_offset=0, now_ms=0))  # type: ignore[arg-type]
    res = d.shard.handle_write(_write(KEYS[0], epoch=2), now_ms=1)
    assert res.response == ErrorCode.fenced_state_epoch and res.records == ()
    assert d.shard.handle_write(_write(KEYS[0], epoch=3), now_ms=1).response == ErrorCode.none
    # re-initialising with an older epoch is fenced too
    res = d.shard.handle_initialize(KEYS[0], state_epoch=2, start_offset=0, now_ms=2)
    assert res.response == ErrorCode.fenced_state_epoch


def test_stale_leader_epoch_write_is_refused() -> None:
    d = Driver(ShareCoordinatorConfig())
    d.apply(d.shard.handle_write(_write(KEYS[0], leader=5), now_ms=0))  # type: ignore[arg-type]
    assert d.shard.handle_write(_write(KEYS[0], leader=4), now_ms=1).response == ErrorCode.fenced_leader_epoch


def test_a_snapshot_every_n_updates() -> None:
    n = 5
    d = Driver(ShareCoordinatorConfig(snapshot_update_records_per_snapshot=n))
    d.apply(d.shard.handle_initialize(KEYS[0], state_epoch=0, start_offset=0, now_ms=0))  # type: ignore[arg-type]
    first = d.shard.handle_write(_write(KEYS[0], first=1), now_ms=0)
    assert isinstance(first.records[0].value, ShareSnapshot)  # one batch: as small as the delta
    d.apply(first)  # type: ignore[arg-type]
    kinds = []
    for i in range(1, 3 * (n + 1) + 1):
        res = d.shard.handle_write(_write(KEYS[0], first=2 * i + 1), now_ms=i)  # gaps: deltas stay small
        kinds.append(type(res.records[0].value))
        d.apply(res)  # type: ignore[arg-type]
    assert kinds == ([ShareUpdate] * n + [ShareSnapshot]) * 3
    assert d.shard.prune_offset() == 2 + 3 * (n + 1) - 1  # the latest snapshot's offset


def test_a_snapshot_when_it_is_no_larger_than_the_delta() -> None:
    d = Driver(ShareCoordinatorConfig())
    d.apply(d.shard.handle_initialize(KEYS[0], state_epoch=0, start_offset=0, now_ms=0))  # type: ignore[arg-type]
    params = WriteStateParams(
        key=KEYS[0],
        state_epoch=0,
        leader_epoch=0,
        start_offset=10,
        delivery_complete_count=0,
        state_batches=(),
    )
    res = d.shard.handle_write(params, now_ms=1)
    assert isinstance(res.records[0].value, ShareSnapshot)


def test_cold_share_partitions_get_a_fresh_snapshot() -> None:
    config = ShareCoordinatorConfig(cold_partition_snapshot_interval_ms=1000)
    d = Driver(config)
    d.apply(d.shard.handle_initialize(KEYS[0], state_epoch=0, start_offset=0, now_ms=0))  # type: ignore[arg-type]
    d.apply(d.shard.handle_initialize(KEYS[1], state_epoch=0, start_offset=0, now_ms=500))  # type: ignore[arg-type]
    assert d.shard.next_deadline() == 1000
    assert d.shard.cold_snapshots(999) == ()
    cold = d.shard.cold_snapshots(1000)
    assert [r.key for r in cold] == [KEYS[0]]
    d.apply(CoordinatorResult(records=cold, response=None))
    assert d.shard.prune_offset() == 1
    assert d.shard.next_deadline() == 1500


def test_delete_writes_a_tombstone_and_frees_the_prune_offset() -> None:
    d = Driver(ShareCoordinatorConfig())
    d.apply(d.shard.handle_initialize(KEYS[0], state_epoch=0, start_offset=0, now_ms=0))  # type: ignore[arg-type]
    res = d.shard.handle_delete(KEYS[0])
    assert res.records == (StateRecord(key=KEYS[0], value=None),)
    d.apply(res)  # type: ignore[arg-type]
    assert d.shard.state(KEYS[0]) is None
    assert d.shard.prune_offset() == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("hello", 99162322), ("g:x:0", 96967707), ("\U0001f600", 1772899)],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_placement_is_stable_and_spread() -> None:
    keys = [SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=7), partition=p) for p in range(500)]
    parts = [partition_for(k, 50) for k in keys]
    assert parts == [partition_for(k, 50) for k in keys]
    assert all(0 <= p < 50 for p in parts)
    assert len(set(parts)) > 25
