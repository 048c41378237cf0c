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


def _str(out: bytearray, s: str) -> None:
    raw = s.encode()
    out += _UH.pack(len(raw))
    out += raw


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise ClassicStateError("truncated classic-group record")
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def s(self) -> str:
        (n,) = _UH.unpack(self.take(2))
        return self.take(n).decode()

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise ClassicStateError("trailing bytes in classic-group record")


def record_type(key: bytes) -> int:
    """The record type of any key on the group-metadata log (-1 if too short)."""
    if len(key) < 2:
        return -1
    value: int = _HEAD.unpack_from(key.ljust(4, b"\0"))[0]
    return value


def group_key(group_id: str) -> bytes:
    out = bytearray(_HEAD.pack(ClassicRecordType.CLASSIC_GROUP, KEY_VERSION))
    _str(out, group_id)
    return bytes(out)


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    out = bytearray(_HEAD.pack(ClassicRecordType.OFFSET_COMMIT, KEY_VERSION))
    _str(out, group_id)
    _str(out, topic)
    out += _I.pack(partition)
    return bytes(out)


@dataclass(frozen=True, slots=True)
class DecodedKey:
    record_type: ClassicRecordType
    group_id: str
    topic: str = ""
    partition: int = -1


def decode_key(key: bytes) -> DecodedKey:
    r = _Reader(key)
    raw_type, version = _HEAD.unpack(r.take(4))
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
    (partition,) = _I.unpack(r.take(4))
    r.done()
    return DecodedKey(kind, group_id, topic, partition)


def _bytes(out: bytearray, b: bytes) -> None:
    out += _I.pack(len(b))
    out += b


def encode_group_value(value: ClassicGroupValue) -> bytes:
    out = bytearray(_UH.pack(GROUP_VALUE_VERSION))
    _str(out, value.protocol_type)
    out += _GEN.pack(value.generation)
    _str(out, value.protocol_name)
    _str(out, value.leader)
    out += _I.pack(len(value.members))
    for m in value.members:
        _str(out, m.member_id)
        _str(out, m.group_instance_id or "")
        _str(out, m.client_id)
        _str(out, m.client_host)
        out += _I.pack(m.session_timeout_ms)
        out += _I.pack(m.rebalance_timeout_ms)
        _bytes(out, m.metadata)
        _bytes(out, m.assignment)
    return bytes(out)


def decode_group_value(raw: bytes) -> ClassicGroupValue:
    r = _Reader(raw)
    (version,) = _UH.unpack(r.take(2))
    if version not in (0, GROUP_VALUE_VERSION):
        raise ClassicStateError(f"unknown classic group value version {version}")
    protocol_type = r.s()
    (generation,) = _GEN.unpack(r.take(4))
    protocol_name, leader = r.s(), r.s()
    members: list[ClassicMemberValue] = []
    if version >= 1:
        (count,) = _I.unpack(r.take(4))
        for _ in range(count):
            member_id, instance_id, client_id, client_host = r.s(), r.s(), r.s(), r.s()
            session, rebalance = _I.unpack(r.take(4))[0], _I.unpack(r.take(4))[0]
            metadata = r.take(_I.unpack(r.take(4))[0])
            assignment = r.take(_I.unpack(r.take(4))[0])
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
    _str(out, value.metadata)
    out += _Q.pack(value.commit_timestamp_ms)
    return bytes(out)


def decode_offset_value(raw: bytes) -> OffsetValue:
    r = _Reader(raw)
    (version,) = _UH.unpack(r.take(2))
    if version != VALUE_VERSION:
        raise ClassicStateError(f"unknown offset value version {version}")
    offset, leader_epoch = _OFFSET.unpack(r.take(12))
    metadata = r.s()
    (ts,) = _Q.unpack(r.take(8))
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
