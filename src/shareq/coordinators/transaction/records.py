"""Durable records of the transaction coordinator on ``__transaction_state`` (one partition).

Key: ``>h`` key version (0), then the transactional id (``>H`` length + UTF-8).
Value (``None`` is a tombstone, written when an idle id expires)::

    >h version (0) | >q producer id | >h producer epoch | >i timeout ms | >b state
    >q transaction start ms | >q last update ms | >i partition count
    partition count x (>H topic length, topic UTF-8, >i partition)

Version 1 appends the fields of transaction.version 2 (Kafka's TransactionLogValue v1 tagged
fields)::

    >q previous producer id | >q next producer id | >b client transaction version

A value whose three are their defaults is written as version 0, as before they existed.

The fields are those of Kafka's TransactionLogValue; state ids are Kafka's.
"""

from __future__ import annotations

import struct

from .state import NO_PRODUCER_ID, TV_0, TxnMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0
VALUE_VERSION_TV2 = 1

_H = struct.Struct(">h")
_UH = struct.Struct(">H")
_HEAD = struct.Struct(">hqhibqqi")
_I = struct.Struct(">i")
_TV2_TAIL = struct.Struct(">qqb")


class TxnRecordError(ValueError):
    """A malformed ``__transaction_state`` record."""


def _string(out: bytearray, s: str) -> None:
    raw = s.encode()
    out += _UH.pack(len(raw))
    out += raw


def _read_string(buf: bytes, pos: int) -> tuple[str, int]:
    if pos + 2 > len(buf):
        raise TxnRecordError("truncated string length")
    (n,) = _UH.unpack_from(buf, pos)
    pos += 2
    if pos + n > len(buf):
        raise TxnRecordError("truncated string")
    return buf[pos : pos + n].decode(), pos + n


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_H.pack(KEY_VERSION))
    _string(out, transactional_id)
    return bytes(out)


def decode_key(key: bytes) -> str:
    if len(key) < 2 or _H.unpack_from(key)[0] != KEY_VERSION:
        raise TxnRecordError("unknown transaction key version")
    return _read_string(key, 2)[0]


def encode_value(meta: TxnMetadata) -> bytes:
    partitions = sorted(meta.partitions)
    tail = (meta.previous_producer_id, meta.next_producer_id, meta.client_version)
    version = VALUE_VERSION if tail == (NO_PRODUCER_ID, NO_PRODUCER_ID, TV_0) else VALUE_VERSION_TV2
    out = bytearray(
        _HEAD.pack(
            version,
            meta.producer_id,
            meta.producer_epoch,
            meta.timeout_ms,
            int(meta.state),
            meta.start_ms,
            meta.update_ms,
            len(partitions),
        )
    )
    for topic, partition in partitions:
        _string(out, topic)
        out += _I.pack(partition)
    if version == VALUE_VERSION_TV2:
        out += _TV2_TAIL.pack(*tail)
    return bytes(out)


def decode_value(transactional_id: str, value: bytes) -> TxnMetadata:
    if len(value) < _HEAD.size:
        raise TxnRecordError("truncated transaction value")
    version, pid, epoch, timeout, state, start, update, count = _HEAD.unpack_from(value)
    if version not in (VALUE_VERSION, VALUE_VERSION_TV2):
        raise TxnRecordError(f"unknown transaction value version {version}")
    pos = _HEAD.size
    partitions = []
    for _ in range(count):
        topic, pos = _read_string(value, pos)
        if pos + 4 > len(value):
            raise TxnRecordError("truncated partition")
        partitions.append((topic, _I.unpack_from(value, pos)[0]))
        pos += 4
    previous, next_pid, client_version = NO_PRODUCER_ID, NO_PRODUCER_ID, TV_0
    if version == VALUE_VERSION_TV2:
        if pos + _TV2_TAIL.size > len(value):
            raise TxnRecordError("truncated transaction.version 2 fields")
        previous, next_pid, client_version = _TV2_TAIL.unpack_from(value, pos)
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=pid,
        producer_epoch=epoch,
        timeout_ms=timeout,
        state=TxnState(state),
        partitions=frozenset(partitions),
        start_ms=start,
        update_ms=update,
        previous_producer_id=previous,
        next_producer_id=next_pid,
        client_version=client_version,
    )
