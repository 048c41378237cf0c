"""Raw share-group requests on kio, for the bad requests no client will send: exact member ids, epochs,
acknowledgement ranges and fetch limits, against either server."""

from __future__ import annotations

import datetime
import sys
import time
import uuid
from typing import Any

import kio.index as ki
from kio_wire import KioConnection

HB = sys.modules[ki.load_request_schema(76, 1).__module__]
FETCH = sys.modules[ki.load_request_schema(78, 1).__module__]
ACK = sys.modules[ki.load_request_schema(79, 1).__module__]
FIND = sys.modules[ki.load_request_schema(10, 4).__module__]
RETRIABLE = (14, 15, 16)  # coordinator loading, not available, not coordinator
METADATA = sys.modules[ki.load_request_schema(3, 12).__module__]


def new_member_id() -> str:
    """A client-generated member id, as librdkafka makes them (22 characters)."""
    return uuid.uuid4().hex[:22]


def coordinator(bootstrap: str, group: str) -> str:
    """host:port of the group's coordinator (FindCoordinator v4, key type GROUP)."""
    conn = KioConnection(bootstrap.split(",")[0])
    try:
        deadline = time.monotonic() + 20
        while True:
            r = conn.send(FIND.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
            c = r.coordinators[0]
            if c.error_code == 0 or time.monotonic() > deadline:
                assert c.error_code == 0, c
                return f"{c.host}:{c.port}"
            time.sleep(0.1)
    finally:
        conn.close()


def topic_id(bootstrap: str, topic: str) -> uuid.UUID:
    conn = KioConnection(bootstrap.split(",")[0])
    try:
        r = conn.send(
            METADATA.MetadataRequest(
                topics=(METADATA.MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert r.topics[0].error_code == 0, r.topics[0]
        return r.topics[0].topic_id  # type: ignore[no-any-return]
    finally:
        conn.close()


class ShareWire:
    """One member of ``group`` speaking ShareGroupHeartbeat/ShareFetch/ShareAcknowledge v1 by hand
    (one connection: on one node the coordinator and the partition leader are the same broker)."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.group = group
        self.conn = KioConnection(coordinator(bootstrap, group))
        self.member = new_member_id()
        self.epoch = 0
        self.session_epoch = 0

    def close(self) -> None:
        self.conn.close()

    def heartbeat(self, epoch: int, topics: tuple[str, ...] | None, member: str | None = None) -> Any:
        return self.conn.send(
            HB.ShareGroupHeartbeatRequest(
                group_id=self.group,
                member_id=self.member if member is None else member,
                member_epoch=epoch,
                rack_id=None,
                subscribed_topic_names=topics,
            )
        )

    def join(self, topic: str, timeout: float = 30.0) -> Any:
        """Heartbeat until the member is assigned some partition of ``topic``; returns that response."""
        deadline = time.monotonic() + timeout
        r = self.heartbeat(0, (topic,))
        while r.error_code in RETRIABLE and time.monotonic() < deadline:
            time.sleep(0.1)
            r = self.heartbeat(0, (topic,))
        assert r.error_code == 0, r
        self.epoch = r.member_epoch
        while not (r.assignment is not None and r.assignment.topic_partitions):
            assert time.monotonic() < deadline, "no assignment"
            time.sleep(0.2)
            r = self.heartbeat(self.epoch, None)
            assert r.error_code == 0, r
            self.epoch = r.member_epoch
        return r

    def fetch(
        self,
        topic: uuid.UUID,
        partitions: tuple[int, ...] = (0,),
        *,
        acks: tuple[tuple[int, int, int], ...] = (),
        session_epoch: int | None = None,
        member: str | None = None,
        max_bytes: int = 1 << 20,
        wait_ms: int = 0,
    ) -> Any:
        """ShareFetch of ``partitions`` (acknowledging ``(first, last, type)`` on the first one); the session
        epoch advances by itself unless given."""
        epoch = self.session_epoch if session_epoch is None else session_epoch
        response = self.conn.send(
            FETCH.ShareFetchRequest(
                group_id=self.group,
                member_id=self.member if member is None else member,
                share_session_epoch=epoch,
                max_wait=datetime.timedelta(milliseconds=wait_ms),
                min_bytes=1,
                max_bytes=max_bytes,
                max_records=500,
                batch_size=500,
                topics=(
                    FETCH.FetchTopic(
                        topic_id=topic,
                        partitions=tuple(
                            FETCH.FetchPartition(
                                partition_index=p,
                                acknowledgement_batches=tuple(
                                    FETCH.AcknowledgementBatch(
                                        first_offset=a, last_offset=b, acknowledge_types=(t,)
                                    )
                                    for a, b, t in (acks if i == 0 else ())
                                ),
                            )
                            for i, p in enumerate(partitions)
                        ),
                    ),
                ),
                forgotten_topics_data=(),
            )
        )
        if session_epoch is None and response.error_code == 0:
            self.session_epoch += 1
        return response

    def fetch_until_acquired(
        self, topic: uuid.UUID, count: int, timeout: float = 20.0
    ) -> list[tuple[int, int]]:
        """ShareFetch (long polls of 200 ms) until ``count`` offsets of partition 0 are acquired."""
        acquired: list[tuple[int, int]] = []
        deadline = time.monotonic() + timeout
        while sum(b - a + 1 for a, b in acquired) < count:
            assert time.monotonic() < deadline, f"acquired only {acquired}"
            r = self.fetch(topic, wait_ms=200)
            assert r.error_code == 0, r
            for t in r.responses:
                for p in t.partitions:
                    assert p.error_code == 0, p
                    acquired += [(a.first_offset, a.last_offset) for a in p.acquired_records]
        return acquired

    def acknowledge(
        self,
        topic: uuid.UUID,
        batches: tuple[tuple[int, int, int], ...],
        *,
        session_epoch: int | None = None,
        member: str | None = None,
    ) -> Any:
        epoch = self.session_epoch if session_epoch is None else session_epoch
        response = self.conn.send(
            ACK.ShareAcknowledgeRequest(
                group_id=self.group,
                member_id=self.member if member is None else member,
                share_session_epoch=epoch,
                topics=(
                    ACK.AcknowledgeTopic(
                        topic_id=topic,
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
        if session_epoch is None and response.error_code == 0:
            self.session_epoch += 1
        return response


def partition_errors(response: Any) -> list[int]:
    """The error code of every partition in a ShareFetch/ShareAcknowledge response."""
    return [int(p.error_code) for t in response.responses for p in t.partitions]


def ack_errors(response: Any) -> list[int]:
    """The acknowledge error code of every partition in a ShareFetch response."""
    return [int(p.acknowledge_error_code) for t in response.responses for p in t.partitions]


def records_count(response: Any) -> int:
    """How many offsets a ShareFetch response hands out (sum over its acquired-record ranges)."""
    return sum(
        a.last_offset - a.first_offset + 1
        for t in response.responses
        for p in t.partitions
        for a in p.acquired_records
    )
