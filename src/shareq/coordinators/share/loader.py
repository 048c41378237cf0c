"""ShardLoader: replay a state partition from its raw records, decoding only what still counts.

The state log is append-only and a snapshot replaces everything before it for its key, so to
rebuild a share-partition only its latest snapshot and the updates after it matter. ``feed`` keeps
exactly those, as raw value bytes per raw key: a snapshot (or tombstone) drops whatever its key had
queued, an update is one list append. Nothing is decoded on that pass except the two type bytes of
each key. ``finish`` then decodes each surviving key once, each surviving update with a
precompiled ``struct`` format (no per-update dataclass), folds a key's updates in one pass over
plain tuples (coalescing equal neighbours as it goes, so one small combine remains), and installs
the result with ``ShareCoordinatorShard.restore``.

Transactional acknowledgements: a txn stage record is queued with its key like an update (tagged
``_STAGE``); a txn marker record is queued with *every* key (tagged ``_MARKER``, with its producer
id), since it settles whatever its producer staged in the partition. A key whose queue holds either
is folded record by record, in log order, exactly as ``replay`` does.

The outcome equals replaying every record in order with ``ShareCoordinatorShard.replay``; a
property test holds the two together. Corruption in a record that a later snapshot supersedes
goes unnoticed (its batch's CRC32C was still checked by the log scan).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from shareq.share.persister import (
    NO_START_OFFSET,
    UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
    StateBatch,
    state_batch,
)

from .combiner import combine_state_batches
from .delays import combine_delays
from .records import (
    VALUE_VERSION,
    RecordType,
    ShareSnapshot,
    ShareTxnStage,
    ShareUpdate,
    StateRecordError,
    decode_key,
    decode_marker,
    decode_value,
)
from .shard import ShareCoordinatorShard, _apply, apply_marker, apply_stage, fold_updates

Run = tuple[int, int, int, int]
"""first_offset, last_offset, delivery_state, delivery_count."""

# The common update: one state batch without tagged fields, with or without the
# delivery_complete_count tag (see records.py for the layout).
_ONE_DCC = struct.Struct(">hiiqBqqbhBBBBi")
_ONE = struct.Struct(">hiiqBqqbhBB")
_DCC_TAG = b"\x01\x00\x04"
_SNAPSHOT_KEY = b"\x00\x00"
_MARKER_KEY_TYPE = b"\x00\x03"
_STAGE = 0xFE  # queued values start with 0x00 (version 0) unless tagged with one of these
_MARKER = 0xFF


class ShardLoader:
    """Collects one state partition's records in log order, then rebuilds its shard."""

    __slots__ = ("_pending", "_snapshot_offsets", "next_offset")

    def __init__(self) -> None:
        # Raw key without its type field -> [latest snapshot value, update values after it...]
        self._pending: dict[bytes, list[bytes]] = {}
        self._snapshot_offsets: dict[bytes, int] = {}
        self.next_offset: int | None = None
        """The offset after the last record fed, or None before any."""

    def feed(self, records: Iterable[tuple[int, bytes, bytes | None]]) -> None:
        """Take ``(offset, key, value)`` records in log order (cheap: no value is decoded)."""
        pending = self._pending
        snapshot_offsets = self._snapshot_offsets
        get = pending.get
        offset = -1
        try:
            for offset, key, value in records:
                kind = key[1]
                if key[0] or kind > 3:
                    raise StateRecordError(f"unknown state record type in key {key[:2].hex()}")
                if kind >= 2 and value is not None:
                    if kind == 2:
                        updates = get(key[2:])
                        if updates is not None:
                            updates.append(bytes((_STAGE,)) + value)
                    else:
                        tagged = bytes((_MARKER,)) + key[2:] + value
                        for queued in pending.values():
                            queued.append(tagged)
                    continue
                if value is None:  # a tombstone (under either key type, as replay treats it)
                    suffix = key[2:]
                    if pending.pop(suffix, None) is not None:
                        del snapshot_offsets[suffix]
                elif kind:
                    updates = get(key[2:])
                    if updates is not None:  # else no snapshot to apply it to: skipped, as replay does
                        updates.append(value)
                else:
                    suffix = key[2:]
                    pending[suffix] = [value]
                    snapshot_offsets[suffix] = offset
        except IndexError:
            raise StateRecordError(f"offset {offset}: state record key too short") from None
        except StateRecordError as exc:
            raise StateRecordError(f"offset {offset}: {exc}") from None
        if offset >= 0:
            self.next_offset = offset + 1

    def finish(self, shard: ShareCoordinatorShard) -> None:
        """Decode and fold what survived into ``shard`` (which must hold nothing yet)."""
        for suffix, values in self._pending.items():
            offset = self._snapshot_offsets[suffix]
            try:
                key = decode_key(_SNAPSHOT_KEY + suffix)[1]
                snapshot = decode_value(RecordType.SNAPSHOT, values[0])
                assert isinstance(snapshot, ShareSnapshot)
                current, applied = fold_raw_updates(snapshot, values, 1)
            except StateRecordError as exc:
                raise StateRecordError(
                    f"share-partition with its snapshot at offset {offset}: {exc}"
                ) from None
            shard.restore(key, current, snapshot_offset=offset, updates_since_snapshot=applied)
        if self.next_offset is not None:
            shard.restore_next_offset(self.next_offset)
        self._pending = {}
        self._snapshot_offsets = {}


