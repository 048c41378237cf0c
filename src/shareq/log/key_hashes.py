"""Key hashes per offset, for share groups that order by key: a rebuildable sidecar per segment.

A ``key`` share group needs each record's key to decide which records it may hand out, and the
broker otherwise never looks inside batches. The keys are read once per batch (a compressed batch is
decompressed once), hashed to 32 bits (CRC-32 of the key bytes; 0 stands for a null key, and for
offsets holding no deliverable record: control batches, compacted-away offsets), and kept beside the
segment as ``<base offset>.keys``. Nothing here is authoritative: the log is. A sidecar that is
missing is computed again from the log; one whose tail is torn (a crash mid-append) or whose entries
no longer match the segment's batches (the log was truncated and written again, or compacted) is cut
at the first bad entry, with a warning, and the rest computed again.

Only partitions a ``key`` group reads ever get a sidecar, and only when that group reads them (the
share-fetch path asks :meth:`KeyHashIndex.hashes`): producing to any topic is unchanged.

File layout: ``b"SQKH"`` and a version (u32), then one entry per batch, in offset order:
``base_offset`` (i64), ``span`` (u32, last offset delta + 1), ``batch_crc`` (u32, the batch
header's CRC-32C), ``entry_crc`` (u32, CRC-32 of the first 16 bytes and the hashes), then ``span``
hashes (u32, little-endian), one per offset of the batch.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from bisect import bisect_right
from pathlib import Path

import numpy as np

from .batch import CONTROL_MASK, HEADER, HEADER_SIZE, LOG_OVERHEAD, read_batch_header
from .errors import CorruptRecordError, LogError
from .partition_log import PartitionLog
from .record_spans import plain_batch
from .records import read_varint
from .segment import KEYS_SUFFIX, scan_headers

log = logging.getLogger("shareq.log.key_hashes")

MAGIC = b"SQKH\x00\x00\x00\x01"
_ENTRY = struct.Struct(">qIII")
_READ_CHUNK = 1 << 20
_H_BASE, _H_CRC, _H_LAST_DELTA = 0, 4, 6
NULL_HASH = 0


def key_hash(key: bytes | None) -> int:
    """The 32-bit hash a key is compared by (never 0, which stands for a null key)."""
    if key is None:
        return NULL_HASH
    return zlib.crc32(key) or 1


def batch_hashes(batch: bytes | memoryview) -> tuple[int, np.ndarray]:
    """``(base offset, hashes)`` of one whole v2 batch: one hash per offset of its span (0 for a
    null key, a control record or an offset with no record)."""
    header = read_batch_header(batch, 0)
    span = header.last_offset_delta + 1
    if header.attributes & CONTROL_MASK:
        return header.base_offset, np.zeros(span, dtype=np.uint32)
    plain = plain_batch(bytes(batch[: header.size]))
    out = [0] * span
    crc = zlib.crc32
    end = len(plain)
    pos = HEADER_SIZE
    try:
        for _ in range(header.records_count):
            # length, attributes, timestamp delta, offset delta, key length, key (values skipped);
            # one- and two-byte varints inline (nearly every length and delta), read_varint for
            # the rest
            b = plain[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif plain[pos + 1] < 0x80:  # two bytes: every record of 64 B to 8 KiB
                z = (b & 0x7F) | (plain[pos + 1] << 7)
                length, p = (z >> 1) ^ -(z & 1), pos + 2
            else:
                length, p = read_varint(plain, pos)
            limit = p + length
            if length < 0 or limit > end:
                raise CorruptRecordError("record length runs past the end of its batch")
            p += 1
            # the timestamp delta, skipped: to the first byte without the continuation bit
            while plain[p] >= 0x80:
                p += 1
            p += 1
            b = plain[p]
            if b < 0x80:
                delta, p = (b >> 1) ^ -(b & 1), p + 1
            elif plain[p + 1] < 0x80:  # two bytes: the offset deltas 64 to 8191
                z = (b & 0x7F) | (plain[p + 1] << 7)
                delta, p = (z >> 1) ^ -(z & 1), p + 2
            else:
                delta, p = read_varint(plain, p)
            b = plain[p]
            if b < 0x80:
                key_length, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_length, p = read_varint(plain, p)
            if key_length >= 0 and 0 <= delta < span:
                if p + key_length > limit:
                    raise CorruptRecordError("record key runs past its record")
                out[delta] = crc(plain[p : p + key_length]) or 1
            pos = limit
    except IndexError:
        raise CorruptRecordError("truncated record") from None
    return header.base_offset, np.array(out, dtype=np.uint32)


class _SegmentHashes:
    """The hashes of one segment from ``start`` (an offset) to ``end`` (exclusive), in memory, and
    the sidecar file they are appended to."""

    __slots__ = ("_buf", "end", "path", "start")

    def __init__(self, path: Path, start: int) -> None:
        self.path = path
        self.start = start
        self.end = start
        self._buf = np.zeros(1024, dtype=np.uint32)

    def view(self, first: int, last: int) -> np.ndarray:
        return self._buf[first - self.start : last - self.start + 1]

    def put(self, base: int, hashes: np.ndarray) -> None:
        """Add a batch's hashes (``base >= end``; offsets skipped between are null)."""
        need = base + len(hashes) - self.start
        if need > len(self._buf):
            grown = np.zeros(max(need, 2 * len(self._buf)), dtype=np.uint32)
            grown[: self.end - self.start] = self._buf[: self.end - self.start]
            self._buf = grown
        self._buf[self.end - self.start : base - self.start] = 0
        self._buf[base - self.start : need] = hashes
        self.end = base + len(hashes)


