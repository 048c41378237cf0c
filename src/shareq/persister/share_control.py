"""The payload of SHARE_CHECKPOINT and SHARE_DELTA control records (the in-log persister).

Each record is the single record of a control batch in the share-partition's own topic-partition
(``shareq.log.records.encode_share_control_batch``: key = version i16 0 | type i16, 5 checkpoint or
6 delta). Its value, big-endian, ``string`` = i16 length + UTF-8::

    version i16 (0) | kind i8 | group_id string | checkpoint_epoch i32 | back_offset i64
    | state_epoch i32 | leader_epoch i32 | start_offset i64 | end_offset i64
    | delivery_complete_count i32 | create_timestamp i64 | write_timestamp i64
    | states: count i32, then per run  base_offset i64 | last_offset i64 | state i8 | delivery_count i16
    | pending: count i32, then per entry  producer_id i64 | producer_epoch i16 | first_offset i64
                                         | last_offset i64 | state i8 | delivery_count i16 | ack_type i8
    | txn end (kind 2 only): producer_id i64 | producer_epoch i16 | commit i8
    | delays (kind 0, only when some): count i32, then per entry  first_offset i64
                                         | last_offset i64 | available_at i64 (epoch ms)

``kind`` 0 is state (a checkpoint's whole state, or a delta's changed runs), 1 staged
acknowledgements of a transaction (KIP-1289, ``pending`` holds them), 2 a transaction's end, 3 a
tombstone (a checkpoint saying the group's state on this partition was deleted). A checkpoint has
``back_offset`` -1; a delta names the offset of the previous control record of the same group with
the same checkpoint epoch, so a chain can be followed backwards to its checkpoint. In a delta,
``start_offset``/``end_offset`` -1 and ``delivery_complete_count`` -1 mean "unchanged". The seed's
``uint16`` checkpoint epoch is widened to i32 so that it never wraps. ``delays`` are the redelivery
due times of AVAILABLE offsets (shareq's backoff); a record without them ends before the section.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from shareq.coordinators.share.records import ShareSnapshot, ShareTxnMarker, ShareTxnStage, ShareUpdate
from shareq.log.records import CONTROL_TYPE_SHARE_CHECKPOINT, CONTROL_TYPE_SHARE_DELTA
from shareq.share.persister import NO_START_OFFSET, PendingTxnBatch, RedeliveryDelay, StateBatch

VALUE_VERSION = 0
NO_OFFSET = -1

_HEAD = struct.Struct(">hb")
_FIXED = struct.Struct(">iqiiqqiqq")  # epoch, back, state epoch, leader epoch, start, end, dcc, create, write
_STATE = struct.Struct(">qqbh")
_PENDING = struct.Struct(">qhqqbhb")
_COUNT = struct.Struct(">i")
_TXN_END = struct.Struct(">qhb")
_DELAY = struct.Struct(">qqq")
_STR_LEN = struct.Struct(">h")


class ControlKind(IntEnum):
    STATE = 0
    TXN_STAGE = 1
    TXN_END = 2
    TOMBSTONE = 3


class ShareControlError(ValueError):
    """A share control record could not be decoded (corrupt, or a version this broker lacks)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareControl:
    """One decoded SHARE_CHECKPOINT or SHARE_DELTA value."""

    checkpoint: bool
    kind: ControlKind
    group_id: str
    checkpoint_epoch: int
    back_offset: int
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = NO_START_OFFSET
    end_offset: int = NO_OFFSET
    delivery_complete_count: int = -1
    create_timestamp: int = 0
    write_timestamp: int = 0
    states: tuple[StateBatch, ...] = ()
    pending: tuple[PendingTxnBatch, ...] = ()
    txn_end: ShareTxnMarker | None = None
    delays: tuple[RedeliveryDelay, ...] = ()

    @property
    def control_type(self) -> int:
        return CONTROL_TYPE_SHARE_CHECKPOINT if self.checkpoint else CONTROL_TYPE_SHARE_DELTA


