"""shareq's own Kafka client on kio: producer, assign-style consumer, share consumer and admin.

Synchronous and thread-safe per connection; no librdkafka. Built for the PySpark connector and the CLI.
"""

from shareq.protocol.acknowledge_type import AcknowledgeType

from ._share_state import AckRange, AcquiredRange
from ._transactions import ShareGroupMetadata
from .admin import Admin
from .admin_types import (
    AlterOp,
    ClientQuota,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    ConsumerGroupOffset,
    CreatedTopic,
    FeatureMetadata,
    GroupListing,
    NewTopic,
    OffsetInfo,
    OffsetSpec,
    PendingTransaction,
    QuotaFilter,
    QuotaMatch,
    ResourceType,
    ShareGroupDescription,
    ShareGroupOffset,
    ShareMember,
)
from .cluster import BrokerInfo, Cluster, PartitionInfo, TopicInfo
from .connection import BrokerConnection
from .consumer import Consumer, FetchResult
from .errors import (
    BrokerConnectionError,
    ClientError,
    KafkaError,
    ProtocolViolation,
    UnsupportedVersionError,
)
from .group_consumer import GroupConsumer
from .partitioner import murmur2, partition_for_key
from .producer import Producer, RecordMetadata, SendFuture
from .records import ConsumerRecord
from .security import ClientSecurity
from .share_consumer import Acquisition, ShareConsumer

__all__ = [
    "AckRange",
    "AcknowledgeType",
    "AcquiredRange",
    "Acquisition",
    "Admin",
    "AlterOp",
    "BrokerConnection",
    "BrokerConnectionError",
    "BrokerInfo",
    "ClientError",
    "ClientQuota",
    "ClientSecurity",
    "Cluster",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
    "Consumer",
    "ConsumerGroupDescription",
    "ConsumerGroupMember",
    "ConsumerGroupOffset",
    "ConsumerRecord",
    "CreatedTopic",
    "FeatureMetadata",
    "FetchResult",
    "GroupConsumer",
    "GroupListing",
    "KafkaError",
    "NewTopic",
    "OffsetInfo",
    "OffsetSpec",
    "PartitionInfo",
    "PendingTransaction",
    "Producer",
    "ProtocolViolation",
    "QuotaFilter",
    "QuotaMatch",
    "RecordMetadata",
    "ResourceType",
    "SendFuture",
    "ShareConsumer",
    "ShareGroupDescription",
    "ShareGroupMetadata",
    "ShareGroupOffset",
    "ShareMember",
    "TopicInfo",
    "UnsupportedVersionError",
    "murmur2",
    "partition_for_key",
]
