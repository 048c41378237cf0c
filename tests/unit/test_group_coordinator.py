"""Share-group membership: join, leave, epochs, fencing, initialization, expiry, admin calls."""

from __future__ import annotations

import uuid

import pytest

from shareq.coordinators.group import (
    CoordinatorRecord,
    GroupErrorCode,
    GroupRequestError,
    HeartbeatRequest,
    HeartbeatResult,
    ShareBrokerConfig,
    ShareGroupCoordinator,
    TopicMetadata,
    TopicPartitions,
)
from shareq.coordinators.group.coordinator import FORMING_WINDOW_MS

# Most tests are about membership, not pacing: the target is recomputed at every change
# (share.assignment.interval.ms 0). The interval has tests of its own at the end.
AT_ONCE = ShareBrokerConfig(assignment_interval_ms=0)
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
TOPICS = {
    "orders": TopicMetadata(topic_id=T1, partitions=3),
    "audit": TopicMetadata(topic_id=T2, partitions=1),
}


def hb(
    c: ShareGroupCoordinator,
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None = None,
    *,
    now: int = 0,
    group: str = "g",
    image: dict[str, TopicMetadata] = TOPICS,
) -> HeartbeatResult:
    req = HeartbeatRequest(
        group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics, client_id="cli"
    )
    return c.heartbeat(req, now_ms=now, topics=image)


def join_initialized(c: ShareGroupCoordinator, member: str, topics: tuple[str, ...], now: int = 0) -> int:
    """Join and complete any initialization; return the member epoch after a follow-up heartbeat."""
    res = hb(c, member, 0, topics, now=now)
    if res.initialize:
        c.initialize_complete(res.initialize.group_id, res.initialize.topics)
    return hb(c, member, res.member_epoch, now=now).member_epoch


def owned(res: HeartbeatResult) -> set[tuple[str, int]]:
    assert res.assignment is not None
    return {(tp.topic_name, p) for tp in res.assignment for p in tp.partitions}


def error_of(fn: object, *args: object, **kwargs: object) -> GroupErrorCode:
    with pytest.raises(GroupRequestError) as info:
        fn(*args, **kwargs)  # type: ignore[operator]
    return info.value.code


def test_join_initializes_then_assigns() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    first = hb(c, "m1", 0, ("orders",))
    assert first.member_epoch == 1
    assert first.assignment == ()  # nothing is initialized yet
    assert first.heartbeat_interval_ms == 5000
    assert first.initialize is not None
    assert first.initialize.state_epoch == 1
    assert first.initialize.topics == (
        TopicPartitions(topic_id=T1, topic_name="orders", partitions=(0, 1, 2)),
    )
    assert first.records  # the group is reserved durably
    # A heartbeat while initialization is pending does not ask again.
    again = hb(c, "m1", 1)
    assert again.initialize is None and again.assignment is None and again.member_epoch == 1

    records = c.initialize_complete("g", first.initialize.topics)
    assert records
    res = hb(c, "m1", 1)
    assert res.member_epoch == 2
    assert owned(res) == {("orders", 0), ("orders", 1), ("orders", 2)}
    # Unchanged assignment is not resent.
    res = hb(c, "m1", 2)
    assert res.assignment is None and res.member_epoch == 2


def test_second_member_rebalances_and_first_sees_it() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    e1 = join_initialized(c, "m1", ("orders",))
    r2 = hb(c, "m2", 0, ("orders",))
    assert r2.member_epoch == e1 + 1
    assert r2.initialize is None
    r1 = hb(c, "m1", e1)
    assert r1.member_epoch == r2.member_epoch
    assert owned(r1).isdisjoint(owned(r2))
    assert owned(r1) | owned(r2) == {("orders", 0), ("orders", 1), ("orders", 2)}


