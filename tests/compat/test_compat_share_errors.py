"""Error codes for bad share-group requests, sent by hand (no client sends them), against Kafka and shareq."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from compat_support import Server, create_topic, earliest_group, produce
from compat_wire import ShareWire, ack_errors, new_member_id, partition_errors, records_count, topic_id

from shareq.client import ConsumerRecord, ShareConsumer

pytestmark = pytest.mark.timeout(90)

NONE = 0
UNKNOWN_MEMBER_ID = 25
INVALID_GROUP_ID = 24
INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100
FENCED_MEMBER_EPOCH = 110
INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
ACCEPT, RELEASE, REJECT = 1, 2, 3


class Joined:
    """A member that joined the group, with the topic's id and 10 records produced."""

    def __init__(self, server: Server, names: tuple[str, str], records: int = 10) -> None:
        self.topic, group = names
        create_topic(server, self.topic)
        earliest_group(server, group)
        produce(server, self.topic, [b"e%d" % i for i in range(records)])
        self.topic_id = topic_id(server.bootstrap, self.topic)
        self.wire = ShareWire(server.bootstrap, group)
        self.wire.join(self.topic)


@pytest.fixture
def joined(server: Server, names: tuple[str, str]) -> Iterator[Joined]:
    member = Joined(server, names)
    try:
        yield member
    finally:
        member.wire.heartbeat(-1, None)
        member.wire.close()


@pytest.fixture
def acquired(joined: Joined) -> Joined:
    """``joined`` after acquiring all 10 records (the session is open at epoch 1)."""
    assert joined.wire.fetch_until_acquired(joined.topic_id, 10) == [(0, 9)]
    return joined


def test_heartbeat_epoch_ahead_is_fenced(joined: Joined) -> None:
    """A heartbeat with an epoch above the member's: FENCED_MEMBER_EPOCH."""
    r = joined.wire.heartbeat(joined.wire.epoch + 1, None)
    assert r.error_code == FENCED_MEMBER_EPOCH


def test_heartbeat_previous_epoch_is_accepted(joined: Joined) -> None:
    """A heartbeat at the member's previous epoch (a response was lost) is answered without error."""
    assert joined.wire.epoch >= 2, "the member has no previous epoch to send"
    r = joined.wire.heartbeat(joined.wire.epoch - 1, None)
    assert r.error_code == NONE


def test_heartbeat_unknown_member(joined: Joined) -> None:
    """A heartbeat from a member id the group does not know, at a non-zero epoch: UNKNOWN_MEMBER_ID."""
    r = joined.wire.heartbeat(5, None, member=new_member_id())
    assert r.error_code == UNKNOWN_MEMBER_ID


def test_heartbeat_join_without_topics(server: Server, names: tuple[str, str]) -> None:
    """Joining (epoch 0) with no subscribed topic names: INVALID_REQUEST."""
    wire = ShareWire(server.bootstrap, names[1])
    try:
        assert wire.heartbeat(0, None).error_code == INVALID_REQUEST
    finally:
        wire.close()


def test_heartbeat_empty_group_id(server: Server, names: tuple[str, str]) -> None:
    """ShareGroupHeartbeat with an empty group id: INVALID_REQUEST."""
    wire = ShareWire(server.bootstrap, names[1])
    wire.group = ""
    try:
        assert wire.heartbeat(0, (names[0],)).error_code == INVALID_REQUEST
    finally:
        wire.close()


def test_share_fetch_unknown_member(joined: Joined) -> None:
    """ShareFetch opening a session for a member id the group does not know: no error (Kafka does not check
    share-group membership on ShareFetch)."""
    r = joined.wire.fetch(joined.topic_id, session_epoch=0, member=new_member_id())
    assert r.error_code == NONE


def test_share_fetch_unknown_topic_id(joined: Joined) -> None:
    """ShareFetch naming a topic id that does not exist: UNKNOWN_TOPIC_ID on the partition."""
    r = joined.wire.fetch(uuid.uuid4())
    assert r.error_code == NONE
    assert partition_errors(r) == [UNKNOWN_TOPIC_ID]


def test_share_fetch_max_bytes_zero(joined: Joined) -> None:
    """ShareFetch with MaxBytes 0: no error and no records acquired."""
    r = joined.wire.fetch(joined.topic_id, max_bytes=0)
    assert r.error_code == NONE
    assert records_count(r) == 0


def test_share_fetch_wrong_session_epoch(acquired: Joined) -> None:
    """ShareFetch with a session epoch the session is not at: INVALID_SHARE_SESSION_EPOCH."""
    r = acquired.wire.fetch(acquired.topic_id, session_epoch=7)
    assert r.error_code == INVALID_SHARE_SESSION_EPOCH


def test_share_fetch_without_session(joined: Joined, server: Server) -> None:
    """ShareFetch at epoch 3 by a member that never opened a session: SHARE_SESSION_NOT_FOUND."""
    other = ShareWire(server.bootstrap, joined.wire.group)
    try:
        assert other.fetch(joined.topic_id, session_epoch=3).error_code == SHARE_SESSION_NOT_FOUND
    finally:
        other.close()