def encode(c: ShareControl) -> bytes:
    group = c.group_id.encode()
    out = bytearray(_HEAD.pack(VALUE_VERSION, int(c.kind)))
    out += _STR_LEN.pack(len(group)) + group
    out += _FIXED.pack(
        c.checkpoint_epoch,
        c.back_offset,
        c.state_epoch,
        c.leader_epoch,
        c.start_offset,
        c.end_offset,
        c.delivery_complete_count,
        c.create_timestamp,
        c.write_timestamp,
    )
    out += _COUNT.pack(len(c.states))
    for b in c.states:
        out += _STATE.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
    out += _COUNT.pack(len(c.pending))
    for p in c.pending:
        out += _PENDING.pack(
            p.producer_id,
            p.producer_epoch,
            p.first_offset,
            p.last_offset,
            p.delivery_state,
            p.delivery_count,
            p.ack_type,
        )
    if c.kind is ControlKind.TXN_END:
        assert c.txn_end is not None
        out += _TXN_END.pack(c.txn_end.producer_id, c.txn_end.producer_epoch, int(c.txn_end.commit))
    if c.delays:
        out += _COUNT.pack(len(c.delays))
        for d in c.delays:
            out += _DELAY.pack(*d)
    return bytes(out)


def decode(control_type: int, value: bytes | memoryview) -> ShareControl:
    """Raises ``ShareControlError`` for anything but a whole, known record."""
    if control_type not in (CONTROL_TYPE_SHARE_CHECKPOINT, CONTROL_TYPE_SHARE_DELTA):
        raise ShareControlError(f"control type {control_type} is not share state")
    try:
        version, kind_id = _HEAD.unpack_from(value, 0)
        if version != VALUE_VERSION:
            raise ShareControlError(f"share control value version {version} is unknown")
        kind = ControlKind(kind_id)
        p = _HEAD.size
        (n,) = _STR_LEN.unpack_from(value, p)
        p += 2
        if n < 0 or p + n > len(value):
            raise ShareControlError("bad group id length")
        group = bytes(value[p : p + n]).decode()
        p += n
        epoch, back, state_epoch, leader_epoch, start, end, dcc, created, written = _FIXED.unpack_from(
            value, p
        )
        p += _FIXED.size
        (count,) = _COUNT.unpack_from(value, p)
        p += 4
        if count < 0 or p + count * _STATE.size > len(value):
            raise ShareControlError("bad state count")
        states = []
        for _ in range(count):
            f, la, st, dc = _STATE.unpack_from(value, p)
            p += _STATE.size
            states.append(StateBatch(first_offset=f, last_offset=la, delivery_state=st, delivery_count=dc))
        (count,) = _COUNT.unpack_from(value, p)
        p += 4
        if count < 0 or p + count * _PENDING.size > len(value):
            raise ShareControlError("bad pending count")
        pending = []
        for _ in range(count):
            pid, pe, f, la, st, dc, ack = _PENDING.unpack_from(value, p)
            p += _PENDING.size
            pending.append(
                PendingTxnBatch(
                    producer_id=pid,
                    producer_epoch=pe,
                    first_offset=f,
                    last_offset=la,
                    delivery_state=st,
                    delivery_count=dc,
                    ack_type=ack,
                )
            )
        txn_end = None
        if kind is ControlKind.TXN_END:
            pid, pe, commit = _TXN_END.unpack_from(value, p)
            p += _TXN_END.size
            txn_end = ShareTxnMarker(producer_id=pid, producer_epoch=pe, commit=bool(commit))
        delays: list[RedeliveryDelay] = []
        if kind is ControlKind.STATE and p < len(value):
            (count,) = _COUNT.unpack_from(value, p)
            p += _COUNT.size
            for _ in range(count):
                delays.append(RedeliveryDelay(*_DELAY.unpack_from(value, p)))
                p += _DELAY.size
        if p != len(value):
            raise ShareControlError("trailing bytes after a share control value")
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, ShareControlError):
            raise
        raise ShareControlError(f"truncated or bad share control value: {exc}") from None
    return ShareControl(
        checkpoint=control_type == CONTROL_TYPE_SHARE_CHECKPOINT,
        kind=kind,
        group_id=group,
        checkpoint_epoch=epoch,
        back_offset=back,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=start,
        end_offset=end,
        delivery_complete_count=dcc,
        create_timestamp=created,
        write_timestamp=written,
        states=tuple(states),
        pending=tuple(pending),
        txn_end=txn_end,
        delays=tuple(delays),
    )


