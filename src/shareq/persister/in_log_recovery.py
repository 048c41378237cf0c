"""Finding a partition's share state again: the share snapshot file and the control-record scans.

**Share snapshot file** (``share-state.snapshot`` in the partition's directory). Big-endian::

    magic "SQSS" | version i16 (0) | end_offset i64 | count i32
    | per group: group_id string | checkpoint_offset i64 (the SCO) | last_offset i64
                | checkpoint_epoch i32
    | crc32c u32 of everything before it

``end_offset`` is the log end when the file was written: every control record at or above it was
written later. It is replaced (temporary file and rename) when checkpoints moved and the log has
grown by the persister's checkpoint distance since the last time, on the periodic tick and on
close; it is never fsynced, because it is only a map: a stale one is completed by the scan below,
a missing or corrupt one is rebuilt.

**Recovery with the file**: one forward scan from the lowest SCO the file names (or its
``end_offset`` when that is lower) to the log end, reading batch headers only and decoding just the
share control batches. Each group's state is its latest checkpoint followed by the deltas that
chain back to it (same checkpoint epoch, each ``back_offset`` naming the previous record). Nothing
below the lowest SCO is read. **Without the file** (or when it names records the log does not
hold): a scan backwards from the log end in windows, bounded by ``scan_bound_bytes``; groups whose
latest checkpoint lies further back than the bound are reported lost.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crc32c import crc32c

from shareq.log.batch import CONTROL_MASK, HEADER, HEADER_SIZE, LOG_OVERHEAD
from shareq.log.errors import CorruptRecordError, LogError
from shareq.log.records import SHARE_CONTROL_TYPES
from shareq.log.segment import write_file_atomically

from .share_control import ControlKind, ShareControl, ShareControlError, decode
from .state_log import iter_records

SNAPSHOT_FILE = "share-state.snapshot"
_MAGIC = b"SQSS"
_FILE_HEAD = struct.Struct(">4shqi")
_ENTRY = struct.Struct(">qqi")
_STR_LEN = struct.Struct(">h")
_CRC = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_READ_CHUNK = 1024 * 1024
_BACK_WINDOW_OFFSETS = 16 * 1024


@dataclass(slots=True)
class GroupPosition:
    """Where a group's chain is: its SCO, its latest control record, and the checkpoint epoch."""

    checkpoint_offset: int
    last_offset: int
    checkpoint_epoch: int


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    end_offset: int
    groups: dict[str, GroupPosition]


def write_snapshot_file(directory: Path, snapshot: SnapshotFile) -> None:
    out = bytearray(_FILE_HEAD.pack(_MAGIC, 0, snapshot.end_offset, len(snapshot.groups)))
    for group, pos in sorted(snapshot.groups.items()):
        raw = group.encode()
        out += _STR_LEN.pack(len(raw)) + raw
        out += _ENTRY.pack(pos.checkpoint_offset, pos.last_offset, pos.checkpoint_epoch)
    out += _CRC.pack(crc32c(bytes(out)))
    write_file_atomically(directory / SNAPSHOT_FILE, bytes(out), sync=False)


def read_snapshot_file(directory: Path) -> SnapshotFile | None:
    """The file's contents; None when it is missing, torn or corrupt."""
    try:
        data = (directory / SNAPSHOT_FILE).read_bytes()
    except OSError:
        return None
    try:
        if len(data) < _FILE_HEAD.size + _CRC.size:
            return None
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if crc32c(data[: -_CRC.size]) != crc:
            return None
        magic, version, end, count = _FILE_HEAD.unpack_from(data, 0)
        if magic != _MAGIC or version != 0 or count < 0:
            return None
        p = _FILE_HEAD.size
        groups: dict[str, GroupPosition] = {}
        for _ in range(count):
            (n,) = _STR_LEN.unpack_from(data, p)
            group = data[p + 2 : p + 2 + n].decode()
            p += 2 + n
            sco, last, epoch = _ENTRY.unpack_from(data, p)
            p += _ENTRY.size
            groups[group] = GroupPosition(sco, last, epoch)
        if p != len(data) - _CRC.size:
            return None
        return SnapshotFile(end_offset=end, groups=groups)
    except (struct.error, UnicodeDecodeError):
        return None


# -- scanning ----------------------------------------------------------------------------------


def controls_in(buf: bytes) -> Iterator[tuple[int, ShareControl]]:
    """``(offset, control)`` of every share control record in whole batches ``buf``; other
    batches are stepped over by their header. Raises ``ShareControlError`` on a corrupt one."""
    pos = 0
    end = len(buf)
    view = memoryview(buf)
    while pos + HEADER_SIZE <= end:
        header = HEADER.unpack_from(buf, pos)
        batch_end = pos + LOG_OVERHEAD + header[1]
        if batch_end > end:
            break
        if header[5] & CONTROL_MASK and header[12] == 1:
            try:
                for offset, key, value in iter_records(bytes(view[pos:batch_end])):
                    if len(key) < _CONTROL_KEY.size:
                        continue
                    _, ctype = _CONTROL_KEY.unpack_from(key, 0)
                    if ctype in SHARE_CONTROL_TYPES:
                        if value is None:
                            raise ShareControlError(f"share control record at {offset} has no value")
                        yield offset, decode(ctype, value)
            except CorruptRecordError as exc:
                raise ShareControlError(str(exc)) from None
        pos = batch_end


