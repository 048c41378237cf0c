"""Durable records of KIP-848 consumer groups on the group-metadata log (``__consumer_offsets``).

The key layout is the other coordinators' (``>h`` record type, ``>h`` key version, ``>H``-length
group id), with record types after theirs:

- ``CONSUMER_GROUP`` (5): the group's epoch, assignment epoch, assignor and the subscribed topics'
  metadata it last assigned from.
- ``CONSUMER_MEMBER`` (6): key adds the member id; the member's subscription, epochs, assigned and
  revoking partitions and its target assignment, so a restarted broker answers its next heartbeat
  as if nothing happened (as Kafka's ConsumerGroupMemberMetadata / CurrentMemberAssignment /
  TargetAssignmentMember records do between them).

A ``None`` value is a tombstone. Values are a ``>H`` version then compact JSON (topic ids as
strings): they are written only when a member's state changes, never per heartbeat.
"""

from __future__ import annotations

import enum
import json
import struct
import uuid
from collections.abc import Mapping
from typing import Any

from shareq.coordinators.classic.errors import ClassicStateError
from shareq.coordinators.group.records import CoordinatorRecord

from ..record_codec import RecordReader, write_str
from .assignor import Assignment

KEY_VERSION = 0
VALUE_VERSION = 0

_HEAD = struct.Struct(">hh")
_UH = struct.Struct(">H")


class ConsumerRecordType(enum.IntEnum):
    CONSUMER_GROUP = 5
    CONSUMER_MEMBER = 6


RECORD_TYPES = frozenset(int(t) for t in ConsumerRecordType)


def group_key(group_id: str) -> bytes:
    out = bytearray(_HEAD.pack(ConsumerRecordType.CONSUMER_GROUP, KEY_VERSION))
    write_str(out, group_id)
    return bytes(out)


def member_key(group_id: str, member_id: str) -> bytes:
    out = bytearray(_HEAD.pack(ConsumerRecordType.CONSUMER_MEMBER, KEY_VERSION))
    write_str(out, group_id)
    write_str(out, member_id)
    return bytes(out)


def decode_key(key: bytes) -> tuple[ConsumerRecordType, str, str]:
    """(record type, group id, member id; empty for a group record)."""
    r = RecordReader(key, ClassicStateError, "consumer-group record key")
    try:
        raw_type, version = r.h(), r.h()
        if version != KEY_VERSION:
            raise ClassicStateError(f"unknown consumer-group key version {version}")
        kind = ConsumerRecordType(raw_type)
        parts = []
        while not r.at_end():
            parts.append(r.s())
    except (ValueError, UnicodeDecodeError) as error:
        raise ClassicStateError(f"corrupt consumer-group record key: {error}") from None
    expected = 1 if kind is ConsumerRecordType.CONSUMER_GROUP else 2
    if len(parts) != expected:
        raise ClassicStateError("malformed consumer-group record key")
    return kind, parts[0], parts[1] if expected == 2 else ""


def encode_assignment(assignment: Mapping[uuid.UUID, frozenset[int]]) -> dict[str, list[int]]:
    return {str(t): sorted(ps) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps}


def decode_assignment(raw: Mapping[str, list[int]]) -> Assignment:
    return {uuid.UUID(t): frozenset(ps) for t, ps in raw.items()}


def encode_value(fields: Mapping[str, Any]) -> bytes:
    return _UH.pack(VALUE_VERSION) + json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def decode_value(raw: bytes) -> dict[str, Any]:
    try:
        (version,) = _UH.unpack_from(raw)
        if version != VALUE_VERSION:
            raise ClassicStateError(f"unknown consumer-group value version {version}")
        value = json.loads(raw[2:])
    except (struct.error, ValueError) as error:
        raise ClassicStateError(f"corrupt consumer-group record value: {error}") from None
    if not isinstance(value, dict):
        raise ClassicStateError("corrupt consumer-group record value")
    return value


def record(key: bytes, value: bytes | None) -> CoordinatorRecord:
    return CoordinatorRecord(key=key, value=value)
