"""Bad share-group input over the wire: each answered with Kafka's error code, nothing changed,
and the broker keeps serving others."""

from __future__ import annotations

import datetime
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kio.index as ki
import pytest
from kio.schema.errors import ErrorCode
from kio_wire import KioConnection
from share_consumers import SHARE_BROKER, create_topic, poll_values, produce, share_consumer
from share_wire_log import ACQUIRED, TERMINAL, ShareWireLog

from shareq.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

HB = sys.modules[ki.load_request_schema(76, 1).__module__]
FETCH = sys.modules[ki.load_request_schema(78, 1).__module__]
ACK = sys.modules[ki.load_request_schema(79, 1).__module__]
MEMBER_A = "A" * 22
MEMBER_B = "B" * 22


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "data", config=SHARE_BROKER) as b:
        yield b


def heartbeat(conn: KioConnection, member: str, epoch: int, topics: tuple[str, ...] | None) -> Any:
    return conn.send(
        HB.ShareGroupHeartbeatRequest(
            group_id="g", member_id=member, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics
        )
    )


def fetch(conn: KioConnection, member: str, epoch: int, topic_id: uuid.UUID, parts: tuple[int, ...]) -> Any:
    return conn.send(
        FETCH.ShareFetchRequest(
            group_id="g",
            member_id=member,
            share_session_epoch=epoch,
            max_wait=datetime.timedelta(0),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=500,
            batch_size=500,
            topics=tuple(
                FETCH.FetchTopic(
                    topic_id=topic_id,
                    partitions=tuple(
                        FETCH.FetchPartition(partition_index=p, acknowledgement_batches=()) for p in parts
                    ),
                )
                for _ in (0,)
                if parts
            ),
            forgotten_topics_data=(),
        )
    )


def acknowledge(
    conn: KioConnection, member: str, epoch: int, topic_id: uuid.UUID, batches: list[tuple[int, int, int]]
) -> Any:
    return conn.send(
        ACK.ShareAcknowledgeRequest(
            group_id="g",
            member_id=member,
            share_session_epoch=epoch,
            topics=(
                ACK.AcknowledgeTopic(
                    topic_id=topic_id,
                    partitions=(
                        ACK.AcknowledgePartition(
                            partition_index=0,
                            acknowledgement_batches=tuple(
                                ACK.AcknowledgementBatch(
                                    first_offset=a, last_offset=b, acknowledge_types=(t,)
                                )
                                for a, b, t in batches
                            ),
                        ),
                    ),
                ),
            ),
        )
    )


def partition_code(response: Any) -> ErrorCode:
    assert response.error_code == ErrorCode.none
    code: ErrorCode = response.responses[0].partitions[0].error_code
    return code


def test_bad_acknowledgements_and_epochs_change_nothing(broker: EmbeddedBroker) -> None:
    log = ShareWireLog(broker).install()
    create_topic(broker.bootstrap, "bad", 1)
    produce(broker.bootstrap, "bad", [b"b%d" % i for i in range(10)], 1, per_batch=10)
    info = broker.broker.topics.get("bad")
    assert info is not None
    tid = info.topic_id
    a, b = KioConnection(broker.bootstrap), KioConnection(broker.bootstrap)
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
        # unknown members and fenced epochs in heartbeats; a session opened by a non-member
        assert heartbeat(a, "Z" * 22, 1, None).error_code == ErrorCode.unknown_member_id
        assert heartbeat(a, MEMBER_A, 42, None).error_code == ErrorCode.fenced_member_epoch
        assert fetch(a, "Z" * 22, 0, tid, (0,)).error_code == ErrorCode.unknown_member_id
        # an unknown topic id is a per-partition error
        unknown = fetch(b, MEMBER_B, 2, uuid.uuid4(), (0,))
        assert partition_code(unknown) == ErrorCode.unknown_topic_id
        assert log.states("g", tid, 0) == before  # nothing changed

        # the broker keeps serving: A's good acknowledgement works, another group consumes
        assert partition_code(acknowledge(a, MEMBER_A, epoch, tid, [(0, 9, 1)])) == ErrorCode.none
        assert set(log.states("g", tid, 0).values()) == {TERMINAL}
        other = share_consumer(broker.bootstrap, "other", ["bad"])
        try:
            assert len(poll_values(other, lambda out: len(out) >= 10)) == 10
        finally:
            other.close()
    finally:
        a.close()
        b.close()