def test_join_requires_subscription() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    assert error_of(hb, c, "m1", 0, None) is GroupErrorCode.INVALID_REQUEST
    assert error_of(hb, c, "m1", 0, ()) is GroupErrorCode.INVALID_REQUEST
    assert error_of(hb, c, "", 0, ("orders",)) is GroupErrorCode.INVALID_REQUEST
    assert error_of(hb, c, "m1", -2, ("orders",)) is GroupErrorCode.INVALID_REQUEST
    assert error_of(hb, c, "m1", 0, ("orders",), group="") is GroupErrorCode.INVALID_REQUEST  # as Kafka
    assert c.list_groups() == ()


def test_unknown_group_and_member_and_fencing() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    assert error_of(hb, c, "m1", 3) is GroupErrorCode.GROUP_ID_NOT_FOUND
    joined = hb(c, "m1", 0, ("orders",))
    assert joined.initialize is not None
    c.initialize_complete(joined.initialize.group_id, joined.initialize.topics)
    first = joined.member_epoch
    epoch = hb(c, "m1", first).member_epoch
    assert epoch > first
    assert error_of(hb, c, "ghost", 1) is GroupErrorCode.UNKNOWN_MEMBER_ID
    assert error_of(hb, c, "m1", epoch + 1) is GroupErrorCode.FENCED_MEMBER_EPOCH
    # As Kafka: the previous epoch is accepted (the response that moved the member on may have been
    # lost) and answered with the current epoch and the assignment; anything older is fenced.
    again = hb(c, "m1", first)
    assert again.member_epoch == epoch and again.assignment is not None
    # A failed heartbeat changed nothing.
    assert hb(c, "m1", epoch).member_epoch == epoch
    moved = hb(c, "m1", epoch, ("orders", "audit")).member_epoch  # a new subscription: next epoch
    assert moved == epoch + 1
    assert hb(c, "m1", epoch).member_epoch == moved
    assert error_of(hb, c, "m1", first) is GroupErrorCode.FENCED_MEMBER_EPOCH


def test_second_heartbeat_with_null_subscription_keeps_it() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    epoch = join_initialized(c, "m1", ("orders",))
    desc = c.describe("g")
    assert desc.members[0].subscribed_topic_names == ("orders",)
    res = hb(c, "m1", epoch, None)
    assert res.member_epoch == epoch and res.records == ()


def test_subscription_change_bumps_epoch_and_initializes_new_topic() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    epoch = join_initialized(c, "m1", ("orders",))
    res = hb(c, "m1", epoch, ("orders", "audit"))
    assert res.member_epoch == epoch + 1
    assert res.initialize is not None
    assert res.initialize.topics == (TopicPartitions(topic_id=T2, topic_name="audit", partitions=(0,)),)


def test_leave_removes_member_and_reports_partitions() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    epoch = join_initialized(c, "m1", ("orders",))
    res = hb(c, "m1", -1)
    assert res.member_epoch == -1 and res.assignment is None
    assert res.removed is not None and res.removed.reason == "left"
    assert res.removed.assignment == (
        TopicPartitions(topic_id=T1, topic_name="orders", partitions=(0, 1, 2)),
    )
    desc = c.describe("g")
    assert desc.group_state == "Empty" and desc.members == () and desc.group_epoch == epoch + 1
    assert error_of(hb, c, "m1", -1) is GroupErrorCode.UNKNOWN_MEMBER_ID
    assert error_of(hb, c, "m1", -1, group="nope") is GroupErrorCode.GROUP_ID_NOT_FOUND


def test_rejoin_with_epoch_zero_resends_full_assignment() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    epoch = join_initialized(c, "m1", ("orders",))
    res = hb(c, "m1", 0, ("orders",))
    assert res.member_epoch == epoch
    assert owned(res) == {("orders", 0), ("orders", 1), ("orders", 2)}


def test_group_max_size() -> None:
    c = ShareGroupCoordinator(ShareBrokerConfig(max_size=2, assignment_interval_ms=0))
    hb(c, "a", 0, ("orders",))
    hb(c, "b", 0, ("orders",))
    assert error_of(hb, c, "c", 0, ("orders",)) is GroupErrorCode.GROUP_MAX_SIZE_REACHED
    hb(c, "a", 0, ("orders",))  # an existing member may rejoin