def scan_forward(log: Any, start: int, end: int) -> tuple[list[tuple[int, ShareControl]], int]:
    """Share control records in ``[start, end)`` and the bytes read."""
    out: list[tuple[int, ShareControl]] = []
    offset = max(start, log.log_start_offset)
    read = 0
    while offset < end:
        data = log.read(offset, _READ_CHUNK, end_offset=end - 1)
        buf = bytes(data.records)
        if not buf:
            break
        read += len(buf)
        out.extend((o, c) for o, c in controls_in(buf) if offset <= o < end)
        offset = max(offset + 1, data.batches[-1][1] + 1)
    return out, read


def scan_backwards(log: Any, bound_bytes: int) -> tuple[list[tuple[int, ShareControl]], int]:
    """Share control records from the log end back, window by window, until ``bound_bytes`` have
    been read or the log start is reached; in offset order."""
    windows: list[list[tuple[int, ShareControl]]] = []
    hi = log.log_end_offset
    read = 0
    while hi > log.log_start_offset and read < bound_bytes:
        lo = max(log.log_start_offset, hi - _BACK_WINDOW_OFFSETS)
        found, n = scan_forward(log, lo, hi)
        windows.append(found)
        read += n
        hi = lo
    return [rec for window in reversed(windows) for rec in window], read


@dataclass(frozen=True, slots=True)
class Chain:
    """One group's latest checkpoint (or tombstone) and the deltas chained to it, in log order."""

    records: list[tuple[int, ShareControl]]

    @property
    def position(self) -> GroupPosition:
        first, last = self.records[0], self.records[-1]
        return GroupPosition(first[0], last[0], first[1].checkpoint_epoch)

    @property
    def deleted(self) -> bool:
        return self.records[0][1].kind is ControlKind.TOMBSTONE


def chains(records: list[tuple[int, ShareControl]]) -> tuple[dict[str, Chain], set[str]]:
    """Per group, the chain from its latest checkpoint; and the groups seen without any checkpoint.

    Raises ``ShareControlError`` when a delta after the checkpoint does not chain to it (a
    different checkpoint epoch, or a ``back_offset`` that is not the previous record).
    """
    by_group: dict[str, list[tuple[int, ShareControl]]] = {}
    for rec in records:
        by_group.setdefault(rec[1].group_id, []).append(rec)
    out: dict[str, Chain] = {}
    headless: set[str] = set()
    for group, recs in by_group.items():
        start = None
        for i in range(len(recs) - 1, -1, -1):
            if recs[i][1].checkpoint:
                start = i
                break
        if start is None:
            headless.add(group)
            continue
        chain = recs[start:]
        head_offset, head = chain[0]
        prev = head_offset
        for offset, link in chain[1:]:
            if link.checkpoint_epoch != head.checkpoint_epoch or link.back_offset != prev:
                raise ShareControlError(
                    f"group {group}: the control record at {offset} does not chain to {prev} "
                    f"(epoch {link.checkpoint_epoch}, back offset {link.back_offset})"
                )
            prev = offset
        out[group] = Chain(chain)
    return out, headless


def recover(
    log: Any, directory: Path | None, *, scan_bound_bytes: int
) -> tuple[dict[str, Chain], bool, int, list[str]]:
    """The chains of every group with state on ``log``: ``(chains, rebuilt, bytes read, lost)``.

    ``rebuilt`` says the snapshot file was missing, corrupt or wrong and a backwards scan was used
    (the caller writes a fresh file); ``lost`` names groups seen without a checkpoint in reach.
    """
    leo = log.log_end_offset
    start_log = log.log_start_offset
    snap = read_snapshot_file(directory) if directory is not None else None
    if snap is not None and snap.end_offset <= leo:
        start = min([snap.end_offset, *(p.checkpoint_offset for p in snap.groups.values())])
        try:
            records, read = scan_forward(log, max(start, start_log), leo)
            found, headless = chains(records)
            if _agrees(snap, found, start_log):
                return found, False, read, sorted(headless - set(found))
        except (ShareControlError, LogError):
            pass  # the file names what the log does not hold: scan as if it were missing
    if leo <= start_log:
        return {}, snap is None, 0, []
    records, read = scan_backwards(log, scan_bound_bytes)
    found, headless = chains(records)
    return found, True, read, sorted(headless)


def _agrees(snap: SnapshotFile, found: dict[str, Chain], log_start: int) -> bool:
    """Every group the file names is found at or after the positions it gives (groups whose SCO
    is below the log start were deleted and their records cleaned: they may be gone)."""
    for group, pos in snap.groups.items():
        chain = found.get(group)
        if chain is None:
            if pos.checkpoint_offset >= log_start:
                return False
            continue
        got = chain.position
        if got.checkpoint_offset < pos.checkpoint_offset or got.last_offset < pos.last_offset:
            return False
        if got.checkpoint_offset == pos.checkpoint_offset and not any(
            o == pos.last_offset for o, _ in chain.records
        ):
            return False
    return True
