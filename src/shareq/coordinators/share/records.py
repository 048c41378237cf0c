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
                   | tagged fields: tag 0 = available_at i64 (epoch ms), on an AVAILABLE batch
                     whose redelivery is delayed (shareq; none otherwise, as Kafka writes them)
    tagged fields  uvarint count, then per field uvarint tag | uvarint size | bytes;
                   tag 0 = delivery_complete_count i32, written only when it is not -1;
                   tag 1 (snapshots) = pending_txn_batches, written only when some are pending

Transactional acknowledgements (KIP-1289) add two record types::

    key 2    txn stage: the share-partition key layout, type 2
    stage    version i16 (0) | snapshot_epoch i32 | leader_epoch i32 | producer_id i64
             | producer_epoch i16 | pending_txn_batches | tagged fields
    key 3    txn marker: type i16 (3) | producer_id i64
    marker   version i16 (0) | producer_epoch i16 | commit i8 | tagged fields
    pending_txn_batches  compact array: per entry producer_id i64 | producer_epoch i16
                   | first_offset i64 | last_offset i64 | delivery_state i8 (the COMMIT target)
                   | delivery_count i16 | ack_type i8 | tagged fields (uvarint 0)

A stage record keeps its entries apart from the share-partition's state until a marker record of
the same producer id (epoch at or above) follows in the log: COMMIT merges them at their target,
ABORT drops them. A snapshot carries every entry still pending for its key, so pruning below it
loses nothing. A marker is written to every state partition the transaction staged in.

A null value (tombstone) under a snapshot key deletes the share-partition's state.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from itertools import chain
from typing import cast

from shareq.protocol.varint import read_uvarint, write_uvarint
from shareq.share.persister import (
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    PendingTxnBatch,
    RedeliveryDelay,
    SharePartitionKey,
    StateBatch,
    state_batch,
)

VALUE_VERSION = 0
_TAG_AVAILABLE_AT = 0
"""A state batch's tagged field: the epoch ms before which its records are not redelivered."""
_TAG_DELIVERY_COMPLETE_COUNT = 0
_TAG_PENDING_TXN_BATCHES = 1