def _entry(base: int, batch_crc: int, hashes: np.ndarray) -> bytes:
    body = hashes.astype("<u4").tobytes()
    head = struct.pack(">qII", base, len(hashes), batch_crc)
    return head + struct.pack(">I", zlib.crc32(body, zlib.crc32(head))) + body


class KeyHashIndex:
    """The key hashes of one partition log, computed on demand and kept in per-segment sidecars."""

    def __init__(self, plog: PartitionLog) -> None:
        self.log = plog
        self._segments: dict[int, _SegmentHashes] = {}
        self.rebuilt = 0
        """Sidecars found missing entries, torn or stale and cut (for tests and logs)."""
        self.batches_hashed = 0
        self._shape = (plog.log_start_offset, plog.segment_count)
        """The log's start offset and segment count at the last read (see ``_forget_deleted``)."""

    def hashes(self, first: int, last: int) -> np.ndarray:
        """The hash of every offset ``first..last`` (0 where the log holds no keyed record, or no
        longer holds the offset)."""
        out = np.zeros(max(last - first + 1, 0), dtype=np.uint32)
        if last < first:
            return out
        self._forget_deleted()
        extents = self.log.segment_extents_over(first, last)
        bases = [e[0] for e in extents]
        lo = max(first, self.log.log_start_offset)
        while lo <= last:
            i = bisect_right(bases, lo) - 1
            if i < 0:
                lo = bases[0] if bases else last + 1
                continue
            base, next_offset, size, log_path = extents[i]
            hi = min(last, next_offset - 1)
            if hi >= lo:
                seg = self._segment(base, lo, size, log_path)
                self._cover(seg, hi)
                top = min(hi, seg.end - 1)
                if top >= lo:
                    out[lo - first : top - first + 1] = seg.view(lo, top)
            lo = max(hi, lo) + 1 if i + 1 >= len(bases) else max(bases[i + 1], hi + 1)
        return out

    # -- segments ---------------------------------------------------------------------------------

    def _forget_deleted(self) -> None:
        """Drop what retention, deletion or compaction took (the sidecar went with its segment):
        looked at only when the log's segments changed other than by a roll (its start moved or
        it holds fewer segments than the last look), not on every read."""
        plog = self.log
        shape = (plog.log_start_offset, plog.segment_count)
        seen = self._shape
        self._shape = shape
        if not self._segments or (seen[0] == shape[0] and seen[1] <= shape[1]):
            return
        live = {e[0] for e in plog.segment_extents()}
        for base in [b for b in self._segments if b not in live]:
            del self._segments[base]

    def _segment(self, base: int, lo: int, size: int, log_path: Path) -> _SegmentHashes:
        seg = self._segments.get(base)
        if seg is not None and seg.start <= lo and seg.path.exists():  # (compaction deletes it)
            return seg
        path = log_path.with_suffix(KEYS_SUFFIX)
        if seg is not None:  # asked below what was computed: start again from there
            path.unlink(missing_ok=True)
        seg = self._load(path, lo, size, log_path)
        self._segments[base] = seg
        return seg

    def _load(self, path: Path, lo: int, size: int, log_path: Path) -> _SegmentHashes:
        """The sidecar's valid prefix, if it starts at or before ``lo``; else a fresh one from the
        batch holding ``lo``."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return self._fresh(path, lo)
        if not data.startswith(MAGIC):
            return self._cut(path, None, lo, "has no valid header")
        crcs = self._batch_crcs(log_path, size)
        seg: _SegmentHashes | None = None
        pos = len(MAGIC)
        reason = ""
        while pos < len(data):
            if pos + _ENTRY.size > len(data):
                reason = "ends in a torn entry"
                break
            base, span, batch_crc, entry_crc = _ENTRY.unpack_from(data, pos)
            body_end = pos + _ENTRY.size + 4 * span
            if span == 0 or body_end > len(data):
                reason = "ends in a torn entry"
                break
            body = data[pos + _ENTRY.size : body_end]
            if zlib.crc32(body, zlib.crc32(data[pos : pos + 16])) != entry_crc:
                reason = f"has a corrupt entry at offset {base}"
                break
            if crcs.get(base) != (batch_crc, span):
                reason = f"does not match the log's batch at offset {base}"
                break
            if seg is None:
                if base > lo:
                    reason = "starts after the offsets asked for"
                    break
                seg = _SegmentHashes(path, base)
            elif base < seg.end:
                reason = f"has entries out of order at offset {base}"
                break
            seg.put(base, np.frombuffer(body, dtype="<u4").astype(np.uint32))
            pos = body_end
        if reason:
            return self._cut(path, (seg, pos) if seg is not None else None, lo, reason)
        return seg if seg is not None else self._fresh(path, lo)

    def _cut(
        self, path: Path, kept: tuple[_SegmentHashes, int] | None, lo: int, reason: str
    ) -> _SegmentHashes:
        log.warning("key-hash sidecar %s %s: rebuilding it from the log", path, reason)
        self.rebuilt += 1
        if kept is None:
            return self._fresh(path, lo)
        seg, valid = kept
        with open(path, "r+b") as f:
            f.truncate(valid)
        return seg

    def _fresh(self, path: Path, lo: int) -> _SegmentHashes:
        start = lo
        data = self._read(lo, 1)
        if data is not None and data.batches:
            start = min(data.batches[0][0], lo)
        path.write_bytes(MAGIC)
        return _SegmentHashes(path, start)

    @staticmethod
    def _batch_crcs(log_path: Path, size: int) -> dict[int, tuple[int, int]]:
        """``base offset -> (CRC-32C, span)`` of the segment's batches, from their headers."""
        try:
            fd = os.open(log_path, os.O_RDONLY)
        except OSError:
            return {}
        try:
            return {h[_H_BASE]: (h[_H_CRC], h[_H_LAST_DELTA] + 1) for _, h in scan_headers(fd, 0, size)}
        finally:
            os.close(fd)

    def _read(self, offset: int, max_bytes: int):  # type: ignore[no-untyped-def]
        try:
            return self.log.read(offset, max_bytes)
        except LogError:
            return None

    def _cover(self, seg: _SegmentHashes, hi: int) -> None:
        """Hash the batches from ``seg.end`` through the one holding ``hi``, appending each to the
        sidecar."""
        if seg.end > hi:
            return
        out = bytearray()
        while seg.end <= hi:
            data = self._read(seg.end, _READ_CHUNK)
            if data is None or not data.batches:
                break
            buf = memoryview(data.records)
            pos = 0
            moved = False
            while pos + HEADER_SIZE <= len(buf):
                size = HEADER.unpack_from(buf, pos)[1] + LOG_OVERHEAD
                head = HEADER.unpack_from(buf, pos)
                if head[_H_BASE] >= seg.end:
                    try:
                        base, hashes = batch_hashes(buf[pos : pos + size])
                    except (CorruptRecordError, ValueError) as exc:
                        log.warning(
                            "key hashes of the batch at offset %d unreadable (%s): null keys", head[0], exc
                        )
                        base = head[_H_BASE]
                        hashes = np.zeros(head[_H_LAST_DELTA] + 1, dtype=np.uint32)
                    seg.put(base, hashes)
                    out += _entry(base, head[_H_CRC], hashes)
                    self.batches_hashed += 1
                    moved = True
                pos += size
            if not moved:
                break
        if out:
            with open(seg.path, "ab") as f:
                f.write(out)
