"""The asyncio shell around share groups: coordinator, sessions, persister and share-partitions.

``ShareServices`` is attached to the broker as ``broker.share``; the wire handlers
(ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and the share admin APIs) reach everything
through it.
"""

from .manager import SharePartitionManager
from .services import GROUP_METADATA_TOPIC, ShareServices

__all__ = ["GROUP_METADATA_TOPIC", "SharePartitionManager", "ShareServices"]
