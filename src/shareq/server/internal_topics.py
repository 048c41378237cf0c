"""Kafka's internal topics that shareq keeps, and the configs Kafka creates them with.

``__consumer_offsets`` (group metadata and committed offsets) and ``__transaction_state`` are
compacted: their records are keyed so that the latest record per key is the state, and the log
cleaner keeps replay short. A data directory made before these configs existed gets the ones it
lacks at start (``Broker.internal_topic``)."""

from __future__ import annotations

from shareq.config import BrokerConfig


def group_metadata_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """``__consumer_offsets`` as Kafka's group coordinator creates it."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config["offsets.topic.segment.bytes"]),
    }


def transaction_state_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """``__transaction_state`` as Kafka's transaction coordinator creates it."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
        "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
        "unclean.leader.election.enable": "false",
    }
