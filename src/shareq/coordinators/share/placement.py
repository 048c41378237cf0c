"""Which state-topic partition holds a share-partition's records.

Kafka places a share-partition by ``abs(String.hashCode("group:topicId:partition")) %
numPartitions`` with the topic id in its base64url form; doing the same here keeps the layout
stable across restarts and Python versions (``hash()`` is salted per process) and matches Kafka's.
"""

from __future__ import annotations

import base64
import uuid

from shareq.share.persister import SharePartitionKey

DEFAULT_STATE_TOPIC_NUM_PARTITIONS = 50


def kafka_uuid_string(topic_id: uuid.UUID) -> str:
    """Kafka's textual topic id: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def coordinator_key(key: SharePartitionKey) -> str:
    """The share coordinator key, ``group:topicId:partition`` (FindCoordinator key type SHARE)."""
    return f"{key.group_id}:{kafka_uuid_string(key.topic_id)}:{key.partition}"


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: SharePartitionKey, num_partitions: int) -> int:
    """The state-topic partition of ``key`` (Kafka's ``Utils.abs(hash) % n``)."""
    h = java_string_hash(coordinator_key(key))
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
