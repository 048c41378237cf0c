"""Finding the share-partition a ShareFetch or ShareAcknowledge names: the cached one at once, else
loaded through the persister, or the error to answer for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from shareq.share import SharePartition
from shareq.share.persister import PersisterError, SharePartitionKey
from shareq.share.session import TopicIdPartition

from ..errors import persister_error_code

if TYPE_CHECKING:
    from .services import ShareServices


def locate(
    share: ShareServices, group_id: str, tip: TopicIdPartition
) -> tuple[SharePartition | None, SharePartitionKey | None, ErrorCode]:
    """Without waiting: the cached share-partition of ``tip``, or the key to load it by, or the error
    to report for it (an unknown topic or partition)."""
    info = share.broker.topics.by_id(tip.topic_id)
    if info is None or info.internal:
        return None, None, ErrorCode.unknown_topic_id
    if not 0 <= tip.partition < info.partitions:
        return None, None, ErrorCode.unknown_topic_or_partition
    key = SharePartitionKey(group_id=group_id, topic_id=tip.topic_id, partition=tip.partition)
    return share.partitions.cached(key), key, ErrorCode.none


async def resolve(
    share: ShareServices, group_id: str, tip: TopicIdPartition
) -> tuple[SharePartition | None, ErrorCode]:
    """The share-partition of ``tip`` for ``group_id`` (loaded if need be), or the error to report."""
    sp, key, code = locate(share, group_id, tip)
    if sp is not None or key is None:
        return sp, code
    try:
        return await share.partitions.get(key), ErrorCode.none
    except PersisterError as error:
        return None, persister_error_code(error)
