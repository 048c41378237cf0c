"""KIP-848 consumer groups: the uniform assignor and reconciliation, with explicit time."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.classic import ClassicErrorCode, ClassicRequestError
from shareq.coordinators.consumer import (
    Assignment,
    ConsumerConfig,
    ConsumerGroupCoordinator,
    ConsumerHeartbeat,
    uniform_assign,
)
from shareq.coordinators.consumer.coordinator import RECONCILING_HEARTBEAT_INTERVAL_MS
from shareq.coordinators.group.records import CoordinatorRecord

T = uuid.UUID(int=1)
TOPICS = {"t": (T, 6)}
E = ClassicErrorCode


def beat(
    c: ConsumerGroupCoordinator,
    member: str,
    epoch: int,
    *,
    now: int = 0,
    owned: Assignment | None = None,
    topics: tuple[str, ...] | None = ("t",),
) -> tuple[int, Assignment | None]:
    result = c.heartbeat(
        ConsumerHeartbeat(
            group_id="g", member_id=member, member_epoch=epoch, subscribed_topic_names=topics, owned=owned
        ),
        now_ms=now,
        topics=TOPICS,
    )
    return result.member_epoch, result.assignment


def parts(a: Assignment | None) -> set[int]:
    return set() if a is None else set(a.get(T, frozenset()))


def test_uniform_assignor_balances_and_is_sticky() -> None:
    subs = {m: frozenset({T}) for m in "abc"}
    first = uniform_assign(subs, {T: 6}, {})
    assert sorted(len(first[m][T]) for m in "abc") == [2, 2, 2]
    grown = uniform_assign({**subs, "d": frozenset({T})}, {T: 6}, first)
    moved = sum(len(first[m][T] - grown[m].get(T, frozenset())) for m in "abc")
    assert moved == 1 and sorted(len(grown[m].get(T, frozenset())) for m in "abcd") == [1, 1, 2, 2]
    assert uniform_assign(subs, {T: 6}, first) == first


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.integers(0, 20), st.integers(0, 2**16))
def test_uniform_assignor_assigns_every_partition_once(members: int, count: int, seed: int) -> None:
    subs = {f"m{i}": frozenset({T}) for i in range(members)}
    previous = uniform_assign({f"m{i}": frozenset({T}) for i in range(seed % 5 + 1)}, {T: count}, {})
    result = uniform_assign(subs, {T: count}, previous)
    owned = [p for a in result.values() for p in a.get(T, frozenset())]
    assert sorted(owned) == list(range(count))
    loads = [len(a.get(T, frozenset())) for a in result.values()]
    assert max(loads) - min(loads) <= 1


def test_revocation_comes_before_reassignment() -> None:
    c = ConsumerGroupCoordinator(ConsumerConfig(session_timeout_ms=10_000))
    epoch_a, a = beat(c, "a", 0)
    assert epoch_a == 1 and parts(a) == set(range(6))
    epoch_b, b = beat(c, "b", 0, now=10)
    assert epoch_b == 2 and parts(b) == set()  # a still owns everything
    epoch_a2, a2 = beat(c, "a", epoch_a, now=20, owned={T: frozenset(range(6))})
    assert epoch_a2 == epoch_a and len(parts(a2)) == 3  # revoke first, epoch unchanged
    kept = parts(a2)
    _, b2 = beat(c, "b", epoch_b, now=30, owned={})
    assert parts(b2) == set()  # still held by a, which has not confirmed the revocation
    epoch_a3, _ = beat(c, "a", epoch_a, now=40, owned={T: frozenset(kept)})
    assert epoch_a3 == 2
    _, b3 = beat(c, "b", epoch_b, now=50, owned={})
    assert parts(b3) == set(range(6)) - kept
    group = c.group("g")
    assert group is not None and group.state == "Stable"


def test_a_reconciling_member_is_asked_back_within_the_short_interval() -> None:
    """A member revoking, or waiting for partitions another member still holds, is told the short
    interval; once its assignment matches its target it is told the group's interval again."""
    c = ConsumerGroupCoordinator(ConsumerConfig(heartbeat_interval_ms=5_000))
    short = RECONCILING_HEARTBEAT_INTERVAL_MS

    def interval(member: str, epoch: int, now: int, owned: Assignment | None = None) -> tuple[int, int]:
        result = c.heartbeat(
            ConsumerHeartbeat(
                group_id="g", member_id=member, member_epoch=epoch, subscribed_topic_names=("t",), owned=owned
            ),
            now_ms=now,
            topics=TOPICS,
        )
        return result.member_epoch, result.heartbeat_interval_ms

    epoch_a, a_interval = interval("a", 0, 0)
    assert a_interval == 5_000  # alone: everything at once
    epoch_b, b_interval = interval("b", 0, 10)
    assert b_interval == short  # its target is held by a
    _, a_revoking = interval("a", epoch_a, 20, owned={T: frozenset(range(6))})
    assert a_revoking == short
    group = c.group("g")
    assert group is not None
    kept = group.members["a"].assigned[T]
    _, b_waiting = interval("b", epoch_b, 30, owned={})
    assert b_waiting == short  # a has not confirmed yet
    _, a_done = interval("a", epoch_a, 40, owned={T: kept})
    assert a_done == 5_000
    _, b_done = interval("b", epoch_b, 50, owned={})
    assert b_done == 5_000 and group.state == "Stable"
    assert short < 5_000


