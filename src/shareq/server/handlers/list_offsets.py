"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3) and by timestamp."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from shareq.log.errors import LogError
from shareq.log.partition_log import PartitionLog
from shareq.protocol import VersionRange
from shareq.protocol.api_keys import LIST_OFFSETS

from ..context import NO_THROTTLE, RequestContext
from ..errors import error_code

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


def handle_list_offsets(request: Any, ctx: RequestContext) -> Any:
    read_committed = getattr(request, "isolation_level", 0) == 1
    topics = []
    for topic in request.topics:
        partitions = []
        for preq in topic.partitions:
            code, offset, timestamp = ErrorCode.none, -1, -1
            partition = ctx.broker.partition(topic.name, preq.partition_index)
            if partition is None:
                code = ErrorCode.unknown_topic_or_partition
            else:
                log = partition.log
                try:
                    if preq.timestamp == LATEST:
                        # read_committed: the last stable offset (Kafka's ListOffsets rule)
                        offset = log.last_stable_offset if read_committed else log.log_end_offset
                    elif preq.timestamp == EARLIEST:
                        offset = log.log_start_offset
                    elif preq.timestamp == MAX_TIMESTAMP or preq.timestamp >= 0:
                        found = _by_timestamp(log, preq.timestamp)
                        if found is not None:
                            offset, timestamp = found
                    else:
                        code = ErrorCode.invalid_request
                except LogError as error:
                    code = error_code(error)
            partitions.append(
                ctx.build(
                    "ListOffsetsPartitionResponse",
                    partition_index=preq.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=0 if offset >= 0 else -1,  # no record found: no epoch, as Kafka
                )
            )
        topics.append(ctx.build("ListOffsetsTopicResponse", name=topic.name, partitions=tuple(partitions)))
    return ctx.build(throttle_time=NO_THROTTLE, topics=tuple(topics))


def _by_timestamp(log: PartitionLog, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first batch at or after ``timestamp`` (-3: the largest timestamp)."""
    by_max = timestamp == MAX_TIMESTAMP
    found = log.max_timestamp_offset() if by_max else log.offset_for_timestamp(timestamp)
    return None if found is None else (found.offset, found.timestamp)


HANDLERS = {LIST_OFFSETS: (VersionRange(1, 11), handle_list_offsets)}
