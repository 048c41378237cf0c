"""Coordinator side of AlterShareGroupOffsets and DeleteShareGroupOffsets: emptiness, epochs, records."""

from __future__ import annotations

import uuid

import pytest

from shareq.coordinators.group import (
    GroupErrorCode,
    GroupRequestError,
    HeartbeatRequest,
    ShareGroupCoordinator,
    TopicMetadata,
    TopicPartitions,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
IMAGE = {"a": TopicMetadata(topic_id=T1, partitions=2), "b": TopicMetadata(topic_id=T2, partitions=1)}


def code_of(fn: object, *args: object) -> GroupErrorCode:
    with pytest.raises(GroupRequestError) as info:
        fn(*args)  # type: ignore[operator]
    return info.value.code


def join(c: ShareGroupCoordinator, group: str = "g") -> None:
    c.heartbeat(
        HeartbeatRequest(group_id=group, member_id="m", member_epoch=0, subscribed_topic_names=("a",)),
        now_ms=0,
        topics=IMAGE,
    )


def replayed(c: ShareGroupCoordinator, records: list[tuple[bytes, bytes | None]]) -> ShareGroupCoordinator:
    fresh = ShareGroupCoordinator(c.broker)
    for key, value in records:
        fresh.replay(key, value)
    assert fresh.durable_state() == c.durable_state()
    return fresh


def test_alter_creates_the_group_with_ever_newer_state_epochs() -> None:
    c = ShareGroupCoordinator()
    log: list[tuple[bytes, bytes | None]] = []
    records, first = c.prepare_alter_offsets("g")
    log += [(r.key, r.value) for r in records]
    assert c.group_state("g").value == "Empty"
    done = (TopicPartitions(topic_id=T1, topic_name="a", partitions=(0, 1)),)
    log += [(r.key, r.value) for r in c.initialize_complete("g", done)]
    records, second = c.prepare_alter_offsets("g")
    log += [(r.key, r.value) for r in records]
    assert second > first
    assert c.initialized_partitions("g") == done
    replayed(c, log)


def test_alter_refuses_members_other_types_and_empty_ids() -> None:
    c = ShareGroupCoordinator()
    join(c)
    assert code_of(c.prepare_alter_offsets, "g") is GroupErrorCode.NON_EMPTY_GROUP
    c.register_group_type("classic-group", "classic")
    assert code_of(c.prepare_alter_offsets, "classic-group") is GroupErrorCode.GROUP_ID_NOT_FOUND
    assert code_of(c.prepare_alter_offsets, "") is GroupErrorCode.INVALID_GROUP_ID


def test_delete_offsets_forgets_topics_of_an_empty_group() -> None:
    c = ShareGroupCoordinator()
    log: list[tuple[bytes, bytes | None]] = []
    records, _ = c.prepare_alter_offsets("g")
    log += [(r.key, r.value) for r in records]
    both = (
        TopicPartitions(topic_id=T1, topic_name="a", partitions=(0, 1)),
        TopicPartitions(topic_id=T2, topic_name="b", partitions=(0,)),
    )
    log += [(r.key, r.value) for r in c.initialize_complete("g", both)]
    assert c.delete_offsets("g", [uuid.UUID(int=9)]) == ()
    log += [(r.key, r.value) for r in c.delete_offsets("g", [T1])]
    assert c.initialized_partitions("g") == both[1:]
    replayed(c, log)
    assert code_of(c.check_offsets_deletable, "nobody") is GroupErrorCode.GROUP_ID_NOT_FOUND
    assert code_of(c.delete_offsets, "nobody", [T2]) is GroupErrorCode.GROUP_ID_NOT_FOUND
    join(c)
    assert code_of(c.delete_offsets, "g", [T2]) is GroupErrorCode.NON_EMPTY_GROUP
    assert c.initialized_partitions("g") == both[1:]