def _decode_update(value: bytes) -> tuple[int, int, int, int, tuple[Run, ...] | None]:
    """snapshot_epoch, leader_epoch, start_offset, delivery_complete_count, runs of an update
    (None for one that carries due times)."""
    n = len(value)
    if n == _ONE_DCC.size and value[18] == 2 and value[39:42] == _DCC_TAG:
        version, s_epoch, l_epoch, start, _, first, last, state, count, tags, _, _, _, dcc = _ONE_DCC.unpack(
            value
        )
        if version == VALUE_VERSION and not tags:
            return s_epoch, l_epoch, start, dcc, ((first, last, state, count),)
    elif n == _ONE.size and value[18] == 2:
        version, s_epoch, l_epoch, start, _, first, last, state, count, tags, value_tags = _ONE.unpack(value)
        if version == VALUE_VERSION and not tags and not value_tags:
            return (
                s_epoch,
                l_epoch,
                start,
                UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
                ((first, last, state, count),),
            )
    u = decode_value(RecordType.UPDATE, value)
    assert isinstance(u, ShareUpdate)
    if u.delays:  # due times: the fold below takes the slow path, which keeps them
        return u.snapshot_epoch, u.leader_epoch, u.start_offset, u.delivery_complete_count, None
    runs = tuple((b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in u.state_batches)
    return u.snapshot_epoch, u.leader_epoch, u.start_offset, u.delivery_complete_count, runs


def fold_raw_updates(
    snapshot: ShareSnapshot, values: list[bytes], first: int = 0
) -> tuple[ShareSnapshot, int]:
    """``snapshot`` with the encoded updates ``values[first:]`` applied, and how many applied.

    Updates of another snapshot epoch are skipped (as ``replay`` skips them). While the start
    offset only moves forward and the updates' runs only move forward too (the rule for
    acknowledgements), the runs are coalesced on the fly and one combine finishes the job;
    otherwise the updates are decoded in full and folded by ``fold_updates``.
    """
    epoch = snapshot.snapshot_epoch
    for i in range(first, len(values)):
        if values[i][0] >= _STAGE:
            return _fold_in_order(snapshot, values, first)
    start = snapshot.start_offset
    dcc = snapshot.delivery_complete_count
    leader_epoch = snapshot.leader_epoch
    runs: list[Run] = []
    prev_last = -1
    r_first = r_last = r_state = r_count = -1  # the open run (not yet in ``runs``)
    applied = 0
    simple = True
    unpack = _ONE_DCC.unpack
    for i in range(first, len(values)):
        value = values[i]
        # The acknowledgement update (one batch, delivery_complete_count set) inline; any other
        # shape through _decode_update.
        if len(value) == 46 and value[18] == 2 and value[39:42] == _DCC_TAG:
            version, s_epoch, l_epoch, u_start, _, first_o, last_o, state, count, tags, _, _, _, u_dcc = (
                unpack(value)
            )
            u_runs: tuple[Run, ...] | None = ((first_o, last_o, state, count),)
            if version or tags:
                s_epoch, l_epoch, u_start, u_dcc, u_runs = _decode_update(value)
        else:
            s_epoch, l_epoch, u_start, u_dcc, u_runs = _decode_update(value)
        if s_epoch != epoch:
            continue
        applied += 1
        if u_runs is None:
            simple = False
        if not simple:
            continue  # still count and validate; the slow fold below does the rest
        assert u_runs is not None
        leader_epoch = l_epoch
        if u_start != NO_START_OFFSET:
            if u_start < start:
                simple = False
                continue
            start = u_start
        if u_dcc != UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
            dcc = u_dcc
        for b_first, b_last, b_state, b_count in u_runs:
            if b_first > b_last or b_first <= prev_last:
                simple = False
                break
            if b_first == r_last + 1 and b_state == r_state and b_count == r_count and r_first >= 0:
                r_last = b_last
            else:
                if r_first >= 0:
                    runs.append((r_first, r_last, r_state, r_count))
                r_first, r_last, r_state, r_count = b_first, b_last, b_state, b_count
            prev_last = b_last
    if not applied:
        return snapshot, 0
    if not simple:
        updates = [u for v in values[first:] if (u := _update(v)).snapshot_epoch == epoch]
        return fold_updates(snapshot, updates), applied
    if r_first >= 0:
        runs.append((r_first, r_last, r_state, r_count))
    if runs or start != snapshot.start_offset:
        layered = [
            StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
            for f, la, s, c in runs
            if la >= start
        ]
        batches: tuple[StateBatch, ...] = combine_state_batches(snapshot.state_batches, layered, start)
    else:
        batches = snapshot.state_batches
    delays = snapshot.delays
    if delays:  # the updates' runs are the newest word on their offsets
        delays = combine_delays(delays, [state_batch(*r) for r in runs], (), start)
    return (
        ShareSnapshot(
            snapshot_epoch=epoch,
            state_epoch=snapshot.state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start,
            delivery_complete_count=dcc,
            create_timestamp=snapshot.create_timestamp,
            write_timestamp=snapshot.write_timestamp,
            state_batches=batches,
            pending_txn_batches=snapshot.pending_txn_batches,
            delays=delays,
        ),
        applied,
    )


def _fold_in_order(snapshot: ShareSnapshot, values: list[bytes], first: int) -> tuple[ShareSnapshot, int]:
    """The queue of a key that saw transactional records, applied one by one as ``replay`` does."""
    cur = snapshot
    epoch = snapshot.snapshot_epoch
    applied = 0
    for i in range(first, len(values)):
        value = values[i]
        tag = value[0]
        if tag == _MARKER:
            cur = apply_marker(cur, decode_marker(_MARKER_KEY_TYPE + value[1:9], value[9:]))
        elif tag == _STAGE:
            stage = decode_value(RecordType.TXN_STAGE, value[1:])
            assert isinstance(stage, ShareTxnStage)
            if stage.snapshot_epoch == epoch:
                cur = apply_stage(cur, stage)
                applied += 1
        else:
            update = _update(value)
            if update.snapshot_epoch == epoch:
                cur = _apply(cur, update, None)
                applied += 1
    return cur, applied


def _update(value: bytes) -> ShareUpdate:
    u = decode_value(RecordType.UPDATE, value)
    assert isinstance(u, ShareUpdate)
    return u