class RecordType(IntEnum):
    """The key's version field: which value schema follows."""

    SNAPSHOT = 0
    UPDATE = 1
    TXN_STAGE = 2
    TXN_MARKER = 3


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
    pending_txn_batches: tuple[PendingTxnBatch, ...] = ()
    delays: tuple[RedeliveryDelay, ...] = ()
    """Redelivery due times of AVAILABLE offsets (on the wire: their state batches' tag 0)."""


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
    delays: tuple[RedeliveryDelay, ...] = ()
    """Due times the update gives offsets among its state batches."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareTxnStage:
    """Acknowledgements staged by transaction ``producer_id`` (KIP-1289), pending its marker."""

    snapshot_epoch: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    batches: tuple[PendingTxnBatch, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareTxnMarker:
    """Transaction ``producer_id`` ended: settle what it staged in this state partition."""

    producer_id: int
    producer_epoch: int
    commit: bool


ShareRecordValue = ShareSnapshot | ShareUpdate | ShareTxnStage | ShareTxnMarker

MARKER_KEY = SharePartitionKey(group_id="", topic_id=uuid.UUID(int=0), partition=-1)
"""The ``StateRecord.key`` of a marker record, which belongs to no one share-partition."""


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
_BATCH_UNTAGGED = struct.Struct(">qqbhx")
"""A state batch without tagged fields (their count, 0, is the pad byte)."""
_GROUP = 64
_BATCH_GROUP = struct.Struct(">" + "qqbhx" * _GROUP)
"""``_GROUP`` state batches in one pack: a write with a REJECT every tenth record carries
hundreds."""
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PENDING = struct.Struct(">qhqqbhbB")
_STAGE_HEAD = struct.Struct(">hiiqh")
_MARKER_KEY = struct.Struct(">hq")
_MARKER = struct.Struct(">hhbB")
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


_BATCH_DUE = struct.Struct(">qqbhBBBq")
"""A state batch with one tagged field, its available_at (tag 0, 8 bytes)."""


def _with_delays(
    batches: tuple[StateBatch, ...], delays: tuple[RedeliveryDelay, ...]
) -> list[tuple[StateBatch, int]]:
    """``batches`` cut where ``delays`` begin and end, each piece with its due time (0: none)."""
    out: list[tuple[StateBatch, int]] = []
    i = 0
    n = len(delays)
    for b in batches:
        first, last = b.first_offset, b.last_offset
        while i < n and delays[i].last_offset < first:
            i += 1
        j = i
        while first <= last:
            if j >= n or delays[j].first_offset > last:
                out.append((state_batch(first, last, b.delivery_state, b.delivery_count), 0))
                break
            d = delays[j]
            if d.first_offset > first:
                out.append((state_batch(first, d.first_offset - 1, b.delivery_state, b.delivery_count), 0))
                first = d.first_offset
            end = min(last, d.last_offset)
            out.append((state_batch(first, end, b.delivery_state, b.delivery_count), d.due_ms))
            first = end + 1
            if d.last_offset <= last:
                j += 1
    return out


def _encode_delayed_batches(
    out: bytearray, batches: tuple[StateBatch, ...], delays: tuple[RedeliveryDelay, ...]
) -> None:
    """The state batch array, each batch a due time covers tagged with it."""
    pieces = _with_delays(batches, delays)
    write_uvarint(out, len(pieces) + 1)
    for b, due in pieces:
        if due:
            out += _BATCH_DUE.pack(*b, 1, _TAG_AVAILABLE_AT, 8, due)
        else:
            out += _BATCH_UNTAGGED.pack(*b)


def _encode_batches_and_tags(
    out: bytearray, batches: tuple[StateBatch, ...], dcc: int, delays: tuple[RedeliveryDelay, ...] = ()
) -> None:
    if delays:
        _encode_delayed_batches(out, batches, delays)
        if dcc == UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
            out.append(0)
        else:
            out += b"\x01\x00\x04" + _I32.pack(dcc)
        return
    write_uvarint(out, len(batches) + 1)
    # A StateBatch is the wire's fields in order: whole groups of them go through one pack.
    full = len(batches) - len(batches) % _GROUP
    flat = chain.from_iterable
    pack_group = _BATCH_GROUP.pack
    out += b"".join([pack_group(*flat(batches[i : i + _GROUP])) for i in range(0, full, _GROUP)])
    pack = _BATCH_UNTAGGED.pack
    out += b"".join([pack(*b) for b in batches[full:]])
    if dcc == UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
        out.append(0)
    else:
        out += b"\x01\x00\x04" + _I32.pack(dcc)


def _encode_pending(out: bytearray, pending: tuple[PendingTxnBatch, ...]) -> None:
    write_uvarint(out, len(pending) + 1)
    for p in pending:
        out += _PENDING.pack(
            p.producer_id, p.producer_epoch, p.first_offset, p.last_offset,
            p.delivery_state, p.delivery_count, p.ack_type, 0,
        )  # fmt: skip


def _decode_pending(buf: bytes, pos: int) -> tuple[tuple[PendingTxnBatch, ...], int]:
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        raise StateRecordError("pending_txn_batches may not be null")
    out: list[PendingTxnBatch] = []
    try:
        for _ in range(n - 1):
            pid, epoch, first, last, state, count, ack, tags = _PENDING.unpack_from(buf, pos)
            if tags:
                _, pos = _skip_tagged_fields(buf, pos + _PENDING.size - 1)
            else:
                pos += _PENDING.size
            out.append(
                PendingTxnBatch(
                    producer_id=pid,
                    producer_epoch=epoch,
                    first_offset=first,
                    last_offset=last,
                    delivery_state=state,
                    delivery_count=count,
                    ack_type=ack,
                )
            )
    except struct.error:
        raise StateRecordError("truncated pending transaction batch") from None
    return tuple(out), pos


def encode_value(value: ShareRecordValue) -> bytes:
    if isinstance(value, ShareTxnStage):
        out = bytearray(
            _STAGE_HEAD.pack(
                VALUE_VERSION,
                value.snapshot_epoch,
                value.leader_epoch,
                value.producer_id,
                value.producer_epoch,
            )
        )
        _encode_pending(out, value.batches)
        out.append(0)
        return bytes(out)
    if isinstance(value, ShareTxnMarker):
        return _MARKER.pack(VALUE_VERSION, value.producer_epoch, 1 if value.commit else 0, 0)
    if type(value) is ShareUpdate and len(value.state_batches) == 1 and not value.delays:
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
        if value.pending_txn_batches:
            _encode_snapshot_with_pending(out, value)
            return bytes(out)
    else:
        out += _UPDATE_HEAD.pack(VALUE_VERSION, value.snapshot_epoch, value.leader_epoch, value.start_offset)
    _encode_batches_and_tags(out, value.state_batches, value.delivery_complete_count, value.delays)
    return bytes(out)


def _encode_snapshot_with_pending(out: bytearray, value: ShareSnapshot) -> None:
    if value.delays:
        _encode_delayed_batches(out, value.state_batches, value.delays)
    else:
        write_uvarint(out, len(value.state_batches) + 1)
        for b in value.state_batches:
            out += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count, 0)
    tags = bytearray()
    ntags = 1
    if value.delivery_complete_count != UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
        ntags = 2
        tags += b"\x00\x04" + _I32.pack(value.delivery_complete_count)
    pending = bytearray()
    _encode_pending(pending, value.pending_txn_batches)
    write_uvarint(tags, _TAG_PENDING_TXN_BATCHES)
    write_uvarint(tags, len(pending))
    tags += pending
    write_uvarint(out, ntags)
    out += tags


def _skip_tagged_fields(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a tagged-field section; return (delivery_complete_count or -1, next position)."""
    dcc, _, pos = _read_tagged_fields(buf, pos)
    return dcc, pos


