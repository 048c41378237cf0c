"""KIP-848 consumer groups: the ``range`` assignor, the choice of assignor, and regex subscriptions."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.config import consumer_assignors
from shareq.coordinators.classic import ClassicErrorCode, ClassicRequestError
from shareq.coordinators.consumer import (
    ConsumerConfig,
    ConsumerGroupCoordinator,
    ConsumerHeartbeat,
    range_assign,
)

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


def test_range_gives_contiguous_co_partitioned_ranges() -> None:
    subs = {m: frozenset({A, B}) for m in ("m1", "m2", "m3")}
    got = range_assign(subs, {A: 7, B: 7}, {})
    assert got["m1"] == {A: frozenset({0, 1, 2}), B: frozenset({0, 1, 2})}
    assert got["m2"] == {A: frozenset({3, 4}), B: frozenset({3, 4})}
    assert got["m3"] == {A: frozenset({5, 6}), B: frozenset({5, 6})}
    assert range_assign(subs, {A: 7, B: 7}, got) == got


def test_range_keeps_previous_owners_within_their_quota() -> None:
    previous = {"m1": {A: frozenset({4, 5})}, "m2": {A: frozenset({0, 1})}}
    got = range_assign({"m1": frozenset({A}), "m2": frozenset({A})}, {A: 4}, previous)
    assert got == {"m1": {A: frozenset({2, 3})}, "m2": {A: frozenset({0, 1})}}  # 4 and 5 no longer exist


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcdef"), st.sets(st.sampled_from([A, B]), min_size=1), min_size=1),
    st.integers(0, 12),
    st.integers(0, 12),
)
def test_range_assigns_each_partition_once_to_a_subscriber(
    subs: dict[str, set[uuid.UUID]], count_a: int, count_b: int
) -> None:
    counts = {A: count_a, B: count_b}
    frozen = {m: frozenset(ts) for m, ts in subs.items()}
    first = range_assign(frozen, counts, {})
    for previous in ({}, first):
        got = range_assign(frozen, counts, previous)
        for topic, count in counts.items():
            owners = [(m, p) for m, a in got.items() for p in a.get(topic, ())]
            subscribers = [m for m in frozen if topic in frozen[m]]
            assert sorted(p for _, p in owners) == (list(range(count)) if subscribers else [])
            assert all(topic in frozen[m] for m, _ in owners)
            loads = [len(got[m].get(topic, ())) for m in subscribers]
            assert not loads or max(loads) - min(loads) <= 1


def beat(
    c: ConsumerGroupCoordinator,
    member: str,
    epoch: int,
    topics: dict[str, tuple[uuid.UUID, int]],
    *,
    names: tuple[str, ...] | None = None,
    regex: str | None = None,
    assignor: str | None = None,
    owned: dict[uuid.UUID, frozenset[int]] | None = None,
) -> tuple[str, int, dict[uuid.UUID, frozenset[int]] | None]:
    result = c.heartbeat(
        ConsumerHeartbeat(
            group_id="g",
            member_id=member,
            member_epoch=epoch,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            owned=owned,
        ),
        now_ms=0,
        topics=topics,
    )
    return result.member_id, result.member_epoch, result.assignment


def test_regex_matches_whole_names_and_follows_new_topics() -> None:
    c = ConsumerGroupCoordinator()
    topics = {"orders-eu": (A, 2), "orders": (B, 1), "xorders-us": (uuid.UUID(int=3), 1)}
    mid, epoch, assigned = beat(c, "", 0, topics, regex="orders-.*")
    assert assigned == {A: frozenset({0, 1})}
    group = c.group("g")
    assert group is not None and group.members[mid].resolved == {"orders-eu"}
    topics["orders-us"] = (uuid.UUID(int=4), 1)
    _, epoch, assigned = beat(c, mid, epoch, topics)
    assert assigned == {A: frozenset({0, 1}), uuid.UUID(int=4): frozenset({0})}
    _, epoch, assigned = beat(c, mid, epoch, topics, names=("orders",), regex="")
    assert assigned == {}  # the old partitions are revoked first
    _, _, assigned = beat(c, mid, epoch, topics, owned={})
    assert assigned == {B: frozenset({0})}


def test_invalid_regex_and_unknown_assignor_are_refused() -> None:
    c = ConsumerGroupCoordinator()
    with pytest.raises(ClassicRequestError) as bad_regex:
        beat(c, "", 0, {}, regex="(unclosed")
    assert bad_regex.value.code == ClassicErrorCode.INVALID_REGULAR_EXPRESSION
    with pytest.raises(ClassicRequestError) as bad_assignor:
        beat(c, "", 0, {}, names=("t",), assignor="sticky")
    assert bad_assignor.value.code == ClassicErrorCode.UNSUPPORTED_ASSIGNOR
    assert c.group("g") is None
    with pytest.raises(ClassicRequestError) as no_subscription:
        beat(c, "", 0, {})
    assert no_subscription.value.code == ClassicErrorCode.INVALID_REQUEST


def test_the_assignor_most_members_ask_for_wins() -> None:
    topics = {"t": (A, 4)}
    c = ConsumerGroupCoordinator(ConsumerConfig(assignors=("range", "uniform")))
    beat(c, "m1", 0, topics, names=("t",))
    group = c.group("g")
    assert group is not None and group.assignor == "range"  # nobody asked: the first configured
    beat(c, "m2", 0, topics, names=("t",), assignor="uniform")
    assert group.assignor == "uniform"
    beat(c, "m3", 0, topics, names=("t",), assignor="range")
    assert group.assignor == "range"  # a tie goes to the one configured first


def test_assignor_config_names() -> None:
    assert consumer_assignors("uniform,range") == ("uniform", "range")
    assert consumer_assignors("org.apache.kafka.coordinator.group.assignor.RangeAssignor") == ("range",)
    assert consumer_assignors("sticky") == ()
