"""ShardLoader (index raw records, decode only what the latest snapshot leaves) equals replay."""

from __future__ import annotations

import pickle
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.share.loader import ShardLoader, fold_raw_updates
from shareq.coordinators.share.records import (
    RecordType,
    ShareSnapshot,
    ShareUpdate,
    StateRecord,
    StateRecordError,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from shareq.coordinators.share.shard import ShareCoordinatorShard, fold_updates
from shareq.share.persister import SharePartitionKey, StateBatch

KEYS = [
    SharePartitionKey(group_id=g, topic_id=uuid.UUID(int=t), partition=p)
    for g, t, p in (("g", 1, 0), ("g", 1, 1), ("other", 2, 0))
]

batches = st.lists(
    st.builds(
        lambda first, length, state, count: StateBatch(
            first_offset=first, last_offset=first + length, delivery_state=state, delivery_count=count
        ),
        st.integers(0, 60),
        st.integers(-2, 8),  # now and then an empty (first > last) batch
        st.sampled_from([0, 2, 3, 4]),
        st.integers(0, 3),
    ),
    max_size=4,
).map(tuple)

# Mostly ordered acknowledgements (the fast fold), sometimes anything at all (the slow one).
ordered_ack = st.builds(
    lambda first, length, count: (
        StateBatch(first_offset=first, last_offset=first + length, delivery_state=2, delivery_count=count),
    ),
    st.integers(0, 60),
    st.integers(0, 3),
    st.integers(1, 2),
)
dcc = st.sampled_from([-1, -1, 0, 3, 7])
start = st.sampled_from([-1, -1, -1, 0, 5, 10, 20, 40])
epoch = st.sampled_from([0, 0, 0, 1, 2])

snapshots = st.builds(
    lambda s_epoch, st_epoch, l_epoch, start_offset, d, bs: ShareSnapshot(
        snapshot_epoch=s_epoch,
        state_epoch=st_epoch,
        leader_epoch=l_epoch,
        start_offset=max(start_offset, 0),
        delivery_complete_count=d,
        create_timestamp=1,
        write_timestamp=2,
        state_batches=bs,
    ),
    epoch,
    st.integers(0, 3),
    st.integers(-1, 3),
    start,
    dcc,
    batches,
)
updates = st.builds(
    lambda s_epoch, l_epoch, start_offset, d, bs: ShareUpdate(
        snapshot_epoch=s_epoch,
        leader_epoch=l_epoch,
        start_offset=start_offset,
        delivery_complete_count=d,
        state_batches=bs,
    ),
    epoch,
    st.integers(-1, 3),
    start,
    dcc,
    st.one_of(ordered_ack, ordered_ack, batches),
)
records = st.lists(
    st.builds(
        StateRecord,
        key=st.sampled_from(KEYS),
        value=st.one_of(snapshots, updates, updates, updates, updates, st.none()),
    ),
    max_size=40,
)


def _replayed(recs: list[StateRecord], base: int) -> ShareCoordinatorShard:
    """The straightforward way: decode every record and replay it in order."""
    shard = ShareCoordinatorShard(0)
    for i, rec in enumerate(recs):
        key, value = encode_record(rec)
        decoded = decode_record(key, value)
        shard.replay(decoded.key, decoded.value, base + i)
    shard.complete_load()
    return shard


def _loaded(recs: list[StateRecord], base: int, chunk: int) -> ShareCoordinatorShard:
    shard = ShareCoordinatorShard(0)
    loader = ShardLoader()
    raw = [(base + i, *encode_record(rec)) for i, rec in enumerate(recs)]
    for lo in range(0, len(raw), chunk):
        loader.feed(raw[lo : lo + chunk])
    loader.finish(shard)
    shard.complete_load()
    return shard


def _summary(shard: ShareCoordinatorShard) -> object:
    per_key = [
        (key, ks.current, ks.snapshot_offset, ks.updates_since_snapshot) for key, ks in shard._keys.items()
    ]
    return per_key, shard.next_offset, shard.prune_offset(), shard.cold_snapshots(10**6)


@settings(max_examples=400, deadline=None)
@given(recs=records, base=st.integers(0, 1000), chunk=st.integers(1, 7))
def test_loading_equals_replaying_every_record(recs: list[StateRecord], base: int, chunk: int) -> None:
    assert _summary(_loaded(recs, base, chunk)) == _summary(_replayed(recs, base))


@st.composite
def acknowledgements(draw: st.DrawFn) -> list[ShareUpdate]:
    """Updates as a share-partition leader writes them: runs moving forward, often adjacent and
    alike, the SPSO following (and now and then a stray: an older epoch, a step back)."""
    out: list[ShareUpdate] = []
    offset = draw(st.integers(0, 5))
    spso = 0
    for _ in range(draw(st.integers(0, 30))):
        offset += draw(st.sampled_from([0, 0, 0, 1, 3]))
        last = offset + draw(st.integers(0, 3))
        move = draw(st.sampled_from(["none", "none", "none", "up", "back"]))
        if move == "up":
            spso = draw(st.integers(spso, last + 1))
        elif move == "back":
            spso = max(0, spso - draw(st.integers(1, 4)))
        out.append(
            ShareUpdate(
                snapshot_epoch=draw(st.sampled_from([0, 0, 0, 0, 1])),
                leader_epoch=draw(st.integers(0, 1)),
                start_offset=-1 if move == "none" else spso,
                delivery_complete_count=draw(dcc),
                state_batches=(
                    StateBatch(
                        first_offset=offset,
                        last_offset=last,
                        delivery_state=draw(st.sampled_from([0, 2, 2, 4])),
                        delivery_count=draw(st.sampled_from([1, 1, 2])),
                    ),
                ),
            )
        )
        offset = last + 1
    return out


@settings(max_examples=300, deadline=None)
@given(snapshot=snapshots, ups=st.one_of(acknowledgements(), st.lists(updates, max_size=30)))
def test_raw_fold_equals_fold_of_decoded_updates(snapshot: ShareSnapshot, ups: list[ShareUpdate]) -> None:
    matching = [u for u in ups if u.snapshot_epoch == snapshot.snapshot_epoch]
    expected = fold_updates(snapshot, matching) if matching else snapshot
    assert fold_raw_updates(snapshot, [encode_value(u) for u in ups]) == (expected, len(matching))


def test_superseded_updates_are_not_decoded() -> None:
    key = KEYS[0]
    snap = ShareSnapshot(
        snapshot_epoch=1,
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        delivery_complete_count=-1,
        create_timestamp=1,
        write_timestamp=1,
        state_batches=(),
    )
    loader = ShardLoader()
    loader.feed(
        [
            (0, *encode_record(StateRecord(key=key, value=snap))),
            (1, encode_key(RecordType.UPDATE, key), b"garbage"),  # superseded by offset 2
            (2, *encode_record(StateRecord(key=key, value=snap))),
        ]
    )
    shard = ShareCoordinatorShard(0)
    loader.finish(shard)
    assert shard._keys[key].snapshot_offset == 2
    assert shard.next_offset == 3


def test_a_corrupt_surviving_update_fails_the_load() -> None:
    key = KEYS[0]
    snap = ShareSnapshot(
        snapshot_epoch=0,
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        delivery_complete_count=-1,
        create_timestamp=1,
        write_timestamp=1,
        state_batches=(),
    )
    loader = ShardLoader()
    loader.feed(
        [
            (7, *encode_record(StateRecord(key=key, value=snap))),
            (8, encode_key(RecordType.UPDATE, key), b"garbage"),
        ]
    )
    with pytest.raises(StateRecordError, match="offset 7"):
        loader.finish(ShareCoordinatorShard(0))


@pytest.mark.parametrize("raw_key", [b"\x00\x04rest", b"\x01\x00rest", b"\x00"])
def test_unknown_record_types_fail_at_their_offset(raw_key: bytes) -> None:
    with pytest.raises(StateRecordError, match="offset 5"):
        ShardLoader().feed([(5, raw_key, b"")])


@given(
    s_epoch=epoch,
    l_epoch=st.integers(-1, 3),
    start_offset=start,
    d=dcc,
    first=st.integers(0, 2**40),
    state=st.sampled_from([0, 2, 3, 4]),
    count=st.integers(0, 3),
)
def test_one_batch_update_encoding_is_the_general_layout(
    s_epoch: int, l_epoch: int, start_offset: int, d: int, first: int, state: int, count: int
) -> None:
    u = ShareUpdate(
        snapshot_epoch=s_epoch,
        leader_epoch=l_epoch,
        start_offset=start_offset,
        delivery_complete_count=d,
        state_batches=(
            StateBatch(first_offset=first, last_offset=first + 3, delivery_state=state, delivery_count=count),
        ),
    )
    tags = b"\x00" if d == -1 else b"\x01\x00\x04" + struct.pack(">i", d)
    expected = (
        struct.pack(">hiiq", 0, s_epoch, l_epoch, start_offset)
        + b"\x02"
        + struct.pack(">qqbhB", first, first + 3, state, count, 0)
        + tags
    )
    assert encode_value(u) == expected
    assert decode_value(RecordType.UPDATE, expected) == u


def test_share_partition_keys_cache_their_hash_but_not_across_pickling() -> None:
    key = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=9), partition=3)
    twin = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=9), partition=3)
    assert hash(key) == hash(twin) == hash(("g", uuid.UUID(int=9), 3))
    assert {key: 1}[twin] == 1
    copy = pickle.loads(pickle.dumps(key))
    assert copy == key and copy._hash is None
    assert "_hash" not in repr(key)
