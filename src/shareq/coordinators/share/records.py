"""ShareSnapshot and ShareUpdate: the two record types of the share-group state topic.

A record's key names the share-partition and, in its version field, the record type (as on
Kafka's coordinator topics); the value carries the state. Layout, big-endian, following Kafka's
ShareSnapshotKey/ShareUpdateKey (non-flexible) and ShareSnapshotValue/ShareUpdateValue (flexible,
version 0)::

    key      type i16 (0 snapshot, 1 update) | group_id string (i16 length + UTF-8)
             | topic_id uuid (16 bytes) | partition i32
    snapshot version i16 (0) | snapshot_epoch i32 | state_epoch i32 | leader_epoch i32
             | start_offset i64 | create_timestamp i64 | write_timestamp i64
             | state_batches | tagged fields
    update   version i16 (0) | snapshot_epoch i32 | leader_epoch i32 | start_offset i64
             | state_batches | tagged fields
    state_batches  compact array: uvarint (count + 1), then per batch
                   first_offset i64 | last_offset i64 | delivery_state i8 | delivery_count i16
                   | tagged fields (uvarint 0)
    tagged fields  uvarint count, then per field uvarint tag | uvarint size | bytes;
                   tag 0 = delivery_complete_count i32, written only when it is not -1

A null value (tombstone) under a snapshot key deletes the share-partition's state.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import cast

from shareq.protocol.varint import read_uvarint, write_uvarint
from shareq.share.persister import (
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    SharePartitionKey,
    StateBatch,
)

VALUE_VERSION = 0
_TAG_DELIVERY_COMPLETE_COUNT = 0


class RecordType(IntEnum):
    """The key's version field: which value schema follows."""

    SNAPSHOT = 0
    UPDATE = 1


class StateRecordError(ValueError):
    """A state-topic record could not be decoded (corrupt or from an unknown version)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareSnapshot:
    """The complete durable state of one share-partition."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareUpdate:
    """A delta against the snapshot with the same ``snapshot_epoch``.

    ``start_offset`` -1 and ``delivery_complete_count`` -1 mean "not changing".
    """

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple[StateBatch, ...]


ShareRecordValue = ShareSnapshot | ShareUpdate


@dataclass(frozen=True, slots=True, kw_only=True)
class StateRecord:
    """One record for the state topic: a key and a value, or ``None`` for a tombstone."""

    key: SharePartitionKey
    value: ShareRecordValue | None


_KEY_HEAD = struct.Struct(">hh")
_KEY_TAIL = struct.Struct(">16si")
_SNAPSHOT_HEAD = struct.Struct(">hiiiqqq")
_UPDATE_HEAD = struct.Struct(">hiiq")
_BATCH = struct.Struct(">qqbhB")
_I32 = struct.Struct(">i")
# The common update: one state batch, with or without delivery_complete_count (decode fast path).
_UPDATE_ONE = struct.Struct(">hiiqBqqbhB")
_UPDATE_ONE_DCC = struct.Struct(">hiiqBqqbhBBBBi")
_UPDATE_ONE_NO_DCC = struct.Struct(">hiiqBqqbhBB")
_DCC_TAG = b"\x01\x00\x04"


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    return read_uvarint(buf, pos, StateRecordError)


def encode_key(record_type: RecordType, key: SharePartitionKey) -> bytes:
    group = key.group_id.encode()
    return _KEY_HEAD.pack(record_type, len(group)) + group + _KEY_TAIL.pack(key.topic_id.bytes, key.partition)


def decode_key(data: bytes) -> tuple[RecordType, SharePartitionKey]:
    try:
        version, n = _KEY_HEAD.unpack_from(data)
        topic_id, partition = _KEY_TAIL.unpack_from(data, 4 + n)
        group = data[4 : 4 + n].decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise StateRecordError(f"bad state record key: {exc}") from None
    if len(data) != 4 + n + _KEY_TAIL.size or n < 0:
        raise StateRecordError("state record key has a bad length")
    try:
        record_type = RecordType(version)
    except ValueError:
        raise StateRecordError(f"unknown state record type {version}") from None
    return record_type, SharePartitionKey(
        group_id=group, topic_id=uuid.UUID(bytes=topic_id), partition=partition
    )


