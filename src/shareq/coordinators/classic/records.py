"""Durable records of classic groups and committed offsets, on the same group-metadata log
(``__consumer_offsets``) as the share-group coordinator's records.

The key layout is the share coordinator's (``>h`` record type, ``>h`` key version, string group
id); the record types here follow its three (0-2), and each coordinator's replay skips the
other's types. A ``None`` value is a tombstone.

- ``CLASSIC_GROUP`` (3): the group exists as a classic group; protocol type, generation,
  selected protocol and leader, and (value version 1) the members of a Stable generation with their
  subscription and assignment, so after a restart they carry on heartbeating without a rebalance
  (the record of a generation still rebalancing has none: its members rejoin).
- ``OFFSET_COMMIT`` (4): key adds the topic name and partition; value is the committed offset,
  its leader epoch, metadata and commit timestamp.

Strings are ``>H`` length + UTF-8.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from shareq.coordinators.group.records import CoordinatorRecord

from ..record_codec import RecordReader, write_bytes, write_str
from .errors import ClassicStateError

KEY_VERSION = 0
VALUE_VERSION = 0
GROUP_VALUE_VERSION = 1
"""Classic group values: version 0 has no members, version 1 adds them."""


class ClassicRecordType(enum.IntEnum):
    CLASSIC_GROUP = 3
    OFFSET_COMMIT = 4


RECORD_TYPES = frozenset(int(t) for t in ClassicRecordType)
"""Record types this coordinator owns on the group-metadata log."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    metadata: bytes
    """The member's metadata for the selected protocol (its subscription)."""
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicGroupValue:
    protocol_type: str
    generation: int
    protocol_name: str
    leader: str
    members: tuple[ClassicMemberValue, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


_HEAD = struct.Struct(">hh")
_UH = struct.Struct(">H")
_I = struct.Struct(">i")
_OFFSET = struct.Struct(">qi")
_Q = struct.Struct(">q")
_GEN = struct.Struct(">i")


def record_type(key: bytes) -> int:
    """The record type of any key on the group-metadata log (-1 if too short)."""
    if len(key) < 2:
        return -1
    value: int = _HEAD.unpack_from(key.ljust(4, b"\0"))[0]
    return value


def group_key(group_id: str) -> bytes:
    out = bytearray(_HEAD.pack(ClassicRecordType.CLASSIC_GROUP, KEY_VERSION))
    write_str(out, group_id)
    return bytes(out)


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    out = bytearray(_HEAD.pack(ClassicRecordType.OFFSET_COMMIT, KEY_VERSION))
    write_str(out, group_id)
    write_str(out, topic)
    out += _I.pack(partition)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class DecodedKey:
    record_type: ClassicRecordType
    group_id: str
    topic: str = ""
    partition: int = -1


def decode_key(key: bytes) -> DecodedKey:
    r = RecordReader(key, ClassicStateError, "classic-group record")
    raw_type, version = r.h(), r.h()
    if version != KEY_VERSION:
        raise ClassicStateError(f"unknown key version {version}")
    try:
        kind = ClassicRecordType(raw_type)
    except ValueError:
        raise ClassicStateError(f"record type {raw_type} is not a classic-group record") from None
    group_id = r.s()
    if kind is ClassicRecordType.CLASSIC_GROUP:
        r.done()
        return DecodedKey(kind, group_id)
    topic = r.s()
    partition = r.i()
    r.done()
    return DecodedKey(kind, group_id, topic, partition)


def encode_group_value(value: ClassicGroupValue) -> bytes:
    out = bytearray(_UH.pack(GROUP_VALUE_VERSION))
    write_str(out, value.protocol_type)
    out += _GEN.pack(value.generation)
    write_str(out, value.protocol_name)
    write_str(out, value.leader)
    out += _I.pack(len(value.members))
    for m in value.members:
        write_str(out, m.member_id)
        write_str(out, m.group_instance_id or "")
        write_str(out, m.client_id)
        write_str(out, m.client_host)
        out += _I.pack(m.session_timeout_ms)
        out += _I.pack(m.rebalance_timeout_ms)
        write_bytes(out, m.metadata)
        write_bytes(out, m.assignment)
    return bytes(out)


def decode_group_value(raw: bytes) -> ClassicGroupValue:
    r = RecordReader(raw, ClassicStateError, "classic-group record")
    version = r.uh()
    if version not in (0, GROUP_VALUE_VERSION):
        raise ClassicStateError(f"unknown classic group value version {version}")
    protocol_type = r.s()
    generation = r.i()
    protocol_name, leader = r.s(), r.s()
    members: list[ClassicMemberValue] = []
    if version >= 1:
        for _ in range(r.i()):
            member_id, instance_id, client_id, client_host = r.s(), r.s(), r.s(), r.s()
            session, rebalance = r.i(), r.i()
            metadata, assignment = r.b(), r.b()
            members.append(
                ClassicMemberValue(
                    member_id=member_id,
                    group_instance_id=instance_id or None,
                    client_id=client_id,
                    client_host=client_host,
                    session_timeout_ms=session,
                    rebalance_timeout_ms=rebalance,
                    metadata=metadata,
                    assignment=assignment,
                )
            )
    r.done()
    return ClassicGroupValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol_name=protocol_name,
        leader=leader,
        members=tuple(members),
    )


def encode_offset_value(value: OffsetValue) -> bytes:
    out = bytearray(_UH.pack(VALUE_VERSION))
    out += _OFFSET.pack(value.offset, value.leader_epoch)
    write_str(out, value.metadata)
    out += _Q.pack(value.commit_timestamp_ms)
    return bytes(out)


def decode_offset_value(raw: bytes) -> OffsetValue:
    r = RecordReader(raw, ClassicStateError, "classic-group record")
    version = r.uh()
    if version != VALUE_VERSION:
        raise ClassicStateError(f"unknown offset value version {version}")
    offset, leader_epoch = _OFFSET.unpack(r.take(12))
    metadata = r.s()
    ts = r.q()
    r.done()
    return OffsetValue(offset=offset, leader_epoch=leader_epoch, metadata=metadata, commit_timestamp_ms=ts)


def group_record(group_id: str, value: ClassicGroupValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(
        key=group_key(group_id), value=None if value is None else encode_group_value(value)
    )


def offset_record(group_id: str, topic: str, partition: int, value: OffsetValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(
        key=offset_key(group_id, topic, partition),
        value=None if value is None else encode_offset_value(value),
    )