def test_epoch_fencing_and_commit_checks() -> None:
    c = ConsumerGroupCoordinator()
    epoch, _ = beat(c, "a", 0)
    for call, code in [
        (lambda: beat(c, "a", epoch + 5), E.FENCED_MEMBER_EPOCH),
        (lambda: beat(c, "zz", 3), E.UNKNOWN_MEMBER_ID),
        (lambda: beat(c, "a", 0, topics=None), E.INVALID_REQUEST),
        (lambda: c.validate_offset_commit("g", "a", epoch + 1), E.STALE_MEMBER_EPOCH),
        (lambda: c.validate_offset_commit("g", "zz", epoch), E.UNKNOWN_MEMBER_ID),
    ]:
        with pytest.raises(ClassicRequestError) as err:
            call()
        assert err.value.code is code
    c.validate_offset_commit("g", "a", epoch)


def test_unchanged_fields_keep_their_values() -> None:
    """KIP-848 clients send -1 / null for what did not change since their last heartbeat."""
    c = ConsumerGroupCoordinator()
    c.heartbeat(
        ConsumerHeartbeat(
            group_id="g",
            member_id="a",
            member_epoch=0,
            subscribed_topic_names=("t",),
            rebalance_timeout_ms=60_000,
            rack_id="r1",
        ),
        now_ms=0,
        topics=TOPICS,
    )
    epoch, _ = beat(c, "a", 1, now=10, topics=None)
    member = c.group("g").members["a"]  # type: ignore[union-attr]
    assert (epoch, member.rebalance_timeout_ms, member.rack_id, member.subscribed) == (1, 60_000, "r1", {"t"})
    beat(c, "b", 0, now=20)
    beat(c, "a", 1, now=30, owned={T: frozenset(range(6))}, topics=None)  # revoking now
    assert member.revoke_deadline == 60_030
    assert c.expire(45_019, TOPICS) == []  # nothing due before the first session deadline


def test_session_and_revocation_timeouts_remove_members() -> None:
    c = ConsumerGroupCoordinator(ConsumerConfig(session_timeout_ms=1_000))
    epoch_a, _ = beat(c, "a", 0)
    beat(c, "b", 0, now=100)
    beat(c, "a", epoch_a, now=200, owned={T: frozenset(range(6))})  # told to revoke, never confirms
    assert c.next_deadline() == 1_100  # b's session (a's revocation deadline is its rebalance timeout)
    assert c.expire(1_100, TOPICS) == [("g", "b")]
    assert c.expire(1_200, TOPICS) == [("g", "a")]
    group = c.group("g")
    assert group is not None and group.state == "Empty"


