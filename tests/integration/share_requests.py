"""Raw share-group requests over one kio connection (group "g", partition 0 for acknowledgements):
for tests that need exact control of member ids, epochs and acknowledgement batches."""

from __future__ import annotations

import datetime
import sys
import uuid
from typing import Any

import kio.index as ki
from kio_wire import KioConnection

HB = sys.modules[ki.load_request_schema(76, 1).__module__]
FETCH = sys.modules[ki.load_request_schema(78, 1).__module__]
ACK = sys.modules[ki.load_request_schema(79, 1).__module__]


def heartbeat(conn: KioConnection, member: str, epoch: int, topics: tuple[str, ...] | None) -> Any:
    return conn.send(
        HB.ShareGroupHeartbeatRequest(
            group_id="g", member_id=member, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics
        )
    )


def fetch(
    conn: KioConnection,
    member: str,
    epoch: int,
    topic_id: uuid.UUID,
    parts: tuple[int, ...],
    *,
    wait_ms: int = 0,
    acks: tuple[tuple[int, int, int], ...] = (),
) -> Any:
    """ShareFetch adding ``parts`` of ``topic_id`` to the session (none: the session's own),
    carrying ``acks`` (``(first, last, type)`` batches) for the first of ``parts``."""
    return conn.send(
        FETCH.ShareFetchRequest(
            group_id="g",
            member_id=member,
            share_session_epoch=epoch,
            max_wait=datetime.timedelta(milliseconds=wait_ms),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=500,
            batch_size=500,
            topics=tuple(
                FETCH.FetchTopic(
                    topic_id=topic_id,
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
                        for i, p in enumerate(parts)
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
    """ShareAcknowledge of ``(first, last, type)`` batches on partition 0 of ``topic_id``."""
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