def _end_of(states: tuple[StateBatch, ...], empty: int) -> int:
    """The offset after the last run, or ``empty`` when there is none."""
    return states[-1].last_offset + 1 if states else empty


# -- to and from the share coordinator's record values (the state model both persisters share) --


def from_snapshot(group_id: str, s: ShareSnapshot) -> ShareControl:
    return ShareControl(
        checkpoint=True,
        kind=ControlKind.STATE,
        group_id=group_id,
        checkpoint_epoch=s.snapshot_epoch,
        back_offset=NO_OFFSET,
        state_epoch=s.state_epoch,
        leader_epoch=s.leader_epoch,
        start_offset=s.start_offset,
        end_offset=_end_of(s.state_batches, s.start_offset),
        delivery_complete_count=s.delivery_complete_count,
        create_timestamp=s.create_timestamp,
        write_timestamp=s.write_timestamp,
        states=s.state_batches,
        pending=s.pending_txn_batches,
        delays=s.delays,
    )


def from_update(group_id: str, u: ShareUpdate, back_offset: int) -> ShareControl:
    return ShareControl(
        checkpoint=False,
        kind=ControlKind.STATE,
        group_id=group_id,
        checkpoint_epoch=u.snapshot_epoch,
        back_offset=back_offset,
        leader_epoch=u.leader_epoch,
        start_offset=u.start_offset,
        end_offset=_end_of(u.state_batches, NO_OFFSET),
        delivery_complete_count=u.delivery_complete_count,
        states=u.state_batches,
        delays=u.delays,
    )


def from_stage(group_id: str, s: ShareTxnStage, back_offset: int) -> ShareControl:
    return ShareControl(
        checkpoint=False,
        kind=ControlKind.TXN_STAGE,
        group_id=group_id,
        checkpoint_epoch=s.snapshot_epoch,
        back_offset=back_offset,
        leader_epoch=s.leader_epoch,
        pending=s.batches,
    )


def from_txn_end(group_id: str, epoch: int, m: ShareTxnMarker, back_offset: int) -> ShareControl:
    return ShareControl(
        checkpoint=False,
        kind=ControlKind.TXN_END,
        group_id=group_id,
        checkpoint_epoch=epoch,
        back_offset=back_offset,
        txn_end=m,
    )


def tombstone(group_id: str, epoch: int) -> ShareControl:
    return ShareControl(
        checkpoint=True,
        kind=ControlKind.TOMBSTONE,
        group_id=group_id,
        checkpoint_epoch=epoch,
        back_offset=NO_OFFSET,
    )


def to_value(c: ShareControl) -> ShareSnapshot | ShareUpdate | ShareTxnStage | ShareTxnMarker | None:
    """The share coordinator record value ``c`` stands for (None: a tombstone)."""
    if c.kind is ControlKind.TOMBSTONE:
        return None
    if c.kind is ControlKind.TXN_END:
        assert c.txn_end is not None
        return c.txn_end
    if c.kind is ControlKind.TXN_STAGE:
        first = c.pending[0] if c.pending else None
        return ShareTxnStage(
            snapshot_epoch=c.checkpoint_epoch,
            leader_epoch=c.leader_epoch,
            producer_id=first.producer_id if first else -1,
            producer_epoch=first.producer_epoch if first else -1,
            batches=c.pending,
        )
    if c.checkpoint:
        return ShareSnapshot(
            snapshot_epoch=c.checkpoint_epoch,
            state_epoch=c.state_epoch,
            leader_epoch=c.leader_epoch,
            start_offset=c.start_offset,
            delivery_complete_count=c.delivery_complete_count,
            create_timestamp=c.create_timestamp,
            write_timestamp=c.write_timestamp,
            state_batches=c.states,
            pending_txn_batches=c.pending,
            delays=c.delays,
        )
    return ShareUpdate(
        snapshot_epoch=c.checkpoint_epoch,
        leader_epoch=c.leader_epoch,
        start_offset=c.start_offset,
        delivery_complete_count=c.delivery_complete_count,
        state_batches=c.states,
        delays=c.delays,
    )