_OPS = st.lists(
    st.tuples(st.sampled_from(["join", "beat", "leave", "tick"]), st.integers(0, 3), st.integers(0, 3_000)),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(_OPS)
def test_no_partition_is_ever_owned_by_two_members(ops: list[tuple[str, int, int]]) -> None:
    """Clients that own exactly what their last response gave them never overlap, and once
    everyone heartbeats in a quiet group, every partition is owned."""
    c = ConsumerGroupCoordinator(ConsumerConfig(session_timeout_ms=5_000))
    now = 0
    epochs: dict[int, int] = {}
    owned: dict[int, Assignment] = {}

    def check() -> None:
        seen: set[int] = set()
        for a in owned.values():
            mine = set(a.get(T, frozenset()))
            assert not (mine & seen)
            seen |= mine

    for op, who, step in ops:
        now += step
        name = f"m{who}"
        try:
            if op == "join" and who not in epochs:
                epochs[who], got = beat(c, name, 0, now=now, owned={})
                owned[who] = got or {}
            elif op == "beat" and who in epochs:
                epochs[who], got = beat(c, name, epochs[who], now=now, owned=owned[who], topics=None)
                if got is not None:
                    owned[who] = got
            elif op == "leave" and who in epochs:
                beat(c, name, -1, now=now)
                del epochs[who], owned[who]
            elif op == "tick":
                for gid, mid in c.expire(now, TOPICS):
                    assert gid == "g"
                    gone = int(mid[1:])
                    epochs.pop(gone, None)
                    owned.pop(gone, None)
        except ClassicRequestError:
            epochs.pop(who, None)
            owned.pop(who, None)
        check()
    for _ in range(4):  # a quiet group converges
        for who in list(epochs):
            epochs[who], got = beat(c, f"m{who}", epochs[who], now=now, owned=owned[who], topics=None)
            if got is not None:
                owned[who] = got
            check()
    if epochs:
        assert sorted(p for a in owned.values() for p in a.get(T, frozenset())) == list(range(6))


def _replayed(
    c: ConsumerGroupCoordinator, records: list[CoordinatorRecord], now: int
) -> ConsumerGroupCoordinator:
    fresh = ConsumerGroupCoordinator(ConsumerConfig(session_timeout_ms=5_000))
    for record in records:
        fresh.replay(record.key, record.value)
    fresh.loaded(now)
    return fresh


@settings(max_examples=100, deadline=None)
@given(_OPS)
def test_replaying_the_records_gives_the_live_groups(ops: list[tuple[str, int, int]]) -> None:
    """After any history, a coordinator rebuilt from the records it wrote holds the same groups,
    members, epochs, assignments and targets, and answers the next heartbeat the same way."""
    c = ConsumerGroupCoordinator(ConsumerConfig(session_timeout_ms=5_000))
    records: list[CoordinatorRecord] = []
    now = 0
    epochs: dict[int, int] = {}
    for op, who, step in ops:
        now += step
        try:
            if op == "join" and who not in epochs:
                epochs[who], _ = beat(c, f"m{who}", 0, now=now, owned={})
            elif op == "beat" and who in epochs:
                epochs[who], _ = beat(c, f"m{who}", epochs[who], now=now, topics=None)
            elif op == "leave" and who in epochs:
                beat(c, f"m{who}", -1, now=now)
                del epochs[who]
            elif op == "tick":
                for _, mid in c.expire(now, TOPICS):
                    epochs.pop(int(mid[1:]), None)
        except ClassicRequestError:
            epochs.pop(who, None)
        records += c.take_records()
    replayed = _replayed(c, records, now)
    assert replayed._durable("g") == c._durable("g")
    for who in sorted(epochs):
        live = beat(c, f"m{who}", epochs[who], now=now, topics=None)
        again = beat(replayed, f"m{who}", epochs[who], now=now, topics=None)
        assert live == again
