"""Properties of the simple share assignor."""

from __future__ import annotations

import heapq
import uuid
from collections import Counter
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.group.assignor import MemberAssignment, TopicPartition, assign, owners_of

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


# The property below compares the assignor with this plain transcription of its rules (step 4
# scans every candidate for every idle member): the heap must pick exactly what the scan picked.
def _scanning_assign(
    members: Mapping[str, frozenset[uuid.UUID]],
    partitions: Mapping[uuid.UUID, frozenset[int]],
    previous: Mapping[str, Mapping[uuid.UUID, frozenset[int]]] | None = None,
) -> dict[str, MemberAssignment]:
    """The assignor as it was before step 4 kept a heap per subscription: a scan per idle member."""
    member_ids = sorted(members)
    order = sorted(
        ((t, p) for t, parts in partitions.items() for p in parts), key=lambda tp: (str(tp[0]), tp[1])
    )
    owners: dict[TopicPartition, list[str]] = {}
    for mid, topics in (previous or {}).items():
        if mid not in members:
            continue
        for t, parts in topics.items():
            if t in members[mid]:
                for p in parts:
                    owners.setdefault((t, p), []).append(mid)
    for lst in owners.values():
        lst.sort()

    eligible_count = sum(1 for m in member_ids if members[m])
    load = dict.fromkeys(member_ids, 0)
    result: dict[str, dict[TopicPartition, None]] = {m: {} for m in member_ids}
    holders: dict[TopicPartition, int] = {}
    unassigned: list[TopicPartition] = []

    quota, extras = divmod(len(order), eligible_count) if eligible_count else (0, 0)

    def give(mid: str, tp: TopicPartition) -> None:
        result[mid][tp] = None
        load[mid] += 1
        holders[tp] = holders.get(tp, 0) + 1

    # 1. Keep previous owners up to the floor quota.
    for tp in order:
        keeper = next((m for m in owners.get(tp, ()) if load[m] < quota), None)
        if keeper is None:
            unassigned.append(tp)
        else:
            give(keeper, tp)
    # 2. Then let previous owners keep one more while extra slots remain.
    rest: list[TopicPartition] = []
    for tp in unassigned:
        keeper = next((m for m in owners.get(tp, ()) if load[m] == quota), None) if extras else None
        if keeper is None:
            rest.append(tp)
        else:
            give(keeper, tp)
            extras -= 1
    # 3. Hand the remaining partitions to the least-loaded subscriber, topic by topic.
    by_topic: dict[uuid.UUID, list[int]] = {}
    for t, p in rest:
        by_topic.setdefault(t, []).append(p)
    for t in sorted(by_topic, key=str):
        heap = [(load[m], m) for m in member_ids if t in members[m]]
        if not heap:
            continue
        heapq.heapify(heap)
        for p in by_topic[t]:
            _, m = heapq.heappop(heap)
            give(m, (t, p))
            heapq.heappush(heap, (load[m], m))
    # 4. Members still idle share a subscribed partition: the least shared, previously held first.
    for m in member_ids:
        if load[m]:
            continue
        candidates = [tp for tp in order if tp[0] in members[m]]
        if not candidates:
            continue
        had = set(owners_of(previous, m))
        best = min(
            range(len(candidates)),
            key=lambda i: (holders.get(candidates[i], 0), candidates[i] not in had, i),
        )
        give(m, candidates[best])

    out: dict[str, MemberAssignment] = {}
    for m, tps in result.items():
        grouped: dict[uuid.UUID, set[int]] = {}
        for t, p in tps:
            grouped.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in grouped.items()}
    return out


subscriptions = st.lists(
    st.tuples(
        st.text("abcdefghij", min_size=1, max_size=3),
        st.frozensets(st.sampled_from(TOPICS), max_size=4),
        st.frozensets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 5)), max_size=4),
    ),
    max_size=30,
    unique_by=lambda entry: entry[0],
)


@settings(max_examples=400)
@given(subscriptions, st.lists(st.integers(0, 6), min_size=4, max_size=4))
def test_same_as_scanning_each_idle_member(
    entries: list[tuple[str, frozenset[uuid.UUID], frozenset[tuple[uuid.UUID, int]]]], counts: list[int]
) -> None:
    """Overlapping subscriptions, more members than partitions, arbitrary previous holdings."""
    members = {m: topics for m, topics, _ in entries}
    parts = {t: frozenset(range(n)) for t, n in zip(TOPICS, counts, strict=True) if n}
    previous: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for m, _, held in entries:
        grouped: dict[uuid.UUID, set[int]] = {}
        for t, p in held:
            grouped.setdefault(t, set()).add(p)
        previous[m] = {t: frozenset(ps) for t, ps in grouped.items()}
    assert assign(members, parts, previous) == _scanning_assign(members, parts, previous)
    assert assign(members, parts) == _scanning_assign(members, parts)
