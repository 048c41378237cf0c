"""Properties of the simple share assignor."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.group.assignor import assign

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]


def _holders(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> Counter[tuple[uuid.UUID, int]]:
    return Counter((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def _loads(result: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


homogeneous = st.tuples(
    st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=0, max_size=12, unique=True),
    st.lists(st.integers(0, 7), min_size=1, max_size=4),
)


def _inputs(
    member_ids: list[str], counts: list[int]
) -> tuple[dict[str, frozenset[uuid.UUID]], dict[uuid.UUID, frozenset[int]]]:
    topics = TOPICS[: len(counts)]
    members = {m: frozenset(topics) for m in member_ids}
    parts = {t: frozenset(range(n)) for t, n in zip(topics, counts, strict=True)}
    return members, parts


@settings(max_examples=300)
@given(homogeneous)
def test_every_partition_has_a_member_and_balance(case: tuple[list[str], list[int]]) -> None:
    member_ids, counts = case
    members, parts = _inputs(member_ids, counts)
    result = assign(members, parts)
    assert set(result) == set(member_ids)
    holders = _holders(result)
    total = sum(counts)
    if member_ids:
        assert set(holders) == {(t, p) for t, ps in parts.items() for p in ps}
    loads = _loads(result)
    if member_ids and len(member_ids) <= total:
        assert max(loads.values()) - min(loads.values()) <= 1
        assert all(n == 1 for n in holders.values()), "no sharing while partitions suffice"
    if len(member_ids) > total > 0:
        assert all(n >= 1 for n in loads.values()), "every member gets work"
        # sharing is spread: holder counts differ by at most one
        assert max(holders.values()) - min(holders.values()) <= 1


@settings(max_examples=200)
@given(homogeneous, st.randoms(use_true_random=False))
def test_deterministic_and_order_independent(case: tuple[list[str], list[int]], rnd: object) -> None:
    member_ids, counts = case
    members, parts = _inputs(member_ids, counts)
    shuffled = list(members.items())
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert assign(dict(shuffled), parts) == assign(members, parts)


@settings(max_examples=200)
@given(homogeneous)
def test_stable_when_nothing_changes(case: tuple[list[str], list[int]]) -> None:
    member_ids, counts = case
    members, parts = _inputs(member_ids, counts)
    first = assign(members, parts)
    assert assign(members, parts, first) == first


@settings(max_examples=200)
@given(homogeneous, st.text("xyz", min_size=1, max_size=3))
def test_join_moves_few_partitions(case: tuple[list[str], list[int]], newcomer: str) -> None:
    member_ids, counts = case
    if newcomer in member_ids:
        return
    members, parts = _inputs(member_ids, counts)
    before = assign(members, parts)
    members[newcomer] = frozenset(parts)
    after = assign(members, parts, before)
    total = sum(counts)
    moved = sum(len(ps - after[m].get(t, frozenset())) for m, a in before.items() for t, ps in a.items())
    # at most the newcomer's fair share leaves the old members
    assert moved <= -(-total // len(members))


def test_more_members_than_partitions_shares() -> None:
    t = TOPICS[0]
    result = assign({m: frozenset({t}) for m in "abcde"}, {t: frozenset({0, 1})})
    assert _loads(result) == dict.fromkeys("abcde", 1)
    assert sorted(_holders(result).values()) == [2, 3]


def test_members_only_get_subscribed_topics() -> None:
    t1, t2 = TOPICS[:2]
    result = assign(
        {"a": frozenset({t1}), "b": frozenset({t2}), "c": frozenset()},
        {t1: frozenset({0, 1}), t2: frozenset({0})},
    )
    assert result == {"a": {t1: frozenset({0, 1})}, "b": {t2: frozenset({0})}, "c": {}}


def test_no_partitions_gives_empty_assignments() -> None:
    assert assign({"a": frozenset({TOPICS[0]})}, {}) == {"a": {}}