def test_share_acknowledge_without_session(joined: Joined, server: Server) -> None:
    """ShareAcknowledge at epoch 1 by a member that never opened a session: SHARE_SESSION_NOT_FOUND."""
    other = ShareWire(server.bootstrap, joined.wire.group)
    try:
        r = other.acknowledge(joined.topic_id, ((0, 1, ACCEPT),), session_epoch=1)
        assert r.error_code == SHARE_SESSION_NOT_FOUND
    finally:
        other.close()


def test_acknowledge_accepts_acquired_records(acquired: Joined) -> None:
    """ShareAcknowledge of acquired records: no error on the partition."""
    r = acquired.wire.acknowledge(acquired.topic_id, ((0, 4, ACCEPT), (5, 9, RELEASE)))
    assert (r.error_code, partition_errors(r)) == (NONE, [NONE])


def test_acknowledge_overlapping_ranges(acquired: Joined) -> None:
    """ShareAcknowledge with overlapping batches (0-3 and 2-5): INVALID_REQUEST on the partition."""
    r = acquired.wire.acknowledge(acquired.topic_id, ((0, 3, ACCEPT), (2, 5, ACCEPT)))
    assert (r.error_code, partition_errors(r)) == (NONE, [INVALID_REQUEST])


def test_acknowledge_beyond_acquired(acquired: Joined) -> None:
    """ShareAcknowledge of offsets past everything acquired (20-25 of 10 records): INVALID_REQUEST."""
    r = acquired.wire.acknowledge(acquired.topic_id, ((20, 25, ACCEPT),))
    assert (r.error_code, partition_errors(r)) == (NONE, [INVALID_REQUEST])


def test_acknowledge_reversed_range(acquired: Joined) -> None:
    """ShareAcknowledge of a batch whose last offset is before its first: INVALID_REQUEST."""
    r = acquired.wire.acknowledge(acquired.topic_id, ((5, 2, ACCEPT),))
    assert (r.error_code, partition_errors(r)) == (NONE, [INVALID_REQUEST])


def test_acknowledge_unknown_type(acquired: Joined) -> None:
    """ShareAcknowledge with acknowledge type 9: INVALID_REQUEST."""
    r = acquired.wire.acknowledge(acquired.topic_id, ((2, 2, 9),))
    assert (r.error_code, partition_errors(r)) == (NONE, [INVALID_REQUEST])


def test_acknowledge_released_record(acquired: Joined) -> None:
    """Accepting records after releasing them (no longer acquired): INVALID_RECORD_STATE."""
    assert partition_errors(acquired.wire.acknowledge(acquired.topic_id, ((2, 3, RELEASE),))) == [NONE]
    r = acquired.wire.acknowledge(acquired.topic_id, ((2, 3, ACCEPT),))
    assert partition_errors(r) == [INVALID_RECORD_STATE]


def test_piggybacked_acknowledge_twice(acquired: Joined) -> None:
    """Accepting offset 4 on a ShareFetch, then again on the next: INVALID_RECORD_STATE the second time."""
    assert ack_errors(acquired.wire.fetch(acquired.topic_id, acks=((4, 4, ACCEPT),))) == [NONE]
    assert ack_errors(acquired.wire.fetch(acquired.topic_id, acks=((4, 4, ACCEPT),))) == [
        INVALID_RECORD_STATE
    ]


def test_acknowledge_below_start_offset(acquired: Joined) -> None:
    """Accepting 0-1 twice: the first moves the start offset to 2, the second (below it) gets no error."""
    assert partition_errors(acquired.wire.acknowledge(acquired.topic_id, ((0, 1, ACCEPT),))) == [NONE]
    assert partition_errors(acquired.wire.acknowledge(acquired.topic_id, ((0, 1, ACCEPT),))) == [NONE]


def test_piggybacked_overlapping_acknowledgements(acquired: Joined) -> None:
    """Overlapping batches (4-4 and 4-5) on a ShareFetch: INVALID_RECORD_STATE as the acknowledge error."""
    r = acquired.wire.fetch(acquired.topic_id, acks=((4, 4, ACCEPT), (4, 5, ACCEPT)))
    assert r.error_code == NONE
    assert ack_errors(r) == [INVALID_RECORD_STATE]


def test_renew_refused_when_the_group_turns_it_off(server: Server, names: tuple[str, str]) -> None:
    """share.renew.acknowledge.enable=false: a RENEW (ShareAcknowledge v2) is INVALID_RECORD_STATE and
    the records stay acquired, so accepting them afterwards succeeds."""
    topic, group = names
    create_topic(server, topic)
    earliest_group(server, group, **{"share.renew.acknowledge.enable": "false"})
    produce(server, topic, [b"n0", b"n1"])
    with ShareConsumer(server.bootstrap, group, topics=[topic], request_timeout=10) as consumer:
        records: list[ConsumerRecord] = []
        deadline = time.monotonic() + 30
        while len(records) < 2:
            assert time.monotonic() < deadline, f"only {len(records)} records arrived"
            records += consumer.poll(0.5)
        assert consumer.renew(records) == {(topic, 0): INVALID_RECORD_STATE}
        for record in records:
            consumer.acknowledge(record)
        assert consumer.commit() == {(topic, 0): NONE}
