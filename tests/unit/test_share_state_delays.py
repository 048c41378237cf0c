"""Redelivery due times in durable share state: writes carry them, the newest write on an offset wins,
pruning drops them below the start offset, and every way of reading the state back (replay of the
records' bytes, the bulk loader, replay from the prune offset, the in-log persister's control
records) gives the live state, due times and counts included."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.share.delays import combine_delays
from shareq.coordinators.share.loader import ShardLoader
from shareq.coordinators.share.records import (
    RecordType,
    ShareSnapshot,
    ShareUpdate,
    decode_record,
    decode_value,
    encode_record,
    encode_value,
)
from shareq.coordinators.share.shard import ShareCoordinatorConfig, ShareCoordinatorShard
from shareq.persister import share_control as sc
from shareq.share.persister import (
    RedeliveryDelay,
    SharePartitionKey,
    ShareState,
    StateBatch,
    WriteStateParams,
)

KEYS = [SharePartitionKey(group_id=f"g{i}", topic_id=uuid.UUID(int=i + 1), partition=i) for i in range(2)]
Offsets = dict[int, tuple[int, int, int]]


def _expand(state: ShareState | None) -> Offsets | None:
    if state is None:
        return None
    due = {o: d.due_ms for d in state.delays for o in range(d.first_offset, d.last_offset + 1)}
    out = {
        o: (b.delivery_state, b.delivery_count, due.pop(o, 0))
        for b in state.state_batches
        for o in range(b.first_offset, b.last_offset + 1)
    }
    assert not due, f"due times without a state batch: {due}"
    return out


# A write: disjoint, ascending batches; AVAILABLE ones (state 0) may carry a due time.
writes = st.lists(
    st.tuples(
        st.integers(0, 6),
        st.integers(0, 5),
        st.sampled_from([0, 0, 2, 4]),
        st.integers(0, 4),
        st.integers(0, 3),
    ),
    min_size=0,
    max_size=4,
)


def _params(
    key: SharePartitionKey, start: int, raw: list[tuple[int, int, int, int, int]]
) -> WriteStateParams:
    batches: list[StateBatch] = []
    delays: list[RedeliveryDelay] = []
    pos = 0
    for gap, length, state, count, due in raw:
        first = pos + gap
        last = first + length
        batches.append(StateBatch(first, last, state, count))
        if state == 0 and due:
            delays.append(RedeliveryDelay(first, last, 1_000 * due))
        pos = last + 2  # never adjacent: the engine joins equal neighbours
    return WriteStateParams(
        key=key,
        state_epoch=0,
        leader_epoch=0,
        start_offset=start,
        delivery_complete_count=0,
        state_batches=tuple(batches),
        delays=tuple(delays),
    )


ops = st.lists(st.tuples(st.integers(0, 1), st.integers(-1, 12), writes), max_size=25)


@settings(max_examples=300, deadline=None)
@given(history=ops, per_snapshot=st.integers(0, 3))
def test_every_reading_of_the_state_gives_the_live_due_times(
    history: list[tuple[int, int, list[tuple[int, int, int, int, int]]]], per_snapshot: int
) -> None:
    shard = ShareCoordinatorShard(
        0, ShareCoordinatorConfig(snapshot_update_records_per_snapshot=per_snapshot)
    )
    shard.complete_load()
    log: list[tuple[bytes, bytes | None]] = []
    model: dict[SharePartitionKey, tuple[int, Offsets]] = {}
    for now, (k, start, raw) in enumerate(history):
        key = KEYS[k]
        params = _params(key, start, raw)
        result = shard.handle_write(params, now_ms=now)
        for record in result.records:
            shard.replay(record.key, record.value, len(log))
            log.append(encode_record(record))
        old_start, offsets = model.get(key, (start, {}))
        new_start = old_start if start == -1 else start
        due = {o: d.due_ms for d in params.delays for o in range(d.first_offset, d.last_offset + 1)}
        for b in params.state_batches:
            for o in range(b.first_offset, b.last_offset + 1):
                offsets[o] = (b.delivery_state, b.delivery_count, due.get(o, 0))
        model[key] = (new_start, {o: v for o, v in offsets.items() if o >= new_start or new_start == -1})
    for key in KEYS:
        live = shard.state(key)
        if key not in model:
            assert live is None
            continue
        assert _expand(live) == model[key][1]
    fresh = ShareCoordinatorShard(0)
    for offset, (k, v) in enumerate(log):
        rec = decode_record(k, v)
        fresh.replay(rec.key, rec.value, offset)
    loader = ShardLoader()
    loader.feed((offset, k, v) for offset, (k, v) in enumerate(log))
    bulk = ShareCoordinatorShard(0)
    loader.finish(bulk)
    pruned = ShareCoordinatorShard(0)
    first = shard.prune_offset()
    for offset, (k, v) in enumerate(log[first:], start=first):
        rec = decode_record(k, v)
        pruned.replay(rec.key, rec.value, offset)
    for key in KEYS:
        want = _expand(shard.state(key))
        assert _expand(fresh.state(key)) == want
        assert _expand(bulk.state(key)) == want
        assert _expand(pruned.state(key)) == want


def test_records_and_control_records_carry_due_times() -> None:
    delays = (RedeliveryDelay(3, 4, 1_700_000_000_123), RedeliveryDelay(9, 9, 5))
    batches = (StateBatch(0, 2, 2, 1), StateBatch(3, 6, 0, 2), StateBatch(8, 9, 0, 1))
    update = ShareUpdate(
        snapshot_epoch=1,
        leader_epoch=0,
        start_offset=-1,
        delivery_complete_count=3,
        state_batches=batches,
        delays=delays,
    )
    assert decode_value(RecordType.UPDATE, encode_value(update)) == update
    snapshot = ShareSnapshot(
        snapshot_epoch=1,
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        delivery_complete_count=3,
        create_timestamp=1,
        write_timestamp=2,
        state_batches=batches,
        delays=delays,
    )
    assert decode_value(RecordType.SNAPSHOT, encode_value(snapshot)) == snapshot
    for control in (sc.from_snapshot("g", snapshot), sc.from_update("g", update, 7)):
        decoded = sc.decode(control.control_type, sc.encode(control))
        assert decoded == control and sc.to_value(decoded).delays == delays  # type: ignore[union-attr]
    plain = ShareUpdate(
        snapshot_epoch=1, leader_epoch=0, start_offset=-1, delivery_complete_count=3, state_batches=batches
    )
    assert decode_value(RecordType.UPDATE, encode_value(plain)) == plain


def test_the_newest_write_on_an_offset_wins() -> None:
    current = (RedeliveryDelay(0, 9, 100),)
    written = (StateBatch(3, 4, 2, 1),)
    assert combine_delays(current, written, (), -1) == (
        RedeliveryDelay(0, 2, 100),
        RedeliveryDelay(5, 9, 100),
    )
    assert combine_delays(current, written, (), 6) == (RedeliveryDelay(6, 9, 100),)
    new = (RedeliveryDelay(3, 4, 50),)
    assert combine_delays(current, (StateBatch(3, 4, 0, 2),), new, -1) == (
        RedeliveryDelay(0, 2, 100),
        RedeliveryDelay(3, 4, 50),
        RedeliveryDelay(5, 9, 100),
    )
    assert combine_delays((), written, (), 0) == ()