def _read_tagged_fields(buf: bytes, pos: int) -> tuple[int, tuple[PendingTxnBatch, ...], int]:
    """Read a tagged-field section: (delivery_complete_count or -1, pending txn batches, next position)."""
    dcc = UNINITIALIZED_DELIVERY_COMPLETE_COUNT
    pending: tuple[PendingTxnBatch, ...] = ()
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
        elif tag == _TAG_PENDING_TXN_BATCHES:
            pending, end = _decode_pending(buf, pos)
            if end != pos + size:
                raise StateRecordError("pending_txn_batches tag has a bad size")
        pos += size
    return dcc, pending, pos


def _read_batch_tags(buf: bytes, pos: int) -> tuple[int, int]:
    """A state batch's tagged fields: (its available_at or 0, next position)."""
    due = 0
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise StateRecordError("tagged field runs past the end of the value")
        if tag == _TAG_AVAILABLE_AT:
            if size != 8:
                raise StateRecordError("available_at tag must be 8 bytes")
            due = _I64.unpack_from(buf, pos)[0]
        pos += size
    return due, pos


def _joined_with_delays(
    pieces: list[StateBatch], dues: list[tuple[int, int, int]]
) -> tuple[tuple[StateBatch, ...], tuple[RedeliveryDelay, ...]]:
    """Pieces cut at due times joined back into batches, and the due times as delays."""
    batches: list[StateBatch] = []
    for b in pieces:
        if batches:
            p = batches[-1]
            if p[1] + 1 == b[0] and p[2] == b[2] and p[3] == b[3]:
                batches[-1] = state_batch(p[0], b[1], p[2], p[3])
                continue
        batches.append(b)
    delays: list[RedeliveryDelay] = []
    for first, last, due in dues:
        if delays and delays[-1].last_offset + 1 == first and delays[-1].due_ms == due:
            delays[-1] = RedeliveryDelay(delays[-1].first_offset, last, due)
        else:
            delays.append(RedeliveryDelay(first, last, due))
    return tuple(batches), tuple(delays)


def _decode_batches_and_tags(
    buf: bytes, pos: int
) -> tuple[tuple[StateBatch, ...], int, tuple[RedeliveryDelay, ...]]:
    batches, dcc, _, delays = _decode_batches_and_all_tags(buf, pos)
    return batches, dcc, delays


def _decode_batches_and_all_tags(
    buf: bytes, pos: int
) -> tuple[tuple[StateBatch, ...], int, tuple[PendingTxnBatch, ...], tuple[RedeliveryDelay, ...]]:
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        raise StateRecordError("state batches may not be null")
    n -= 1
    batches: list[StateBatch] = []
    dues: list[tuple[int, int, int]] = []
    unpack = _BATCH.unpack_from
    try:
        for _ in range(n):
            first, last, state, count, tags = unpack(buf, pos)
            if tags:
                due, pos = _read_batch_tags(buf, pos + 19)
                if due:
                    dues.append((first, last, due))
            else:
                pos += 20
            batches.append(state_batch(first, last, state, count))
    except struct.error:
        raise StateRecordError("truncated state batch") from None
    dcc, pending, pos = _read_tagged_fields(buf, pos)
    if pos != len(buf):
        raise StateRecordError("trailing bytes after a state record value")
    if dues:
        joined, delays = _joined_with_delays(batches, dues)
        return joined, dcc, pending, delays
    return tuple(batches), dcc, pending, ()


