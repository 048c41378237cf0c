"""Durable records of the share-group coordinator and their versioned binary encoding.

As in Kafka's group coordinator, handlers return records and ``replay`` applies them, so loading
after a restart is replaying the log. Three record types, each keyed by group id (a compacted
log keeps the latest value per key; a ``None`` value is a tombstone):

- ``GroupMetadata``: reserves the id as a share group and carries the group epoch, so epochs keep
  growing across restarts and stale members are fenced.
- ``PartitionMetadata``: the share-partitions whose durable state has been initialized; only these
  are assigned.
- ``GroupConfig``: the group's dynamic config overrides (may exist before the group does).

Members are deliberately not persisted (KIP-932: they rejoin after a coordinator restart).

Key: ``>h`` record type, ``>h`` key version, string group id. Value: ``>h`` value version, then
the fields. Strings are ``>H`` length + UTF-8; arrays ``>i`` count; UUIDs 16 bytes.
"""

from __future__ import annotations

import enum
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from shareq.coordinators.group.errors import GroupStateError

from ..record_codec import RecordReader, write_str

KEY_VERSION = 0
VALUE_VERSION = 0


class RecordType(enum.IntEnum):
    GROUP_METADATA = 0
    PARTITION_METADATA = 1
    GROUP_CONFIG = 2


FOREIGN_RECORD_TYPES = frozenset({3, 4, 5, 6})
"""Record types of the classic-group coordinator (``coordinators/classic/records.py``: 3, 4) and of
KIP-848 consumer groups (``coordinators/consumer/records.py``: 5, 6) on the same log; replay skips
them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorRecord:
    """One encoded record for the shell to append to the group-metadata log."""

    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    group_type: str
    group_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class InitializedTopic:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMetadataValue:
    initialized: tuple[InitializedTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfigValue:
    configs: tuple[tuple[str, str], ...]


RecordValue = GroupMetadataValue | PartitionMetadataValue | GroupConfigValue

_H = struct.Struct(">h")
_UH = struct.Struct(">H")
_I = struct.Struct(">i")
_KEY_HEAD = struct.Struct(">hh")


def encode_key(record_type: RecordType, group_id: str) -> bytes:
    out = bytearray(_KEY_HEAD.pack(record_type, KEY_VERSION))
    write_str(out, group_id)
    return bytes(out)


def decode_key(key: bytes) -> tuple[RecordType, str]:
    r = RecordReader(key, GroupStateError, "group-coordinator record")
    raw_type, version = r.h(), r.h()
    if version != KEY_VERSION:
        raise GroupStateError(f"unknown key version {version}")
    try:
        record_type = RecordType(raw_type)
    except ValueError:
        raise GroupStateError(f"unknown record type {raw_type}") from None
    group_id = r.s()
    r.done()
    return record_type, group_id


def encode_value(value: RecordValue) -> bytes:
    out = bytearray(_H.pack(VALUE_VERSION))
    if isinstance(value, GroupMetadataValue):
        write_str(out, value.group_type)
        out += _I.pack(value.group_epoch)
    elif isinstance(value, PartitionMetadataValue):
        out += _I.pack(len(value.initialized))
        for topic in value.initialized:
            out += topic.topic_id.bytes
            write_str(out, topic.topic_name)
            out += _I.pack(len(topic.partitions))
            for p in topic.partitions:
                out += _I.pack(p)
    else:
        out += _I.pack(len(value.configs))
        for name, val in value.configs:
            write_str(out, name)
            write_str(out, val)
    return bytes(out)


def decode_value(record_type: RecordType, raw: bytes) -> RecordValue:
    r = RecordReader(raw, GroupStateError, "group-coordinator record")
    version = r.h()
    if version != VALUE_VERSION:
        raise GroupStateError(f"unknown value version {version} for {record_type.name}")
    value: RecordValue
    if record_type is RecordType.GROUP_METADATA:
        value = GroupMetadataValue(group_type=r.s(), group_epoch=r.i())
    elif record_type is RecordType.PARTITION_METADATA:
        topics = []
        for _ in range(r.i()):
            topic_id = uuid.UUID(bytes=r.take(16))
            name = r.s()
            parts = tuple(r.i() for _ in range(r.i()))
            topics.append(InitializedTopic(topic_id=topic_id, topic_name=name, partitions=parts))
        value = PartitionMetadataValue(initialized=tuple(topics))
    else:
        value = GroupConfigValue(configs=tuple((r.s(), r.s()) for _ in range(r.i())))
    r.done()
    return value


def record_type_of(value: RecordValue) -> RecordType:
    if isinstance(value, GroupMetadataValue):
        return RecordType.GROUP_METADATA
    if isinstance(value, PartitionMetadataValue):
        return RecordType.PARTITION_METADATA
    return RecordType.GROUP_CONFIG


def make_record(record_type: RecordType, group_id: str, value: RecordValue | None) -> CoordinatorRecord:
    """Encode one record (``value=None`` is a tombstone)."""
    return CoordinatorRecord(
        key=encode_key(record_type, group_id), value=None if value is None else encode_value(value)
    )


def partition_metadata_value(
    initialized: Mapping[uuid.UUID, tuple[str, frozenset[int]]],
) -> PartitionMetadataValue:
    """The PartitionMetadata record value for a group's initialized share-partitions."""
    return PartitionMetadataValue(
        initialized=tuple(
            InitializedTopic(topic_id=t, topic_name=name, partitions=tuple(sorted(ps)))
            for t, (name, ps) in sorted(initialized.items(), key=lambda kv: str(kv[0]))
        )
    )
