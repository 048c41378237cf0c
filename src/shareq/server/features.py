"""The feature levels shareq advertises in ApiVersions (v3+): what it supports and what is finalized.

Kafka gates behaviour behind cluster-wide *features* (KIP-584): each broker reports the range of
levels its software supports, and the controller finalizes one level per feature. A one-node
shareq has no controller: the finalized level of each feature is fixed by what this code serves, so
the table below is both the supported range and the finalized level, and it never changes while a
broker runs (hence one constant epoch).

The levels are chosen honestly, feature by feature, against Kafka 4.4's meaning of each level:

- ``metadata.version`` 33 (``4.4-IV2``, Kafka 4.4's ``LATEST_PRODUCTION``, what a fresh 4.4 cluster
  finalizes). shareq keeps no KRaft metadata log, so the level only names the release whose
  protocol surface shareq answers to: its share-group APIs (ShareGroupHeartbeat 1, ShareFetch 2,
  ShareAcknowledge 2, DescribeShareGroupOffsets 1) are those of Kafka 4.4. The supported range
  starts at Kafka's ``MINIMUM_VERSION`` (``3.3-IV3``, level 7).
- ``share.version`` 2. In Kafka, level 1 turns share groups on (KIP-932) and level 2 adds
  dead-letter queues (KIP-1191: ``ShareVersion.supportsShareGroupDLQ``), as shareq serves them.
  Renewing acquisition locks (RENEW, ShareAcknowledge v2) is gated by the api version, not by this
  feature, and is served.
- ``group.version`` 1: the consumer rebalance protocol of KIP-848 (ConsumerGroupHeartbeat), served
  beside the classic protocol.
- ``transaction.version`` 2, as Kafka 4.4 finalizes it: KIP-890 part 2, an epoch bump at every
  EndTxn (v5), partitions added implicitly by Produce (v12+) and TxnOffsetCommit (v5), and
  AddPartitionsToTxn's batched verify-only form (v4+). Level 1 has no behaviour of its own in Kafka
  (it names the TransactionLogValue v1 record), and the older request versions stay served, so a
  client before KIP-890 keeps the KIP-98 / KIP-447 protocol (an epoch bump only at
  InitProducerId, partitions added by AddPartitionsToTxn and AddOffsetsToTxn).
- ``kraft.version``, ``eligible.leader.replicas.version``, ``streams.version`` 0: there is no KRaft
  quorum, no replication and no streams groups.

A feature at level 0 is supported with the range 0-0 and, as Kafka does, left out of the finalized
list. ApiVersions v3 omits supported features whose minimum is 0 (KAFKA-17492: older clients
cannot read them), so a v3 reader sees ``metadata.version`` only; v4 lists them all. Kafka's
``FeatureCommand describe`` prints one line per supported feature, so it lists the same seven
names for shareq as for Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Feature:
    """One feature: the range of levels this broker supports and the level it finalizes."""

    name: str
    min_supported: int
    max_supported: int
    finalized: int


METADATA_VERSION_4_4_IV2 = 33
METADATA_VERSION_MINIMUM = 7  # 3.3-IV3, Kafka's MetadataVersion.MINIMUM_VERSION

FEATURES: tuple[Feature, ...] = (
    Feature(name="eligible.leader.replicas.version", min_supported=0, max_supported=0, finalized=0),
    Feature(name="group.version", min_supported=0, max_supported=1, finalized=1),
    Feature(name="kraft.version", min_supported=0, max_supported=0, finalized=0),
    Feature(
        name="metadata.version",
        min_supported=METADATA_VERSION_MINIMUM,
        max_supported=METADATA_VERSION_4_4_IV2,
        finalized=METADATA_VERSION_4_4_IV2,
    ),
    Feature(name="share.version", min_supported=0, max_supported=2, finalized=2),
    Feature(name="streams.version", min_supported=0, max_supported=0, finalized=0),
    Feature(name="transaction.version", min_supported=0, max_supported=2, finalized=2),
)

FINALIZED_FEATURES_EPOCH = 1
"""Kafka uses the metadata log offset of the last feature change; shareq's levels are fixed, so
the epoch is a constant (any value >= 0 means "known")."""


def supported_features(api_version: int) -> tuple[Feature, ...]:
    """The supported features an ApiVersions reply of ``api_version`` carries (none before v3)."""
    if api_version < 3:
        return ()
    if api_version < 4:
        return tuple(f for f in FEATURES if f.min_supported != 0)
    return FEATURES


def finalized_features(api_version: int) -> tuple[Feature, ...]:
    """The finalized features of a reply of ``api_version``: those above level 0, as Kafka lists them."""
    if api_version < 3:
        return ()
    return tuple(f for f in FEATURES if f.finalized != 0)


def finalized_level(name: str) -> int:
    """The finalized level of feature ``name`` (0 when it is not finalized)."""
    return next((f.finalized for f in FEATURES if f.name == name), 0)
