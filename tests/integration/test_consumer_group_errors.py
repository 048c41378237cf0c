"""Every error a classic-group client can hit, over the wire with exact requests, answered with
Kafka's error code while other groups keep working (requests built with kio)."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Iterator
from typing import Any

import kio.index as ki
import pytest
from kio.schema.errors import ErrorCode
from kio_wire import KioConnection
from share_consumers import create_topic

from shareq.embedded import EmbeddedBroker

JOIN = sys.modules[ki.load_request_schema(11, 5).__module__]
SYNC = sys.modules[ki.load_request_schema(14, 3).__module__]
HEARTBEAT = sys.modules[ki.load_request_schema(12, 3).__module__]
LEAVE = sys.modules[ki.load_request_schema(13, 5).__module__]
COMMIT = sys.modules[ki.load_request_schema(8, 9).__module__]
COMMIT8 = sys.modules[ki.load_request_schema(8, 8).__module__]
FETCH = sys.modules[ki.load_request_schema(9, 9).__module__]
SHARE_HB = sys.modules[ki.load_request_schema(76, 1).__module__]
DESCRIBE = sys.modules[ki.load_request_schema(15, 5).__module__]


@pytest.fixture
def conn(tmp_path: Any) -> Iterator[KioConnection]:
    with EmbeddedBroker(tmp_path / "data", config={"group.initial.rebalance.delay.ms": "0"}) as broker:
        create_topic(broker.bootstrap, "t", 2)
        connection = KioConnection(broker.bootstrap)
        try:
            yield connection
        finally:
            connection.close()


def join(conn: KioConnection, group: str, member: str = "", instance: str | None = None) -> Any:
    return conn.send(
        JOIN.JoinGroupRequest(
            group_id=group,
            session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10),
            member_id=member,
            group_instance_id=instance,
            protocol_type="consumer",
            protocols=(JOIN.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00"),),
        )
    )


def sync(conn: KioConnection, group: str, member: str, generation: int, instance: str | None = None) -> Any:
    return conn.send(
        SYNC.SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=instance,
            assignments=(SYNC.SyncGroupRequestAssignment(member_id=member, assignment=b"plan"),),
        )
    )


def heartbeat(
    conn: KioConnection, group: str, member: str, generation: int, instance: str | None = None
) -> Any:
    return conn.send(
        HEARTBEAT.HeartbeatRequest(
            group_id=group, generation_id=generation, member_id=member, group_instance_id=instance
        )
    )


def commit(conn: KioConnection, group: str, member: str, generation: int, *, version: int = 9) -> ErrorCode:
    module = COMMIT if version == 9 else COMMIT8
    response = conn.send(
        module.OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member,
            group_instance_id=None,
            topics=(
                module.OffsetCommitRequestTopic(
                    name="t",
                    partitions=(
                        module.OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=7,
                            committed_leader_epoch=-1,
                            committed_metadata=None,
                        ),
                    ),
                ),
            ),
        )
    )
    code: ErrorCode = response.topics[0].partitions[0].error_code
    return code


def fetch(conn: KioConnection, group: str) -> Any:
    response = conn.send(
        FETCH.OffsetFetchRequest(
            groups=(
                FETCH.OffsetFetchRequestGroup(
                    group_id=group,
                    member_id=None,
                    member_epoch=-1,
                    topics=(FETCH.OffsetFetchRequestTopics(name="t", partition_indexes=(0,)),),
                ),
            ),
            require_stable=True,
        )
    )
    return response.groups[0]


def stable_member(conn: KioConnection, group: str) -> tuple[str, int]:
    first = join(conn, group)
    assert first.error_code == ErrorCode.member_id_required
    joined = join(conn, group, first.member_id)
    assert joined.error_code == ErrorCode.none and joined.leader == first.member_id
    synced = sync(conn, group, first.member_id, joined.generation_id)
    assert synced.error_code == ErrorCode.none and synced.assignment == b"plan"
    return first.member_id, joined.generation_id


def test_fencing_errors_leave_other_groups_working(conn: KioConnection) -> None:
    member, generation = stable_member(conn, "cg")
    assert heartbeat(conn, "cg", member, generation + 1).error_code == ErrorCode.illegal_generation
    assert heartbeat(conn, "cg", "stranger", generation).error_code == ErrorCode.unknown_member_id
    assert heartbeat(conn, "missing", member, generation).error_code == ErrorCode.unknown_member_id
    assert sync(conn, "cg", member, generation + 3).error_code == ErrorCode.illegal_generation
    assert join(conn, "cg", "stranger").error_code == ErrorCode.unknown_member_id
    assert commit(conn, "cg", member, generation + 1) == ErrorCode.illegal_generation
    assert commit(conn, "cg", "stranger", generation) == ErrorCode.unknown_member_id
    assert commit(conn, "cg", "", -1) == ErrorCode.unknown_member_id  # a simple commit to a live group
    assert commit(conn, "nogroup", "m", 3) == ErrorCode.group_id_not_found
    assert commit(conn, "nogroup", "m", 3, version=8) == ErrorCode.illegal_generation
    # the group itself is untouched by all of that
    assert heartbeat(conn, "cg", member, generation).error_code == ErrorCode.none
    assert commit(conn, "cg", member, generation) == ErrorCode.none
    assert fetch(conn, "cg").topics[0].partitions[0].committed_offset == 7
    # a simple group (no members) stores offsets with generation -1
    assert commit(conn, "simple", "", -1) == ErrorCode.none
    assert fetch(conn, "simple").topics[0].partitions[0].committed_offset == 7
    unknown = fetch(conn, "never-used")
    assert unknown.error_code == ErrorCode.none and unknown.topics[0].partitions[0].committed_offset == -1


def test_static_member_fencing(conn: KioConnection) -> None:
    first = join(conn, "static", instance="i-1")
    assert first.error_code == ErrorCode.none
    assert sync(conn, "static", first.member_id, first.generation_id, "i-1").error_code == ErrorCode.none
    second = join(conn, "static", instance="i-1")  # the same instance restarted: no rebalance
    assert second.error_code == ErrorCode.none and second.generation_id == first.generation_id
    assert second.member_id != first.member_id
    stale = heartbeat(conn, "static", first.member_id, first.generation_id, "i-1")
    assert stale.error_code == ErrorCode.fenced_instance_id
    fresh = heartbeat(conn, "static", second.member_id, second.generation_id, "i-1")
    assert fresh.error_code == ErrorCode.none
    left = conn.send(
        LEAVE.LeaveGroupRequest(
            group_id="static",
            members=(
                LEAVE.MemberIdentity(member_id=first.member_id, group_instance_id="i-1", reason=None),
                LEAVE.MemberIdentity(member_id="", group_instance_id="i-1", reason=None),
                LEAVE.MemberIdentity(member_id="ghost", group_instance_id=None, reason=None),
            ),
        )
    )
    assert [m.error_code for m in left.members] == [
        ErrorCode.fenced_instance_id,
        ErrorCode.none,
        ErrorCode.unknown_member_id,
    ]


def test_group_ids_of_the_other_type_are_refused(conn: KioConnection) -> None:
    share = conn.send(
        SHARE_HB.ShareGroupHeartbeatRequest(
            group_id="sg", member_id="m" * 22, member_epoch=0, rack_id=None, subscribed_topic_names=("t",)
        )
    )
    assert share.error_code == ErrorCode.none
    assert join(conn, "sg").error_code == ErrorCode.inconsistent_group_protocol
    assert commit(conn, "sg", "", -1) == ErrorCode.group_id_not_found
    assert fetch(conn, "sg").error_code == ErrorCode.group_id_not_found
    assert heartbeat(conn, "sg", "m", 1).error_code == ErrorCode.unknown_member_id
    member, _ = stable_member(conn, "cg2")
    refused = conn.send(
        SHARE_HB.ShareGroupHeartbeatRequest(
            group_id="cg2", member_id="n" * 22, member_epoch=0, rack_id=None, subscribed_topic_names=("t",)
        )
    )
    assert refused.error_code == ErrorCode.inconsistent_group_protocol
    described = conn.send(
        DESCRIBE.DescribeGroupsRequest(groups=("cg2", "sg"), include_authorized_operations=False)
    )
    classic, other = described.groups
    assert classic.error_code == ErrorCode.none and classic.group_state == "Stable"
    assert classic.protocol_type == "consumer" and classic.protocol_data == "range"
    assert [m.member_id for m in classic.members] == [member] and classic.members[
        0
    ].member_assignment == b"plan"
    assert other.group_state == "Dead"
