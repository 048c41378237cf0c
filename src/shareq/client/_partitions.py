"""CreatePartitions and DeleteRecords for ``Admin`` (``shareq topics alter --partitions``,
``shareq records delete``)."""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Mapping

from shareq.protocol.api_keys import CREATE_PARTITIONS, DELETE_RECORDS

from .cluster import Cluster
from .errors import raise_for


def create_partitions(
    cluster: Cluster, topic: str, total: int, *, validate_only: bool = False, timeout: float = 30.0
) -> None:
    """Grow ``topic`` to ``total`` partitions; ``KafkaError`` if the broker refuses."""
    conn = cluster.any_connection()
    _v, m = conn.module(CREATE_PARTITIONS)
    request = m.CreatePartitionsRequest(
        topics=(m.CreatePartitionsTopic(name=topic, count=total, assignments=None),),
        timeout=datetime.timedelta(seconds=timeout),
        validate_only=validate_only,
    )
    response = conn.send(request, timeout=timeout + 5)
    for result in response.results:
        raise_for(result.error_code, result.error_message, context=f"CreatePartitions({result.name})")
    cluster.cache.topics.pop(topic, None)


def delete_records(
    cluster: Cluster, topic: str, before: Mapping[int, int], *, timeout: float = 30.0
) -> dict[int, int]:
    """Delete the records of ``topic`` below ``before[partition]`` (-1: the high watermark) on each
    partition's leader; the new log start offset (low watermark) per partition."""
    info = cluster.topic(topic, refresh=True)
    by_leader: dict[int, dict[int, int]] = defaultdict(dict)
    for partition, offset in before.items():
        by_leader[info.partition(partition).leader][partition] = offset
    out: dict[int, int] = {}
    for leader, offsets in by_leader.items():
        conn = cluster.connection(leader)
        _v, m = conn.module(DELETE_RECORDS)
        request = m.DeleteRecordsRequest(
            topics=(
                m.DeleteRecordsTopic(
                    name=topic,
                    partitions=tuple(
                        m.DeleteRecordsPartition(partition_index=p, offset=o)
                        for p, o in sorted(offsets.items())
                    ),
                ),
            ),
            timeout=datetime.timedelta(seconds=timeout),
        )
        response = conn.send(request, timeout=timeout + 5)
        for result in response.topics:
            for partition in result.partitions:
                raise_for(
                    partition.error_code, None, context=f"DeleteRecords({topic}-{partition.partition_index})"
                )
                out[partition.partition_index] = int(partition.low_watermark)
    return out