def _encode_batches_and_tags(out: bytearray, batches: tuple[StateBatch, ...], dcc: int) -> None:
    write_uvarint(out, len(batches) + 1)
    pack = _BATCH.pack
    for b in batches:
        out += pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count, 0)
    if dcc == UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
        out.append(0)
    else:
        out += b"\x01\x00\x04" + _I32.pack(dcc)


def encode_value(value: ShareRecordValue) -> bytes:
    if type(value) is ShareUpdate and len(value.state_batches) == 1:
        # The acknowledgement update, in one pack (the same bytes as the general path below).
        b = value.state_batches[0]
        dcc = value.delivery_complete_count
        if dcc == UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
            return _UPDATE_ONE_NO_DCC.pack(
                VALUE_VERSION, value.snapshot_epoch, value.leader_epoch, value.start_offset, 2,
                b.first_offset, b.last_offset, b.delivery_state, b.delivery_count, 0, 0,
            )  # fmt: skip
        return _UPDATE_ONE_DCC.pack(
            VALUE_VERSION, value.snapshot_epoch, value.leader_epoch, value.start_offset, 2,
            b.first_offset, b.last_offset, b.delivery_state, b.delivery_count, 0, 1, 0, 4, dcc,
        )  # fmt: skip
    out = bytearray()
    if isinstance(value, ShareSnapshot):
        out += _SNAPSHOT_HEAD.pack(
            VALUE_VERSION,
            value.snapshot_epoch,
            value.state_epoch,
            value.leader_epoch,
            value.start_offset,
            value.create_timestamp,
            value.write_timestamp,
        )
    else:
        out += _UPDATE_HEAD.pack(VALUE_VERSION, value.snapshot_epoch, value.leader_epoch, value.start_offset)
    _encode_batches_and_tags(out, value.state_batches, value.delivery_complete_count)
    return bytes(out)