def decode_value(record_type: RecordType, data: bytes) -> ShareRecordValue:
    try:
        if record_type is RecordType.TXN_STAGE:
            version, s_epoch, l_epoch, pid, p_epoch = _STAGE_HEAD.unpack_from(data)
            if version != VALUE_VERSION:
                raise StateRecordError(f"unknown txn stage value version {version}")
            staged, pos = _decode_pending(data, _STAGE_HEAD.size)
            _, pos = _skip_tagged_fields(data, pos)
            if pos != len(data):
                raise StateRecordError("trailing bytes after a txn stage value")
            return ShareTxnStage(
                snapshot_epoch=s_epoch,
                leader_epoch=l_epoch,
                producer_id=pid,
                producer_epoch=p_epoch,
                batches=staged,
            )
        if record_type is RecordType.TXN_MARKER:
            version, p_epoch, commit, tags = _MARKER.unpack(data)
            if version != VALUE_VERSION or tags or commit not in (0, 1):
                raise StateRecordError("bad txn marker value")
            return ShareTxnMarker(producer_id=-1, producer_epoch=p_epoch, commit=bool(commit))
        if record_type is RecordType.SNAPSHOT:
            version, s_epoch, st_epoch, l_epoch, start, created, written = _SNAPSHOT_HEAD.unpack_from(data)
            if version != VALUE_VERSION:
                raise StateRecordError(f"unknown ShareSnapshot value version {version}")
            batches, dcc, pending, delays = _decode_batches_and_all_tags(data, _SNAPSHOT_HEAD.size)
            return ShareSnapshot(
                snapshot_epoch=s_epoch,
                state_epoch=st_epoch,
                leader_epoch=l_epoch,
                start_offset=start,
                delivery_complete_count=dcc,
                create_timestamp=created,
                write_timestamp=written,
                state_batches=batches,
                pending_txn_batches=pending,
                delays=delays,
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
    batches, dcc, delays = _decode_batches_and_tags(data, _UPDATE_HEAD.size)
    return ShareUpdate(
        snapshot_epoch=s_epoch,
        leader_epoch=l_epoch,
        start_offset=start,
        delivery_complete_count=dcc,
        state_batches=batches,
        delays=delays,
    )


# Start-up replay decodes millions of updates; filling the slots directly halves the cost of the
# frozen dataclasses' keyword __init__. Only used for values that came from valid bytes.
_new = object.__new__


def _setter(cls: type, name: str) -> Callable[[object, object], None]:
    return cast(Callable[[object, object], None], getattr(cls, name).__set__)


_SU_SNAPSHOT_EPOCH = _setter(ShareUpdate, "snapshot_epoch")
_SU_LEADER_EPOCH = _setter(ShareUpdate, "leader_epoch")
_SU_START = _setter(ShareUpdate, "start_offset")
_SU_DCC = _setter(ShareUpdate, "delivery_complete_count")
_SU_BATCHES = _setter(ShareUpdate, "state_batches")
_SU_DELAYS = _setter(ShareUpdate, "delays")


def _one_batch_update(
    s_epoch: int, l_epoch: int, start: int, dcc: int, first: int, last: int, state: int, count: int
) -> ShareUpdate:
    batch = state_batch(first, last, state, count)
    update = _new(ShareUpdate)
    _SU_SNAPSHOT_EPOCH(update, s_epoch)
    _SU_LEADER_EPOCH(update, l_epoch)
    _SU_START(update, start)
    _SU_DCC(update, dcc)
    _SU_BATCHES(update, (batch,))
    _SU_DELAYS(update, ())
    return update


def encode_marker_key(producer_id: int) -> bytes:
    return _MARKER_KEY.pack(RecordType.TXN_MARKER, producer_id)


def encode_record(record: StateRecord) -> tuple[bytes, bytes | None]:
    """Key and value bytes of a record; a tombstone is a snapshot key with a null value."""
    value = record.value
    if value is None:
        return encode_key(RecordType.SNAPSHOT, record.key), None
    if isinstance(value, ShareTxnMarker):
        return encode_marker_key(value.producer_id), encode_value(value)
    if isinstance(value, ShareSnapshot):
        record_type = RecordType.SNAPSHOT
    elif isinstance(value, ShareTxnStage):
        record_type = RecordType.TXN_STAGE
    else:
        record_type = RecordType.UPDATE
    return encode_key(record_type, record.key), encode_value(value)


def decode_marker(key: bytes, value: bytes) -> ShareTxnMarker:
    """A marker record from its key and value bytes."""
    try:
        kind, pid = _MARKER_KEY.unpack(key)
    except struct.error:
        raise StateRecordError("bad txn marker key") from None
    if kind != RecordType.TXN_MARKER:
        raise StateRecordError(f"not a txn marker key: type {kind}")
    m = decode_value(RecordType.TXN_MARKER, value)
    assert isinstance(m, ShareTxnMarker)
    return ShareTxnMarker(producer_id=pid, producer_epoch=m.producer_epoch, commit=m.commit)


def decode_record(key: bytes, value: bytes | None) -> StateRecord:
    if key[:2] == b"\x00\x03" and value is not None:
        return StateRecord(key=MARKER_KEY, value=decode_marker(key, value))
    record_type, share_key = decode_key(key)
    if value is None:
        return StateRecord(key=share_key, value=None)
    return StateRecord(key=share_key, value=decode_value(record_type, value))
