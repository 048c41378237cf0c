"""Bad share-group input over the wire: each answered with Kafka's error code, nothing changed,
and the broker keeps serving others."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio_wire import KioConnection
from share_consumers import create_topic, poll_values, produce, share_consumer
from share_requests import acknowledge, fetch, heartbeat
from share_wire_log import ACQUIRED, TERMINAL, ShareWireLog

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

MEMBER_A = "A" * 22
MEMBER_B = "B" * 22


def partition_code(response: Any) -> ErrorCode:
    assert response.error_code == ErrorCode.none
    code: ErrorCode = response.responses[0].partitions[0].error_code
    return code


def test_bad_acknowledgements_and_epochs_change_nothing(share_broker: EmbeddedBroker) -> None:
    log = ShareWireLog(share_broker).install()
    create_topic(share_broker.bootstrap, "bad", 1)
    produce(share_broker.bootstrap, "bad", [b"b%d" % i for i in range(10)], 1, per_batch=10)
    info = share_broker.broker.topics.get("bad")
    assert info is not None
    tid = info.topic_id
    a, b = KioConnection(share_broker.bootstrap), KioConnection(share_broker.bootstrap)
    try:
        joined = heartbeat(a, MEMBER_A, 0, ("bad",))
        assert joined.error_code == ErrorCode.none and joined.assignment is not None
        got = fetch(a, MEMBER_A, 0, tid, (0,))
        acquired = got.responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in acquired] == [(0, 9, 1)]
        assert heartbeat(b, MEMBER_B, 0, ("bad",)).error_code == ErrorCode.none
        empty = fetch(b, MEMBER_B, 0, tid, (0,))
        assert empty.error_code == ErrorCode.none and not any(
            p.acquired_records for t in empty.responses for p in t.partitions
        )

        before = log.states("g", tid, 0)
        assert set(before.values()) == {ACQUIRED}
        epoch = 1
        for batches, code in (
            ([(0, 4, 1), (3, 6, 1)], ErrorCode.invalid_request),  # overlapping
            ([(5, 2, 1)], ErrorCode.invalid_request),  # backwards
            ([(20, 25, 1)], ErrorCode.invalid_request),  # never acquired (past the end)
            ([(0, 0, 9)], ErrorCode.invalid_request),  # no such acknowledge type
        ):
            assert partition_code(acknowledge(a, MEMBER_A, epoch, tid, batches)) == code, batches
            epoch += 1
        # records held by another member
        assert partition_code(acknowledge(b, MEMBER_B, 1, tid, [(0, 9, 1)])) == ErrorCode.invalid_record_state
        # stale and future session epochs, a member without a session
        assert (
            acknowledge(a, MEMBER_A, 1, tid, [(0, 9, 1)]).error_code == ErrorCode.invalid_share_session_epoch
        )
        assert (
            acknowledge(a, MEMBER_A, 99, tid, [(0, 9, 1)]).error_code == ErrorCode.invalid_share_session_epoch
        )
        assert acknowledge(a, "Z" * 22, 1, tid, [(0, 9, 1)]).error_code == ErrorCode.share_session_not_found
        assert fetch(a, "Z" * 22, 3, tid, (0,)).error_code == ErrorCode.share_session_not_found
        # unknown members and fenced epochs in heartbeats
        assert heartbeat(a, "Z" * 22, 1, None).error_code == ErrorCode.unknown_member_id
        assert heartbeat(a, MEMBER_A, 42, None).error_code == ErrorCode.fenced_member_epoch
        # a session opened by a member id the group does not know is answered, as Kafka answers
        # it (no membership check on ShareFetch); every record is held by A, so it gets none
        stranger = fetch(a, "Z" * 22, 0, tid, (0,))
        assert stranger.error_code == ErrorCode.none
        assert not any(p.acquired_records for t in stranger.responses for p in t.partitions)
        # an unknown topic id is a per-partition error
        unknown = fetch(b, MEMBER_B, 2, uuid.uuid4(), (0,))
        assert partition_code(unknown) == ErrorCode.unknown_topic_id
        assert log.states("g", tid, 0) == before  # nothing changed

        # the broker keeps serving: A's good acknowledgement works, another group consumes
        assert partition_code(acknowledge(a, MEMBER_A, epoch, tid, [(0, 9, 1)])) == ErrorCode.none
        assert set(log.states("g", tid, 0).values()) == {TERMINAL}
        other = share_consumer(share_broker.bootstrap, "other", ["bad"])
        try:
            assert len(poll_values(other, lambda out: len(out) >= 10)) == 10
        finally:
            other.close()
    finally:
        a.close()
        b.close()


def test_records_a_non_member_fetched_return_when_its_connection_closes(share_broker: EmbeddedBroker) -> None:
    """A member id the group does not know may open a share session and acquire (as in Kafka); its
    records are not stranded: closing its connection ends the session and releases them to a member."""
    log = ShareWireLog(share_broker).install()
    create_topic(share_broker.bootstrap, "stranger", 1)
    produce(share_broker.bootstrap, "stranger", [b"s%d" % i for i in range(5)], 1, per_batch=5)
    info = share_broker.broker.topics.get("stranger")
    assert info is not None
    tid = info.topic_id
    member, stranger = KioConnection(share_broker.bootstrap), KioConnection(share_broker.bootstrap)
    try:
        assert heartbeat(member, MEMBER_A, 0, ("stranger",)).error_code == ErrorCode.none
        got = fetch(stranger, "Z" * 22, 0, tid, (0,))
        assert got.error_code == ErrorCode.none
        taken = got.responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in taken] == [(0, 4, 1)]
        assert set(log.states("g", tid, 0).values()) == {ACQUIRED}
        stranger.close()
        # the member's long poll is woken by the release and gets the records a second time
        again = fetch(member, MEMBER_A, 0, tid, (0,), wait_ms=10_000)
        acquired = again.responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in acquired] == [(0, 4, 2)]
    finally:
        member.close()
        stranger.close()