def _skip_tagged_fields(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a tagged-field section; return (delivery_complete_count or -1, next position)."""
    dcc = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise StateRecordError("tagged field runs past the end of the value")
        if tag == _TAG_DELIVERY_COMPLETE_COUNT:
            if size != 4:
                raise StateRecordError("delivery_complete_count tag must be 4 bytes")
            dcc = _I32.unpack_from(buf, pos)[0]
        pos += size
    return dcc, pos


def _decode_batches_and_tags(buf: bytes, pos: int) -> tuple[tuple[StateBatch, ...], int]:
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        raise StateRecordError("state batches may not be null")
    n -= 1
    batches: list[StateBatch] = []
    unpack = _BATCH.unpack_from
    try:
        for _ in range(n):
            first, last, state, count, tags = unpack(buf, pos)
            if tags:
                _, pos = _skip_tagged_fields(buf, pos + 19)
            else:
                pos += 20
            batches.append(
                StateBatch(first_offset=first, last_offset=last, delivery_state=state, delivery_count=count)
            )
    except struct.error:
        raise StateRecordError("truncated state batch") from None
    dcc, pos = _skip_tagged_fields(buf, pos)
    if pos != len(buf):
        raise StateRecordError("trailing bytes after a state record value")
    return tuple(batches), dcc


def decode_value(record_type: RecordType, data: bytes) -> ShareRecordValue:
    try:
        if record_type is RecordType.SNAPSHOT:
            version, s_epoch, st_epoch, l_epoch, start, created, written = _SNAPSHOT_HEAD.unpack_from(data)
            if version != VALUE_VERSION:
                raise StateRecordError(f"unknown ShareSnapshot value version {version}")
            batches, dcc = _decode_batches_and_tags(data, _SNAPSHOT_HEAD.size)
            return ShareSnapshot(
                snapshot_epoch=s_epoch,
                state_epoch=st_epoch,
                leader_epoch=l_epoch,
                start_offset=start,
                delivery_complete_count=dcc,
                create_timestamp=created,
                write_timestamp=written,
                state_batches=batches,
            )
        if len(data) == _UPDATE_ONE_DCC.size and data[18] == 2 and data[39:42] == _DCC_TAG:
            version, s_epoch, l_epoch, start, _, first, last, state, count, tags, _, _, _, dcc = (
                _UPDATE_ONE_DCC.unpack(data)
            )
            if version == VALUE_VERSION and tags == 0:
                return _one_batch_update(s_epoch, l_epoch, start, dcc, first, last, state, count)
        elif len(data) == _UPDATE_ONE.size + 1 and data[18] == 2 and data[-1] == 0:
            version, s_epoch, l_epoch, start, _, first, last, state, count, tags = _UPDATE_ONE.unpack_from(
                data
            )
            if version == VALUE_VERSION and tags == 0:
                dcc = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
                return _one_batch_update(s_epoch, l_epoch, start, dcc, first, last, state, count)
        version, s_epoch, l_epoch, start = _UPDATE_HEAD.unpack_from(data)
    except struct.error:
        raise StateRecordError("truncated state record value") from None
    if version != VALUE_VERSION:
        raise StateRecordError(f"unknown ShareUpdate value version {version}")
    batches, dcc = _decode_batches_and_tags(data, _UPDATE_HEAD.size)
    return ShareUpdate(
        snapshot_epoch=s_epoch,
        leader_epoch=l_epoch,
        start_offset=start,
        delivery_complete_count=dcc,
        state_batches=batches,
    )


# Start-up replay decodes millions of updates; filling the slots directly halves the cost of the
# frozen dataclasses' keyword __init__. Only used for values that came from valid bytes.
_new = object.__new__


def _setter(cls: type, name: str) -> Callable[[object, object], None]:
    return cast(Callable[[object, object], None], getattr(cls, name).__set__)


_SB_FIRST = _setter(StateBatch, "first_offset")
_SB_LAST = _setter(StateBatch, "last_offset")
_SB_STATE = _setter(StateBatch, "delivery_state")
_SB_COUNT = _setter(StateBatch, "delivery_count")
_SU_SNAPSHOT_EPOCH = _setter(ShareUpdate, "snapshot_epoch")
_SU_LEADER_EPOCH = _setter(ShareUpdate, "leader_epoch")
_SU_START = _setter(ShareUpdate, "start_offset")
_SU_DCC = _setter(ShareUpdate, "delivery_complete_count")
_SU_BATCHES = _setter(ShareUpdate, "state_batches")


def _one_batch_update(
    s_epoch: int, l_epoch: int, start: int, dcc: int, first: int, last: int, state: int, count: int
) -> ShareUpdate:
    batch = _new(StateBatch)
    _SB_FIRST(batch, first)
    _SB_LAST(batch, last)
    _SB_STATE(batch, state)
    _SB_COUNT(batch, count)
    update = _new(ShareUpdate)
    _SU_SNAPSHOT_EPOCH(update, s_epoch)
    _SU_LEADER_EPOCH(update, l_epoch)
    _SU_START(update, start)
    _SU_DCC(update, dcc)
    _SU_BATCHES(update, (batch,))
    return update


def encode_record(record: StateRecord) -> tuple[bytes, bytes | None]:
    """Key and value bytes of a record; a tombstone is a snapshot key with a null value."""
    if record.value is None:
        return encode_key(RecordType.SNAPSHOT, record.key), None
    record_type = RecordType.SNAPSHOT if isinstance(record.value, ShareSnapshot) else RecordType.UPDATE
    return encode_key(record_type, record.key), encode_value(record.value)


def decode_record(key: bytes, value: bytes | None) -> StateRecord:
    record_type, share_key = decode_key(key)
    if value is None:
        return StateRecord(key=share_key, value=None)
    return StateRecord(key=share_key, value=decode_value(record_type, value))
