"""The classic group coordinator, driven with explicit time (no I/O, no sleeps)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.classic import (
    RECORD_TYPES,
    ClassicConfig,
    ClassicErrorCode,
    ClassicGroupCoordinator,
    ClassicGroupState,
    ClassicRequestError,
    ClassicResult,
    ConsumerOffsets,
    JoinCompleted,
    JoinRequest,
    JoinResponse,
    LeavingMember,
    OffsetCommit,
    Protocol,
    SyncCompleted,
    SyncRequest,
    SyncResponse,
)
from shareq.coordinators.classic.records import (
    ClassicGroupValue,
    ClassicMemberValue,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_offset_value,
    group_key,
    offset_key,
)
from shareq.coordinators.classic.subscription import subscribed_topics
from shareq.coordinators.consumer.records import RECORD_TYPES as CONSUMER_RECORD_TYPES
from shareq.coordinators.group import ShareGroupCoordinator
from shareq.coordinators.group.records import FOREIGN_RECORD_TYPES

E = ClassicErrorCode
S = ClassicGroupState
SESSION = 10_000
REBALANCE = 30_000
RANGE = (Protocol(name="range", metadata=b"r"),)


def coordinator(delay: int = 0) -> ClassicGroupCoordinator:
    ids = itertools.count(1)
    return ClassicGroupCoordinator(
        ClassicConfig(initial_rebalance_delay_ms=delay), new_member_id=lambda client: f"{client}-{next(ids)}"
    )


def join(
    c: ClassicGroupCoordinator,
    member_id: str = "",
    *,
    now: int = 0,
    client: str = "c",
    instance: str | None = None,
    protocols: tuple[Protocol, ...] = RANGE,
    protocol_type: str = "consumer",
) -> ClassicResult:
    return c.join(
        JoinRequest(
            group_id="g",
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout_ms=SESSION,
            rebalance_timeout_ms=REBALANCE,
            client_id=client,
        ),
        now_ms=now,
    )


def sync(
    c: ClassicGroupCoordinator,
    member_id: str,
    generation: int,
    *,
    now: int = 0,
    assignments: tuple[tuple[str, bytes], ...] = (),
    instance: str | None = None,
) -> ClassicResult:
    return c.sync(
        SyncRequest(
            group_id="g",
            member_id=member_id,
            generation=generation,
            group_instance_id=instance,
            assignments=assignments,
        ),
        now_ms=now,
    )


def joined(result: ClassicResult) -> dict[str, JoinResponse]:
    return {x.member_id: x.response for x in result.completions if isinstance(x, JoinCompleted)}


def synced(result: ClassicResult) -> dict[str, SyncResponse]:
    return {x.member_id: x.response for x in result.completions if isinstance(x, SyncCompleted)}


def new_member(c: ClassicGroupCoordinator, *, now: int = 0, client: str = "c") -> tuple[str, ClassicResult]:
    first = join(c, now=now, client=client)
    assert isinstance(first.response, JoinResponse)
    assert first.response.error is E.MEMBER_ID_REQUIRED
    member_id = first.response.member_id
    return member_id, join(c, member_id, now=now, client=client)


def stable_group(c: ClassicGroupCoordinator, *clients: str) -> dict[str, str]:
    """Members joined together and synced: client -> member id."""
    ids: dict[str, str] = {}
    for client in clients:
        first = join(c, client=client)
        assert isinstance(first.response, JoinResponse)
        ids[client] = first.response.member_id
    results = [join(c, ids[client], client=client) for client in clients]
    responses = joined(results[-1]) if len(clients) > 1 else joined(results[0])
    group = c.group("g")
    assert group is not None and group.state is S.COMPLETING_REBALANCE
    leader = group.leader
    assert leader is not None
    plan = tuple((mid, mid.encode()) for mid in ids.values())
    for mid in ids.values():
        if mid != leader:
            sync(c, mid, group.generation)
    sync(c, leader, group.generation, assignments=plan)
    assert group.state is S.STABLE
    assert responses
    return ids


def test_first_join_requires_a_member_id_then_forms_generation_one() -> None:
    c = coordinator()
    first = join(c, client="app")
    assert first.response == JoinResponse(error=E.MEMBER_ID_REQUIRED, member_id="app-1")
    second = join(c, "app-1", client="app")
    assert second.response is None and second.member_id == "app-1"
    response = joined(second)["app-1"]
    assert (response.error, response.generation, response.leader, response.protocol_name) == (
        E.NONE,
        1,
        "app-1",
        "range",
    )
    assert [m.member_id for m in response.members] == ["app-1"]
    assert [r.key for r in second.records]  # the generation is recorded
    result = sync(c, "app-1", 1, assignments=(("app-1", b"A"),))
    assert result.response == SyncResponse(protocol_type="consumer", protocol_name="range", assignment=b"A")
    assert c.heartbeat("g", "app-1", 1, now_ms=1) is E.NONE


def test_a_second_member_triggers_a_rebalance_and_followers_wait_for_the_leader() -> None:
    c = coordinator()
    ids = stable_group(c, "a")
    a = ids["a"]
    b, result = new_member(c, client="b")
    assert result.response is None and not joined(result)  # a has not rejoined yet
    group = c.group("g")
    assert group is not None and group.state is S.PREPARING_REBALANCE
    assert c.heartbeat("g", a, 1, now_ms=5) is E.REBALANCE_IN_PROGRESS
    with pytest.raises(ClassicRequestError) as err:
        sync(c, a, 1)
    assert err.value.code is E.REBALANCE_IN_PROGRESS
    result = join(c, a, client="a")
    responses = joined(result)
    assert set(responses) == {a, b}
    assert {r.generation for r in responses.values()} == {2}
    assert len(responses[a].members) == 2 and responses[b].members == ()  # a stays leader
    parked = sync(c, b, 2)
    assert parked.response is None
    done = sync(c, a, 2, assignments=((a, b"x"), (b, b"y")))
    assert synced(done)[b].assignment == b"y"
    assert isinstance(done.response, SyncResponse) and done.response.assignment == b"x"


def test_fencing_errors() -> None:
    c = coordinator()
    a = stable_group(c, "a")["a"]
    cases = [
        (lambda: c.heartbeat("g", a, 7, now_ms=0), E.ILLEGAL_GENERATION),
        (lambda: c.heartbeat("g", "nobody", 1, now_ms=0), E.UNKNOWN_MEMBER_ID),
        (lambda: c.heartbeat("other", a, 1, now_ms=0), E.UNKNOWN_MEMBER_ID),
        (lambda: sync(c, a, 0), E.ILLEGAL_GENERATION),
        (lambda: join(c, "nobody"), E.UNKNOWN_MEMBER_ID),
        (lambda: join(c, protocol_type="connect"), E.INCONSISTENT_GROUP_PROTOCOL),
        (lambda: join(c, protocols=(Protocol(name="other", metadata=b""),)), E.INCONSISTENT_GROUP_PROTOCOL),
        (lambda: c.validate_offset_commit("g", 3, a, None), E.ILLEGAL_GENERATION),
        (lambda: c.validate_offset_commit("g", -1, "", None), E.UNKNOWN_MEMBER_ID),
    ]
    for call, code in cases:
        with pytest.raises(ClassicRequestError) as err:
            call()
        assert err.value.code is code
    c.validate_offset_commit("g", 1, a, None)


def test_session_timeout_removes_a_member_and_rebalances() -> None:
    c = coordinator()
    ids = stable_group(c, "a", "b")
    assert c.next_deadline() == SESSION
    assert c.heartbeat("g", ids["a"], 1, now_ms=4_000) is E.NONE
    assert c.next_deadline() == SESSION  # b's session
    result = c.expire(SESSION)
    group = c.group("g")
    assert group is not None and set(group.members) == {ids["a"]}
    assert group.state is S.PREPARING_REBALANCE
    assert result.completions == ()
    rejoin = join(c, ids["a"], now=SESSION + 1, client="a")
    response = joined(rejoin)[ids["a"]]
    assert response.generation == 2 and [m.member_id for m in response.members] == [ids["a"]]


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    c = coordinator()
    ids = stable_group(c, "a", "b")
    b_new, _ = new_member(c, now=100, client="n")
    join(c, ids["a"], now=200, client="a")
    for t in (9_000, 18_000, 27_000):  # b stays alive but never rejoins
        assert c.heartbeat("g", ids["b"], 1, now_ms=t) is E.REBALANCE_IN_PROGRESS
    assert c.next_deadline() == 100 + REBALANCE
    result = c.expire(100 + REBALANCE)
    responses = joined(result)
    assert set(responses) == {ids["a"], b_new}
    group = c.group("g")
    assert group is not None and ids["b"] not in group.members and group.generation == 2


def test_sync_timeout_removes_members_that_never_sync() -> None:
    c = coordinator()
    ids = {client: join(c, client=client).response.member_id for client in "ab"}  # type: ignore[union-attr]
    join(c, ids["a"], client="a")
    result = join(c, ids["b"], client="b")
    assert set(joined(result)) == set(ids.values())
    follower = next(m for m in ids.values() if m != c.group("g").leader)  # type: ignore[union-attr]
    assert sync(c, follower, 1).response is None
    leader = c.group("g").leader  # type: ignore[union-attr]
    assert leader is not None
    for t in (9_000, 18_000, 27_000):  # the leader heartbeats but never sends SyncGroup
        assert c.heartbeat("g", leader, 1, now_ms=t) is E.NONE
    assert c.next_deadline() == REBALANCE
    expired = c.expire(REBALANCE)
    assert synced(expired)[follower].error is E.REBALANCE_IN_PROGRESS
    group = c.group("g")
    assert group is not None and set(group.members) == {follower}


def test_initial_rebalance_delay_waits_and_extends_for_new_members() -> None:
    c = coordinator(delay=3_000)
    a, _ = new_member(c, client="a")
    assert c.next_deadline() == 3_000
    b, result = new_member(c, now=2_000, client="b")
    assert not joined(result)
    assert c.expire(3_000).completions == ()  # extended: b arrived during the delay
    assert c.next_deadline() == 6_000
    responses = joined(c.expire(6_000))
    assert set(responses) == {a, b} and responses[a].generation == 1


def test_batched_leave_answers_per_member() -> None:
    c = coordinator()
    ids = stable_group(c, "a", "b")
    result = c.leave(
        "g",
        (
            LeavingMember(member_id=ids["a"]),
            LeavingMember(member_id="ghost"),
            LeavingMember(member_id=ids["b"]),
        ),
        now_ms=10,
    )
    assert result.errors == (E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE)
    group = c.group("g")
    assert group is not None and group.state is S.EMPTY and group.generation == 2
    assert c.leave("missing", (LeavingMember(member_id="x"),), now_ms=0).errors == (E.UNKNOWN_MEMBER_ID,)


def test_static_member_rejoins_without_a_rebalance_and_fences_its_old_id() -> None:
    c = coordinator()
    first = join(c, client="s", instance="i-1")
    assert first.response is None  # static members skip MEMBER_ID_REQUIRED
    old = first.member_id
    sync(c, old, 1, assignments=((old, b"P"),))
    again = join(c, client="s", instance="i-1", now=50)
    assert isinstance(again.response, JoinResponse)
    new = again.response.member_id
    assert new != old and again.response.generation == 1 and again.response.skip_assignment
    group = c.group("g")
    assert group is not None and group.state is S.STABLE
    assert isinstance(sync(c, new, 1, instance="i-1").response, SyncResponse)
    with pytest.raises(ClassicRequestError) as err:
        c.heartbeat("g", old, 1, group_instance_id="i-1", now_ms=60)
    assert err.value.code is E.FENCED_INSTANCE_ID
    leave = c.leave("g", (LeavingMember(member_id=old, group_instance_id="i-1"),), now_ms=70)
    assert leave.errors == (E.FENCED_INSTANCE_ID,)


def test_protocol_selection_takes_the_most_voted_common_protocol() -> None:
    c = coordinator()
    rr = Protocol(name="roundrobin", metadata=b"")
    rg = Protocol(name="range", metadata=b"")
    a = join(c, client="a").response.member_id  # type: ignore[union-attr]
    b = join(c, client="b").response.member_id  # type: ignore[union-attr]
    d = join(c, client="d").response.member_id  # type: ignore[union-attr]
    join(c, a, client="a", protocols=(rg, rr))
    join(c, b, client="b", protocols=(rr, rg))
    result = join(c, d, client="d", protocols=(rr,))
    assert {r.protocol_name for r in joined(result).values()} == {"roundrobin"}


def test_offsets_commit_fetch_delete_and_records() -> None:
    offsets = ConsumerOffsets(metadata_max_bytes=8)
    records, errors = offsets.commit(
        "g",
        [
            OffsetCommit(topic="t", partition=0, offset=5, metadata="m"),
            OffsetCommit(topic="t", partition=1, offset=1, metadata="x" * 9),
        ],
        now_ms=7,
    )
    assert errors == [E.NONE, E.OFFSET_METADATA_TOO_LARGE]
    assert len(records) == 1 and records[0].value is not None
    replayed = ConsumerOffsets()
    key = decode_key(records[0].key)
    replayed.apply(key.group_id, key.topic, key.partition, decode_offset_value(records[0].value))
    assert replayed.fetch("g") == offsets.fetch("g")
    assert offsets.fetch("g")[("t", 0)] == OffsetValue(
        offset=5, leader_epoch=-1, metadata="m", commit_timestamp_ms=7
    )
    tombstones = offsets.delete_group("g")
    assert [r.value for r in tombstones] == [None] and not offsets.has_offsets("g")


def test_record_codecs_round_trip_and_share_replay_skips_them() -> None:
    value = ClassicGroupValue(protocol_type="consumer", generation=4, protocol_name="range", leader="m")
    assert decode_group_value(encode_group_value(value)) == value
    member = ClassicMemberValue(
        member_id="m",
        group_instance_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        session_timeout_ms=6000,
        rebalance_timeout_ms=9000,
        metadata=b"\x00sub",
        assignment=b"",
    )
    stable = ClassicGroupValue(
        protocol_type="consumer", generation=5, protocol_name="range", leader="m", members=(member,)
    )
    assert decode_group_value(encode_group_value(stable)) == stable
    version0 = b"\x00\x00" + encode_group_value(value)[2:-4]  # a record written before members were kept
    assert decode_group_value(version0) == value
    off = OffsetValue(offset=2**40, leader_epoch=3, metadata="é", commit_timestamp_ms=9)
    assert decode_offset_value(encode_offset_value(off)) == off
    assert decode_key(offset_key("g", "t", 3)).partition == 3
    assert RECORD_TYPES | CONSUMER_RECORD_TYPES == FOREIGN_RECORD_TYPES
    share = ShareGroupCoordinator()
    share.replay(group_key("g"), encode_group_value(value))
    share.replay(offset_key("g", "t", 0), encode_offset_value(off))
    assert share.durable_state() == {"groups": {}, "configs": {}}


def test_subscription_topics_are_read_from_consumer_metadata() -> None:
    metadata = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc" + b"\xff\xff\xff\xff"
    assert subscribed_topics(metadata) == frozenset({"a", "bc"})
    assert subscribed_topics(b"\x00") == frozenset()


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "sync", "heartbeat", "leave", "tick"]),
        st.integers(min_value=0, max_value=3),
        st.integers(min_value=0, max_value=20_000),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(_OPS, st.sampled_from([0, 3_000]))
def test_random_operations_keep_the_invariants(ops: list[tuple[str, int, int]], delay: int) -> None:
    """Whatever clients do: every parked request is answered at most once, generations only grow,
    a generation has one leader who gets the member list, and a Stable group parks nothing."""
    c = coordinator(delay=delay)
    now = 0
    ids: dict[int, str] = {}
    parked: set[tuple[str, str]] = set()
    leaders: dict[int, str] = {}
    generation = 0

    def absorb(result: ClassicResult, kind: str = "", member: str = "") -> None:
        nonlocal generation
        if result.response is None and kind:
            parked.add((kind, member))
        for done in result.completions:
            key = ("join" if isinstance(done, JoinCompleted) else "sync", done.member_id)
            assert key in parked, key
            parked.discard(key)
            if isinstance(done, JoinCompleted) and done.response.error is E.NONE:
                gen = done.response.generation
                assert leaders.setdefault(gen, done.response.leader) == done.response.leader
                assert bool(done.response.members) == (done.member_id == done.response.leader)

    for op, who, step in ops:
        now += step
        group = c.group("g")
        try:
            if op == "join":
                result = join(c, ids.get(who, ""), now=now, client=f"c{who}")
                if isinstance(result.response, JoinResponse) and result.response.member_id:
                    ids[who] = result.response.member_id
                else:
                    ids[who] = result.member_id
                absorb(result, "join", result.member_id)
            elif op == "sync" and who in ids and group is not None:
                plan = tuple((m, b"x") for m in group.members)
                result = sync(c, ids[who], group.generation, now=now, assignments=plan)
                absorb(result, "sync", ids[who])
            elif op == "heartbeat" and who in ids and group is not None:
                c.heartbeat("g", ids[who], group.generation, now_ms=now)
            elif op == "leave" and who in ids:
                absorb(c.leave("g", (LeavingMember(member_id=ids.pop(who)),), now_ms=now))
            else:
                deadline = c.next_deadline()
                if deadline is not None:
                    now = max(now, deadline)
                    absorb(c.expire(now))
        except ClassicRequestError:
            pass
        group = c.group("g")
        if group is not None:
            assert group.generation >= generation
            generation = group.generation
            if group.state is S.STABLE:
                assert not any(m.awaiting_join or m.awaiting_sync for m in group.members.values())
            if group.members:
                assert group.leader in group.members
            deadline = c.next_deadline()
            assert deadline is None or deadline >= 0
