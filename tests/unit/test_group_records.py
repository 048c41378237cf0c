"""Durable group records: encoding round trips and replay reproducing the coordinator state."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shareq.coordinators.group import (
    CoordinatorRecord,
    GroupRequestError,
    GroupStateError,
    HeartbeatRequest,
    ShareGroupCoordinator,
    TopicMetadata,
)
from shareq.coordinators.group.records import (
    GroupConfigValue,
    GroupMetadataValue,
    InitializedTopic,
    PartitionMetadataValue,
    RecordType,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    record_type_of,
)

text = st.text(max_size=20)
values = st.one_of(
    st.builds(GroupMetadataValue, group_type=text, group_epoch=st.integers(0, 2**31 - 1)),
    st.builds(
        PartitionMetadataValue,
        initialized=st.lists(
            st.builds(
                InitializedTopic,
                topic_id=st.uuids(),
                topic_name=text,
                partitions=st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple),
            ),
            max_size=4,
        ).map(tuple),
    ),
    st.builds(GroupConfigValue, configs=st.lists(st.tuples(text, text), max_size=4).map(tuple)),
)


@settings(max_examples=200)
@given(values, text)
def test_round_trip(
    value: GroupMetadataValue | PartitionMetadataValue | GroupConfigValue, group: str
) -> None:
    rtype = record_type_of(value)
    assert decode_key(encode_key(rtype, group)) == (rtype, group)
    assert decode_value(rtype, encode_value(value)) == value


def test_corrupt_records_are_local_errors() -> None:
    key = encode_key(RecordType.GROUP_METADATA, "g")
    with pytest.raises(GroupStateError):
        decode_key(key[:-1])
    with pytest.raises(GroupStateError):
        decode_key(b"\x00\x09\x00\x00\x00\x01g")
    raw = encode_value(GroupMetadataValue(group_type="share", group_epoch=3))
    with pytest.raises(GroupStateError):
        decode_value(RecordType.GROUP_METADATA, raw + b"\x00")
    with pytest.raises(GroupStateError):
        decode_value(RecordType.GROUP_METADATA, b"\x00\x07" + raw[2:])


T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)
IMAGE = {"a": TopicMetadata(topic_id=T1, partitions=2), "b": TopicMetadata(topic_id=T2, partitions=3)}

ops = st.lists(
    st.tuples(
        st.sampled_from(["join", "beat", "leave", "expire", "init", "config", "delete", "drop_b"]),
        st.sampled_from(["g1", "g2"]),
        st.sampled_from(["m1", "m2", "m3"]),
        st.sampled_from([("a",), ("b",), ("a", "b")]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_replay_reproduces_durable_state(script: list[tuple[str, str, str, tuple[str, ...]]]) -> None:
    live = ShareGroupCoordinator()
    log: list[CoordinatorRecord] = []
    pending = []
    image = dict(IMAGE)
    now = 0
    for op, group, member, topics in script:
        now += 1_000
        try:
            if op in ("join", "beat", "leave"):
                epoch = {"join": 0, "leave": -1}.get(op)
                if epoch is None:
                    found = live.member_assignment(group, member)
                    if found is None:
                        continue
                    epoch = next(
                        m.member_epoch for m in live.describe(group).members if m.member_id == member
                    )
                res = live.heartbeat(
                    HeartbeatRequest(
                        group_id=group,
                        member_id=member,
                        member_epoch=epoch,
                        subscribed_topic_names=topics if op == "join" else None,
                    ),
                    now_ms=now,
                    topics=image,
                )
                log += res.records
                if res.initialize:
                    pending.append(res.initialize)
            elif op == "expire":
                log += live.expire(now + 45_000).records
            elif op == "init" and pending:
                init = pending.pop(0)
                log += live.initialize_complete(init.group_id, init.topics)
            elif op == "config":
                log += live.alter_configs(group, {"share.delivery.count.limit": str(2 + len(topics))})
            elif op == "delete":
                log += live.delete(group).records
            elif op == "drop_b":
                image.pop("b", None)
                log += live.metadata_changed(image).records
        except GroupRequestError:
            pass
    restored = ShareGroupCoordinator()
    for record in log:
        restored.replay(record.key, record.value)
    assert restored.durable_state() == live.durable_state()
    # A compacted log keeps the last value of each key at its offset: replaying that is enough.
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, record in enumerate(log):
        last[record.key] = (offset, record.value)
    compacted = ShareGroupCoordinator()
    for key, (_, value) in sorted(last.items(), key=lambda kv: kv[1][0]):
        if value is not None:
            compacted.replay(key, value)
    assert compacted.durable_state() == live.durable_state()


def test_restart_keeps_epochs_monotonic_and_fences_old_members() -> None:
    live = ShareGroupCoordinator()
    res = live.heartbeat(
        HeartbeatRequest(group_id="g", member_id="m1", member_epoch=0, subscribed_topic_names=("a",)),
        now_ms=0,
        topics=IMAGE,
    )
    assert res.initialize is not None
    log = [*res.records, *live.initialize_complete("g", res.initialize.topics)]
    restored = ShareGroupCoordinator()
    for r in log:
        restored.replay(r.key, r.value)
    desc = restored.describe("g")
    assert desc.members == () and desc.group_epoch == live.describe("g").group_epoch
    assert restored.initialized_partitions("g") == live.initialized_partitions("g")
    with pytest.raises(GroupRequestError):
        restored.heartbeat(
            HeartbeatRequest(group_id="g", member_id="m1", member_epoch=res.member_epoch),
            now_ms=1,
            topics=IMAGE,
        )
    again = restored.heartbeat(
        HeartbeatRequest(group_id="g", member_id="m1", member_epoch=0, subscribed_topic_names=("a",)),
        now_ms=1,
        topics=IMAGE,
    )
    assert again.member_epoch > desc.group_epoch
    assert again.initialize is None  # state already initialized before the restart
    assert again.assignment is not None and again.assignment[0].partitions == (0, 1)
