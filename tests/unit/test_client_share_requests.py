"""Share-group requests built by the client, decoded by the broker's codec; responses encoded by the broker's
codec, parsed by the client. No broker process: these APIs are not served yet."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from shareq.client import _admin_share as admin_share
from shareq.client import _codec
from shareq.client._share_requests import build_heartbeat, build_share_acknowledge, build_share_fetch
from shareq.client.errors import KafkaError
from shareq.protocol import VersionRange, codec, decode_request, encode_response

T1 = uuid.UUID("00000000-0000-0000-0000-0000000000a1")
T2 = uuid.UUID("00000000-0000-0000-0000-0000000000b2")
ALL = {k: VersionRange(0, 20) for k in (16, 42, 76, 77, 78, 79, 90, 91, 92)}


def roundtrip_request(request: Any) -> Any:
    """Client bytes -> broker-side decode; checks the header too."""
    frame = _codec.encode_request(request, 42, "tester")
    decoded = decode_request(frame[4:], ALL)
    assert decoded.header.correlation_id == 42
    assert decoded.header.client_id == "tester"
    assert decoded.api_key == request.__api_key__
    assert decoded.api_version == request.__version__
    return decoded.body


def roundtrip_response(api_key: int, version: int, response: Any) -> Any:
    frame = encode_response(codec(api_key, version), 9, response)
    assert _codec.peek_correlation_id(frame[4:]) == 9
    return _codec.decode_response(api_key, version, frame[4:])


def test_heartbeat_join_then_steady_state() -> None:
    m = _codec.request_module(76, 1)
    join = roundtrip_request(
        build_heartbeat(m, group_id="g", member_id="m" * 22, epoch=0, topics=["a", "b"], rack_id=None)
    )
    assert (join.group_id, join.member_id, join.member_epoch) == ("g", "m" * 22, 0)
    assert join.subscribed_topic_names == ("a", "b")
    steady = roundtrip_request(
        build_heartbeat(m, group_id="g", member_id="x", epoch=3, topics=None, rack_id="r1")
    )
    assert steady.subscribed_topic_names is None
    assert steady.rack_id == "r1"
    leave = roundtrip_request(
        build_heartbeat(m, group_id="g", member_id="x", epoch=-1, topics=None, rack_id=None)
    )
    assert leave.member_epoch == -1


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_carries_partitions_acks_and_forgotten(version: int) -> None:
    m = _codec.request_module(78, version)
    req = roundtrip_request(
        build_share_fetch(
            m,
            group_id="g",
            member_id="mem",
            epoch=0,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=50 << 20,
            max_records=500,
            batch_size=500,
            listed=[(T1, 0), (T1, 1), (T2, 0)],
            acks={(T1, 1): [(10, 12, (1,)), (14, 15, (2, 3))]},
            forgotten=[(T2, 3)],
        )
    )
    assert req.share_session_epoch == 0
    assert req.max_wait == datetime.timedelta(milliseconds=500)
    assert (req.max_records, req.batch_size, req.max_bytes) == (500, 500, 50 << 20)
    assert [t.topic_id for t in req.topics] == [T1, T2]
    p0, p1 = req.topics[0].partitions
    assert (p0.partition_index, p0.acknowledgement_batches) == (0, ())
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in p1.acknowledgement_batches] == [
        (10, 12, (1,)),
        (14, 15, (2, 3)),
    ]
    assert [(f.topic_id, f.partitions) for f in req.forgotten_topics_data] == [(T2, (3,))]


@pytest.mark.parametrize("version", [1, 2])
def test_share_acknowledge_request(version: int) -> None:
    m = _codec.request_module(79, version)
    req = roundtrip_request(
        build_share_acknowledge(
            m, version, group_id="g", member_id="mem", epoch=4, acks={(T2, 2): [(0, 0, (3,))]}
        )
    )
    assert req.share_session_epoch == 4
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in req.topics] == [(T2, [2])]
    assert req.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types == (3,)


def test_close_sends_epoch_minus_one_without_topics() -> None:
    m = _codec.request_module(79, 1)
    req = roundtrip_request(build_share_acknowledge(m, 1, group_id="g", member_id="mem", epoch=-1, acks={}))
    assert (req.share_session_epoch, req.topics) == (-1, ())


def test_renew_needs_v2_and_sets_the_flag() -> None:
    with pytest.raises(ValueError):
        build_share_acknowledge(
            _codec.request_module(79, 1), 1, group_id="g", member_id="m", epoch=1, acks={}, renew=True
        )
    m = _codec.request_module(79, 2)
    req = roundtrip_request(
        build_share_acknowledge(
            m, 2, group_id="g", member_id="m", epoch=1, acks={(T1, 0): [(5, 5, (4,))]}, renew=True
        )
    )
    assert req.is_renew_ack is True


def test_list_groups_with_types() -> None:
    req = roundtrip_request(admin_share.build_list_groups(_codec.request_module(16, 5), 5, types=["share"]))
    assert req.types_filter == ("share",)
    r = _codec.response_module(16, 5)
    resp = roundtrip_response(
        16,
        5,
        r.ListGroupsResponse(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            groups=(
                r.ListedGroup(group_id="g", protocol_type="share", group_state="Stable", group_type="share"),
            ),
        ),
    )
    (g,) = admin_share.parse_list_groups(resp)
    assert (g.group_id, g.type, g.state) == ("g", "share", "Stable")


def test_share_group_describe_parse() -> None:
    req = roundtrip_request(admin_share.build_share_group_describe(_codec.request_module(77, 1), ["g"]))
    assert req.group_ids == ("g",)
    r = _codec.response_module(77, 1)
    member = r.Member(
        member_id="m1",
        member_epoch=3,
        client_id="c",
        client_host="/127.0.0.1",
        subscribed_topic_names=("t",),
        assignment=r.Assignment(
            topic_partitions=(r.TopicPartitions(topic_id=T1, topic_name="t", partitions=(0, 2)),)
        ),
    )
    resp = roundtrip_response(
        77,
        1,
        r.ShareGroupDescribeResponse(
            throttle_time=datetime.timedelta(0),
            groups=(
                r.DescribedGroup(
                    error_code=ErrorCode.none,
                    group_id="g",
                    group_state="Stable",
                    group_epoch=5,
                    assignment_epoch=5,
                    assignor_name="simple",
                    members=(member,),
                ),
            ),
        ),
    )
    d = admin_share.parse_share_group_describe(resp)["g"]
    assert (d.state, d.group_epoch, d.assignor) == ("Stable", 5, "simple")
    assert d.members[0].assignment == {"t": (0, 2)}


@pytest.mark.parametrize("version", [0, 1])
def test_describe_share_group_offsets(version: int) -> None:
    m = _codec.request_module(90, version)
    req = roundtrip_request(admin_share.build_describe_share_group_offsets(m, "g", {"t": [0, 1]}))
    assert req.groups[0].topics[0].partitions == (0, 1)
    assert (
        roundtrip_request(admin_share.build_describe_share_group_offsets(m, "g", None)).groups[0].topics
        is None
    )
    r = _codec.response_module(90, version)
    extra = {"lag": 7} if version >= 1 else {}
    part = r.DescribeShareGroupOffsetsResponsePartition(
        partition_index=1, start_offset=40, leader_epoch=0, error_code=ErrorCode.none, **extra
    )
    resp = roundtrip_response(
        90,
        version,
        r.DescribeShareGroupOffsetsResponse(
            throttle_time=datetime.timedelta(0),
            groups=(
                r.DescribeShareGroupOffsetsResponseGroup(
                    group_id="g",
                    topics=(
                        r.DescribeShareGroupOffsetsResponseTopic(
                            topic_name="t", topic_id=T1, partitions=(part,)
                        ),
                    ),
                    error_code=ErrorCode.none,
                ),
            ),
        ),
    )
    off = admin_share.parse_describe_share_group_offsets(resp, "g")[("t", 1)]
    assert (off.start_offset, off.topic_id) == (40, T1)
    assert off.lag == (7 if version >= 1 else None)


def test_describe_share_group_offsets_group_error_raises() -> None:
    r = _codec.response_module(90, 1)
    resp = r.DescribeShareGroupOffsetsResponse(
        throttle_time=datetime.timedelta(0),
        groups=(
            r.DescribeShareGroupOffsetsResponseGroup(
                group_id="g", topics=(), error_code=ErrorCode.group_id_not_found, error_message="nope"
            ),
        ),
    )
    with pytest.raises(KafkaError) as info:
        admin_share.parse_describe_share_group_offsets(resp, "g")
    assert info.value.code is ErrorCode.group_id_not_found


def test_alter_and_delete_share_group_offsets() -> None:
    req = roundtrip_request(
        admin_share.build_alter_share_group_offsets(
            _codec.request_module(91, 0), "g", {("t", 1): 5, ("t", 0): 3}
        )
    )
    assert [(p.partition_index, p.start_offset) for p in req.topics[0].partitions] == [(0, 3), (1, 5)]
    r = _codec.response_module(91, 0)
    resp = roundtrip_response(
        91,
        0,
        r.AlterShareGroupOffsetsResponse(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            responses=(
                r.AlterShareGroupOffsetsResponseTopic(
                    topic_name="t",
                    topic_id=T1,
                    partitions=(
                        r.AlterShareGroupOffsetsResponsePartition(
                            partition_index=0, error_code=ErrorCode.none
                        ),
                        r.AlterShareGroupOffsetsResponsePartition(
                            partition_index=1, error_code=ErrorCode.non_empty_group
                        ),
                    ),
                ),
            ),
        ),
    )
    results = admin_share.parse_alter_share_group_offsets(resp, "g")
    assert results == {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.non_empty_group}
    with pytest.raises(KafkaError):
        admin_share.first_error(results, "alter")

    req = roundtrip_request(
        admin_share.build_delete_share_group_offsets(_codec.request_module(92, 0), "g", ["t"])
    )
    assert [t.topic_name for t in req.topics] == ["t"]
    r = _codec.response_module(92, 0)
    resp = roundtrip_response(
        92,
        0,
        r.DeleteShareGroupOffsetsResponse(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            responses=(
                r.DeleteShareGroupOffsetsResponseTopic(
                    topic_name="t", topic_id=T1, error_code=ErrorCode.none
                ),
            ),
        ),
    )
    assert admin_share.parse_delete_share_group_offsets(resp, "g") == {"t": ErrorCode.none}
