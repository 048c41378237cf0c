"""State-topic record encoding: round trips and the documented byte layout."""

from __future__ import annotations

import random
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.share.records import (
    ShareSnapshot,
    ShareUpdate,
    StateRecord,
    StateRecordError,
    decode_record,
    encode_record,
)
from shareq.share.persister import SharePartitionKey, StateBatch

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)

keys = st.builds(
    SharePartitionKey,
    group_id=st.text(max_size=30),
    topic_id=st.uuids(),
    partition=st.integers(0, 2**31 - 1),
)
state_batch = st.builds(
    StateBatch,
    first_offset=I64,
    last_offset=I64,
    delivery_state=st.sampled_from([0, 2, 3, 4]),
    delivery_count=st.integers(-(2**15), 2**15 - 1),
)
state_batches = st.lists(state_batch, max_size=6).map(tuple)
snapshots = st.builds(
    ShareSnapshot,
    snapshot_epoch=I32,
    state_epoch=I32,
    leader_epoch=I32,
    start_offset=I64,
    delivery_complete_count=I32,
    create_timestamp=I64,
    write_timestamp=I64,
    state_batches=state_batches,
)
updates = st.builds(
    ShareUpdate,
    snapshot_epoch=I32,
    leader_epoch=I32,
    start_offset=I64,
    delivery_complete_count=I32,
    state_batches=state_batches,
)


@settings(max_examples=500)
@given(key=keys, value=st.one_of(st.none(), snapshots, updates))
def test_round_trip(key: SharePartitionKey, value: ShareSnapshot | ShareUpdate | None) -> None:
    record = StateRecord(key=key, value=value)
    k, v = encode_record(record)
    assert decode_record(k, v) == record


@settings(max_examples=100)
@given(count=st.integers(0, 200), seed=st.integers(0, 2**32))
def test_hundreds_of_state_batches_are_packed_in_order(count: int, seed: int) -> None:
    """A write with a REJECT every tenth record carries hundreds of batches, packed in groups:
    the bytes are each batch's own, in order, and read back the same."""
    rng = random.Random(seed)
    batches = tuple(
        StateBatch(
            first_offset=rng.randrange(-(2**63), 2**63),
            last_offset=rng.randrange(-(2**63), 2**63),
            delivery_state=rng.choice([0, 2, 3, 4]),
            delivery_count=rng.randrange(-(2**15), 2**15),
        )
        for _ in range(count)
    )
    key = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=seed), partition=1)
    update = ShareUpdate(
        snapshot_epoch=1, leader_epoch=2, start_offset=3, delivery_complete_count=4, state_batches=batches
    )
    k, v = encode_record(StateRecord(key=key, value=update))
    assert v is not None
    head = struct.pack(">hiiq", 0, 1, 2, 3)
    at = len(head) + (1 if count + 1 < 0x80 else 2)  # the compact array's length
    each = b"".join(struct.pack(">qqbhb", *b, 0) for b in batches)
    assert v.startswith(head) and v[at : at + len(each)] == each
    assert decode_record(k, v) == StateRecord(key=key, value=update)


def test_update_bytes_follow_the_documented_layout() -> None:
    key = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=1), partition=7)
    update = ShareUpdate(
        snapshot_epoch=3,
        leader_epoch=5,
        start_offset=-1,
        delivery_complete_count=9,
        state_batches=(StateBatch(first_offset=10, last_offset=12, delivery_state=2, delivery_count=1),),
    )
    k, v = encode_record(StateRecord(key=key, value=update))
    assert k == struct.pack(">hh", 1, 1) + b"g" + uuid.UUID(int=1).bytes + struct.pack(">i", 7)
    assert v == (
        struct.pack(">hiiq", 0, 3, 5, -1)
        + b"\x02"  # compact array: one batch
        + struct.pack(">qqbh", 10, 12, 2, 1)
        + b"\x00"  # batch tagged fields
        + b"\x01\x00\x04"  # one tagged field: tag 0, 4 bytes
        + struct.pack(">i", 9)
    )


def test_uninitialized_delivery_complete_count_is_not_written() -> None:
    key = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=1), partition=0)
    update = ShareUpdate(
        snapshot_epoch=0, leader_epoch=0, start_offset=0, delivery_complete_count=-1, state_batches=()
    )
    _, v = encode_record(StateRecord(key=key, value=update))
    assert v is not None and v.endswith(b"\x01\x00")


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_truncated_value_is_refused(cut: int) -> None:
    key = SharePartitionKey(group_id="g", topic_id=uuid.UUID(int=1), partition=0)
    snap = ShareSnapshot(
        snapshot_epoch=0,
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        delivery_complete_count=4,
        create_timestamp=0,
        write_timestamp=0,
        state_batches=(StateBatch(first_offset=0, last_offset=1, delivery_state=0, delivery_count=1),),
    )
    k, v = encode_record(StateRecord(key=key, value=snap))
    assert v is not None
    with pytest.raises(StateRecordError):
        decode_record(k, v[:-cut])


def test_unknown_record_type_is_refused() -> None:
    with pytest.raises(StateRecordError):
        decode_record(struct.pack(">hh", 9, 0) + bytes(16) + bytes(4), b"")