def test_inconsistent_group_protocol_for_foreign_group() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    c.register_group_type("classic-g", "classic")
    assert (
        error_of(hb, c, "m1", 0, ("orders",), group="classic-g") is GroupErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    assert error_of(c.describe, "classic-g") is GroupErrorCode.GROUP_ID_NOT_FOUND
    hb(c, "m1", 0, ("orders",))
    assert c.group_type("g") == "share"
    assert error_of(c.register_group_type, "g", "consumer") is GroupErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_more_members_than_partitions_all_get_work() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    for m in ("a", "b", "c"):
        join_initialized(c, m, ("audit",))
    for m in ("a", "b", "c"):
        res = hb(c, m, _epoch_of(c, m))
        assert res.member_epoch == c.describe("g").assignment_epoch
    for member in c.describe("g").members:
        assert member.assignment == (TopicPartitions(topic_id=T2, topic_name="audit", partitions=(0,)),)


def _epoch_of(c: ShareGroupCoordinator, member_id: str) -> int:
    return next(m.member_epoch for m in c.describe("g").members if m.member_id == member_id)


def test_session_timeout_expires_at_exact_deadline() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    assert c.next_deadline() is None
    join_initialized(c, "m1", ("orders",), now=1_000)
    hb(c, "m2", 0, ("orders",), now=2_000)
    assert c.next_deadline() == 46_000
    assert c.expire(45_999).removed == ()
    result = c.expire(46_000)
    assert [r.member_id for r in result.removed] == ["m1"]
    assert result.removed[0].reason == "expired"
    assert result.removed[0].assignment  # m1 held partitions the shell must release
    assert result.records
    assert c.next_deadline() == 47_000
    # Heartbeats push the deadline forward.
    hb(c, "m2", _epoch_of(c, "m2"), now=40_000)
    assert c.next_deadline() == 85_000
    assert c.expire(84_999).removed == ()
    assert [r.member_id for r in c.expire(85_000).removed] == ["m2"]
    assert c.next_deadline() is None
    assert c.describe("g").group_state == "Empty"


def test_session_timeout_follows_group_config() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    c.alter_configs("g", {"share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "6000"})
    res = hb(c, "m1", 0, ("orders",), now=0)
    assert res.heartbeat_interval_ms == 6000
    assert c.next_deadline() == 50_000


def test_metadata_change_triggers_reassignment_and_initialization() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    epoch = join_initialized(c, "m1", ("orders", "later"))
    later = uuid.UUID(int=9)
    image = {**TOPICS, "later": TopicMetadata(topic_id=later, partitions=2)}
    result = c.metadata_changed(image)
    assert result.records
    assert len(result.initialize) == 1
    assert result.initialize[0].topics == (
        TopicPartitions(topic_id=later, topic_name="later", partitions=(0, 1)),
    )
    c.initialize_complete("g", result.initialize[0].topics)
    res = hb(c, "m1", epoch, image=image)
    assert ("later", 0) in owned(res) and ("later", 1) in owned(res)
    # Partitions added to an existing topic are initialized too.
    grown = {**image, "orders": TopicMetadata(topic_id=T1, partitions=4)}
    result = c.metadata_changed(grown)
    assert result.initialize[0].topics == (
        TopicPartitions(topic_id=T1, topic_name="orders", partitions=(3,)),
    )


def test_topic_deletion_drops_state_and_assignment() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    epoch = join_initialized(c, "m1", ("orders",))
    result = c.metadata_changed({"audit": TOPICS["audit"]})
    assert [d.topics for d in result.delete_state] == [
        (TopicPartitions(topic_id=T1, topic_name="orders", partitions=(0, 1, 2)),)
    ]
    res = hb(c, "m1", epoch, image={"audit": TOPICS["audit"]})
    assert res.assignment == ()
    assert c.initialized_partitions("g") == ()


def test_initialize_failed_is_retried_on_next_heartbeat() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    res = hb(c, "m1", 0, ("orders",))
    assert res.initialize is not None
    c.initialize_failed("g", res.initialize.topics)
    again = hb(c, "m1", res.member_epoch)
    assert again.initialize is not None and again.initialize.topics == res.initialize.topics


def test_describe_list_and_delete() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    assert error_of(c.describe, "g") is GroupErrorCode.GROUP_ID_NOT_FOUND
    assert error_of(c.delete, "g") is GroupErrorCode.GROUP_ID_NOT_FOUND
    join_initialized(c, "m1", ("orders",))
    desc = c.describe("g")
    assert desc.group_state == "Stable" and desc.assignor_name == "simple"
    assert desc.group_epoch == desc.assignment_epoch == desc.members[0].member_epoch
    assert desc.members[0].client_id == "cli"
    assert [(g.group_id, g.group_type, g.group_state) for g in c.list_groups()] == [("g", "share", "Stable")]
    assert error_of(c.delete, "g") is GroupErrorCode.NON_EMPTY_GROUP
    hb(c, "m1", -1)
    result = c.delete("g")
    assert all(r.value is None for r in result.records)
    assert result.delete_state[0].topics == (
        TopicPartitions(topic_id=T1, topic_name="orders", partitions=(0, 1, 2)),
    )
    assert c.list_groups() == ()
    assert c.group_type("g") is None


def test_member_assignment_lookup() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    join_initialized(c, "m1", ("orders",))
    assert c.member_assignment("g", "m1") == (
        TopicPartitions(topic_id=T1, topic_name="orders", partitions=(0, 1, 2)),
    )
    assert c.member_assignment("g", "nobody") is None
    assert c.member_assignment("nogroup", "m1") is None


def test_records_are_encoded_bytes() -> None:
    c = ShareGroupCoordinator(AT_ONCE)
    res = hb(c, "m1", 0, ("orders",))
    assert all(isinstance(r, CoordinatorRecord) and isinstance(r.key, bytes) for r in res.records)


# ----------------------------------------------------------------- share.assignment.interval.ms


def _initialized_group(c: ShareGroupCoordinator, now: int) -> int:
    """m1 alone on ``orders``, its partitions initialized and assigned; returns its epoch."""
    res = hb(c, "m1", 0, ("orders",), now=now)
    assert res.initialize is not None
    c.initialize_complete("g", res.initialize.topics)
    return res.member_epoch


def test_a_join_within_the_interval_waits_for_the_next_assignment() -> None:
    """Kafka's KIP-1263 pacing (default 1 s): m2 joins 200 ms after the last target was computed;
    it is a member at that target's epoch with nothing, and m1 keeps its partitions, until a
    heartbeat after the interval computes the next target, which then splits them."""
    c = ShareGroupCoordinator()  # the default interval, Kafka's 1,000 ms
    epoch = _initialized_group(c, now=0)
    # beyond Kafka: the target computed at the join, before initialization, gave nobody anything,
    # so it does not hold back the one that covers the initialized partitions
    settled = hb(c, "m1", epoch, now=500)
    assert owned(settled) == {("orders", 0), ("orders", 1), ("orders", 2)}
    m1_epoch = settled.member_epoch

    joined = hb(c, "m2", 0, ("orders",), now=700)
    assert joined.member_epoch == m1_epoch and joined.assignment == ()
    assert c.describe("g").group_epoch > c.describe("g").assignment_epoch
    assert hb(c, "m1", m1_epoch, now=1_499).assignment is None  # unchanged, no new epoch

    after = hb(c, "m1", m1_epoch, now=1_500)  # the interval has passed: the next target
    assert after.member_epoch == c.describe("g").group_epoch > m1_epoch
    second = hb(c, "m2", m1_epoch, now=1_550)
    assert owned(after) | owned(second) == {("orders", 0), ("orders", 1), ("orders", 2)}
    assert owned(after) and owned(second) and not owned(after) & owned(second)


def _beat(c: ShareGroupCoordinator, member: str, now: int) -> HeartbeatResult:
    """A heartbeat at the member's current epoch."""
    epoch = next(m.member_epoch for m in c.describe("g").members if m.member_id == member)
    return hb(c, member, epoch, now=now)


def test_a_leave_within_the_interval_hands_its_partitions_on_after_it() -> None:
    """m2 leaves 1 s after the last target, with a 5 s interval: m1 gets m2's partitions from the
    first heartbeat 5 s after that target, not before."""
    c = ShareGroupCoordinator(ShareBrokerConfig(assignment_interval_ms=5_000))
    _initialized_group(c, now=0)
    second = hb(c, "m2", 0, ("orders",), now=5_000)  # the interval has passed: a target for both
    first = _beat(c, "m1", 5_001)
    assert owned(first) and owned(second)
    hb(c, "m2", -1, now=6_000)
    assert _beat(c, "m1", 9_999).assignment is None
    assert owned(_beat(c, "m1", 10_000)) == {("orders", 0), ("orders", 1), ("orders", 2)}


def test_the_groups_own_interval_overrides_the_brokers() -> None:
    """``share.assignment.interval.ms`` set on the group (0 here) replaces the broker's 1 s."""
    c = ShareGroupCoordinator()
    c.alter_configs("g", {"share.assignment.interval.ms": "0"})
    epoch = _initialized_group(c, now=0)
    assert owned(hb(c, "m1", epoch, now=1)) == {("orders", 0), ("orders", 1), ("orders", 2)}
    joined = hb(c, "m2", 0, ("orders",), now=2)
    assert owned(joined)  # assigned at once


def test_members_joining_a_new_group_together_share_its_first_target() -> None:
    """A new group gathers members for its first 300 ms (FORMING_WINDOW_MS): m1 joins and its
    share-partitions are initialized at once, m2 joins 30 ms later; neither gets anything before the
    window ends (each is asked back when it does), and the first target splits the partitions."""
    c = ShareGroupCoordinator()  # the default interval, 1,000 ms
    first = hb(c, "m1", 0, ("orders",), now=0)
    assert first.initialize is not None and first.heartbeat_interval_ms == FORMING_WINDOW_MS
    c.initialize_complete("g", first.initialize.topics)
    early = hb(c, "m1", first.member_epoch, now=10)
    assert not early.assignment and early.heartbeat_interval_ms == FORMING_WINDOW_MS - 10
    joined = hb(c, "m2", 0, ("orders",), now=30)
    assert joined.assignment == () and joined.heartbeat_interval_ms == FORMING_WINDOW_MS - 30
    m1 = hb(c, "m1", early.member_epoch, now=FORMING_WINDOW_MS)
    m2 = hb(c, "m2", joined.member_epoch, now=FORMING_WINDOW_MS + 5)
    assert owned(m1) and owned(m2) and not owned(m1) & owned(m2)
    assert owned(m1) | owned(m2) == {("orders", 0), ("orders", 1), ("orders", 2)}
    assert m1.heartbeat_interval_ms == m2.heartbeat_interval_ms == 5_000


def test_a_member_joining_after_the_first_target_waits_the_interval_as_before() -> None:
    """Joins one by one are paced as before: a lone member has everything once the window ends, and a
    member joining later waits for the assignment interval, not for another window."""
    c = ShareGroupCoordinator()
    first = hb(c, "m1", 0, ("orders",), now=0)
    assert first.initialize is not None
    c.initialize_complete("g", first.initialize.topics)
    alone = hb(c, "m1", first.member_epoch, now=FORMING_WINDOW_MS)
    assert owned(alone) == {("orders", 0), ("orders", 1), ("orders", 2)}
    later = hb(c, "m2", 0, ("orders",), now=2_000)  # past the interval: assigned at once
    assert owned(later)
