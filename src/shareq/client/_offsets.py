"""ListOffsets against partition leaders; shared by ``Admin`` and ``Consumer``."""

from __future__ import annotations

import datetime
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from shareq.protocol.api_keys import LIST_OFFSETS

from .admin_types import OffsetInfo, OffsetSpec
from .cluster import Cluster
from .errors import BrokerConnectionError, KafkaError, raise_for

_RETRIABLE = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.leader_not_available,
    ErrorCode.request_timed_out,
    ErrorCode.offset_not_available,
    ErrorCode.unknown_leader_epoch,
}
_RETRIABLE_FROM_LEADER = _RETRIABLE | {
    # A leader that has not yet applied the topic Metadata already showed (Kafka propagates a new
    # topic to its brokers one by one); Kafka's clients retry it as stale metadata. Metadata itself
    # not knowing the topic stays final.
    ErrorCode.unknown_topic_or_partition,
}


def list_offsets(
    cluster: Cluster,
    topic: str,
    partitions: Sequence[int] | None = None,
    spec: OffsetSpec | int = OffsetSpec.LATEST,
    *,
    isolation_level: int = 0,
) -> dict[int, OffsetInfo]:
    """ListOffsets, retried as Kafka's clients retry it (a leader moved, not yet elected or not yet
    aware of a new topic, a timeout, a dropped connection) with fresh metadata and backoff, for up
    to the request timeout."""
    deadline = time.monotonic() + cluster.request_timeout
    backoff = 0.1
    while True:
        try:
            return _list_offsets_once(cluster, topic, partitions, spec, isolation_level)
        except _LeaderError as exc:
            if exc.error.code not in _RETRIABLE_FROM_LEADER or time.monotonic() + backoff >= deadline:
                raise exc.error from None
        except (KafkaError, BrokerConnectionError) as exc:
            retriable = isinstance(exc, BrokerConnectionError) or exc.code in _RETRIABLE
            if not retriable or time.monotonic() + backoff >= deadline:
                raise
        time.sleep(backoff)
        backoff = min(backoff * 2, 1.0)


class _LeaderError(Exception):
    """A partition error in a leader's ListOffsets answer, told apart from a topic that Metadata
    says does not exist (that one is final)."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


def _list_offsets_once(
    cluster: Cluster,
    topic: str,
    partitions: Sequence[int] | None,
    spec: OffsetSpec | int,
    isolation_level: int,
) -> dict[int, OffsetInfo]:
    info = cluster.topic(topic, refresh=True)
    wanted = [p.partition for p in info.partitions] if partitions is None else list(partitions)
    by_leader: dict[int, list[int]] = defaultdict(list)
    for p in wanted:
        by_leader[info.partition(p).leader].append(p)
    out: dict[int, OffsetInfo] = {}
    for leader, parts in by_leader.items():
        conn = cluster.connection(leader)
        v, m = conn.module(LIST_OFFSETS)
        kwargs: dict[str, Any] = {}
        if v >= 10:
            kwargs["timeout"] = datetime.timedelta(milliseconds=int(conn.request_timeout * 1000))
        request = m.ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=(
                m.ListOffsetsTopic(
                    name=topic,
                    partitions=tuple(
                        m.ListOffsetsPartition(partition_index=p, timestamp=int(spec)) for p in parts
                    ),
                ),
            ),
            **kwargs,
        )
        response = conn.send(request, idempotent=True)
        for t in response.topics:
            for p in t.partitions:
                try:
                    raise_for(p.error_code, context=f"ListOffsets({t.name}-{p.partition_index})")
                except KafkaError as exc:
                    raise _LeaderError(exc) from None
                out[int(p.partition_index)] = OffsetInfo(
                    offset=int(p.offset), timestamp=int(p.timestamp), leader_epoch=int(p.leader_epoch)
                )
    return out
