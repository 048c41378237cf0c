"""Client share-group bookkeeping: acknowledgement ranges, session epochs, acquired-record selection."""

from __future__ import annotations

import itertools
import uuid

from hypothesis import given
from hypothesis import strategies as st

from shareq.client._share_requests import select_acquired
from shareq.client._share_state import (
    AcknowledgeType,
    PendingAcks,
    ShareSession,
    coalesce,
    coalesce_ranges,
    member_id_from_uuid,
    next_epoch,
)
from shareq.log.records import Record, encode_batch, encode_control_batch

A, R, J, G = AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.GAP
T = uuid.UUID(int=7)


def test_coalesce_runs_of_one_type_carry_one_type() -> None:
    assert coalesce({5: A, 6: A, 7: A, 9: R}) == [(5, 7, (1,)), (9, 9, (2,))]


def test_coalesce_mixed_run_carries_one_type_per_offset() -> None:
    assert coalesce({1: A, 2: J, 3: A}) == [(1, 3, (1, 3, 1))]


@given(st.dictionaries(st.integers(0, 200), st.sampled_from([A, R, J, G]), max_size=60))
def test_coalesce_round_trips(offsets: dict[int, AcknowledgeType]) -> None:
    expanded: dict[int, int] = {}
    batches = coalesce(offsets)
    for first, last, types in batches:
        assert len(types) in (1, last - first + 1)
        for i, off in enumerate(range(first, last + 1)):
            expanded[off] = types[0] if len(types) == 1 else types[i]
    assert expanded == {k: int(v) for k, v in offsets.items()}
    # runs are maximal: consecutive batches never touch
    for (_, last, _), (first, _, _) in itertools.pairwise(batches):
        assert first > last + 1


@given(
    st.lists(st.tuples(st.integers(0, 120), st.integers(0, 15), st.sampled_from([A, R, J, G])), max_size=12)
)
def test_coalesce_ranges_equals_coalescing_every_offset(ranges: list[tuple[int, int, int]]) -> None:
    given_ranges = [(first, first + span, AcknowledgeType(kind)) for first, span, kind in ranges]
    offsets: dict[int, AcknowledgeType] = {}
    for first, last, kind in given_ranges:  # later ranges win
        for offset in range(first, last + 1):
            offsets[offset] = kind
    assert coalesce_ranges(given_ranges) == coalesce(offsets)


def test_a_million_offsets_in_one_range_stay_one_batch() -> None:
    pending = PendingAcks()
    pending.add((T, 0), 0, 999_999, A)
    pending.add((T, 0), 1_000_000, 1_999_999, A)
    assert pending.take() == {(T, 0): [(0, 1_999_999, (1,))]}


def test_pending_acks_take_removes() -> None:
    pending = PendingAcks()
    pending.add((T, 0), 10, 12, A)
    pending.add((T, 1), 3, 3, R)
    assert bool(pending)
    assert pending.take([(T, 0)]) == {(T, 0): [(10, 12, (1,))]}
    assert pending.partitions() == [(T, 1)]
    pending.take()
    assert not pending


def test_session_epochs_follow_librdkafka_sequence() -> None:
    s = ShareSession()
    wanted = {(T, 0), (T, 1)}
    epoch, listed, forgotten = s.plan_fetch(wanted, [])
    assert (epoch, listed, forgotten) == (0, [(T, 0), (T, 1)], [])
    s.fetched(wanted)
    epoch, listed, forgotten = s.plan_fetch(wanted, [])
    assert (epoch, listed, forgotten) == (1, [], [])
    s.fetched(wanted)
    # acknowledgements ride along; a revoked partition is forgotten, a new one is listed
    epoch, listed, forgotten = s.plan_fetch({(T, 1), (T, 2)}, [(T, 0), (T, 1)])
    assert epoch == 2
    assert listed == [(T, 0), (T, 1), (T, 2)]
    assert forgotten == [(T, 0)]
    s.acknowledged()
    assert s.epoch == 3
    s.reset()
    assert s.plan_fetch(wanted, [])[0] == 0


def test_epoch_wraps_to_one() -> None:
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(0) == 1


def test_member_id_is_22_chars_urlsafe() -> None:
    mid = member_id_from_uuid(uuid.uuid4())
    assert len(mid) == 22
    assert set(mid) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_select_acquired_keeps_only_acquired_offsets_and_reports_gaps() -> None:
    blob = encode_batch([Record(value=b"%d" % i, timestamp=1000 + i) for i in range(5)], base_offset=10)
    blob += encode_control_batch(commit=True, producer_id=1, producer_epoch=0, base_offset=15)
    picked, gaps = select_acquired(blob, [(11, 12, 1), (14, 15, 3)])
    assert [(r.offset, r.value, c) for r, c, _ in picked] == [(11, b"1", 1), (12, b"2", 1), (14, b"4", 3)]
    assert gaps == [15]
    assert select_acquired(blob, []) == ([], [])
