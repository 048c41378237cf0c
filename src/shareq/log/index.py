"""Sparse offset and time indexes of one segment.

Both live in memory as two compact ``array`` columns (8 or 12 bytes an entry, nothing preallocated)
and are written whole to their files when the segment is rolled, flushed or closed. The files are
big-endian like Kafka's: ``.index`` holds (relative offset i32, position i32) pairs and
``.timeindex`` (timestamp i64, relative offset i32). An index that fails its sanity checks is
rebuilt from the segment's batch headers, so the files are a cache, never the truth.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left, bisect_right

_BIG_ENDIAN = sys.byteorder == "big"
_TIME_ENTRY = struct.Struct(">qi")


def _interleave(first: array[int], second: array[int]) -> bytes:
    out = array(first.typecode, bytes(first.itemsize * 2 * len(first)))
    out[0::2] = first
    out[1::2] = second
    if not _BIG_ENDIAN:
        out.byteswap()
    return out.tobytes()


class OffsetIndex:
    """Maps offsets (relative to the segment's base) of some batch starts to byte positions."""

    __slots__ = ("offsets", "positions")

    ENTRY_SIZE = 8

    def __init__(self) -> None:
        self.offsets: array[int] = array("i")
        self.positions: array[int] = array("i")

    def __len__(self) -> int:
        return len(self.offsets)

    def append(self, relative_offset: int, position: int) -> None:
        self.offsets.append(relative_offset)
        self.positions.append(position)

    def lookup(self, relative_offset: int) -> tuple[int, int]:
        """The last indexed (relative offset, position) at or before ``relative_offset``, else (0, 0)."""
        i = bisect_right(self.offsets, relative_offset)
        if i == 0:
            return 0, 0
        return self.offsets[i - 1], self.positions[i - 1]

    def last_position(self) -> int:
        return self.positions[-1] if self.positions else 0

    def truncate_to_position(self, size: int) -> None:
        """Drop entries pointing at or beyond byte ``size`` (the segment was cut there)."""
        i = bisect_left(self.positions, size)
        del self.offsets[i:]
        del self.positions[i:]

    def to_bytes(self) -> bytes:
        return _interleave(self.offsets, self.positions)

    @classmethod
    def from_bytes(cls, data: bytes, segment_size: int) -> OffsetIndex | None:
        """Parse a ``.index`` file; ``None`` if it is not a plausible index of a segment that size."""
        if len(data) % cls.ENTRY_SIZE:
            return None
        raw = array("i", data)
        if not _BIG_ENDIAN:
            raw.byteswap()
        index = cls()
        index.offsets = raw[0::2]
        index.positions = raw[1::2]
        prev_offset = prev_position = -1
        for offset, position in zip(index.offsets, index.positions, strict=True):
            if offset <= prev_offset or position <= prev_position or position >= segment_size:
                return None
            prev_offset, prev_position = offset, position
        return index


class TimeIndex:
    """Maps rising maximum timestamps to the relative offset of the batch that first reached them."""

    __slots__ = ("offsets", "timestamps")

    ENTRY_SIZE = 12

    def __init__(self) -> None:
        self.timestamps: array[int] = array("q")
        self.offsets: array[int] = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    def maybe_append(self, timestamp: int, relative_offset: int) -> None:
        """Add an entry if ``timestamp`` is above the last one (entries only ever rise)."""
        if timestamp < 0 or (self.timestamps and timestamp <= self.timestamps[-1]):
            return
        if self.offsets and relative_offset < self.offsets[-1]:
            return
        self.timestamps.append(timestamp)
        self.offsets.append(relative_offset)

    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def lookup_below(self, timestamp: int) -> int:
        """The relative offset of the last entry with a timestamp strictly below ``timestamp``, else 0.

        Every record before that batch has a timestamp below ``timestamp`` too, so a search for the
        first record at or after ``timestamp`` may start there.
        """
        i = bisect_left(self.timestamps, timestamp)
        return self.offsets[i - 1] if i else 0

    def truncate_to_offset(self, relative_offset: int) -> None:
        """Drop entries for batches at or beyond ``relative_offset``."""
        i = bisect_left(self.offsets, relative_offset)
        del self.timestamps[i:]
        del self.offsets[i:]

    def to_bytes(self) -> bytes:
        return b"".join(map(_TIME_ENTRY.pack, self.timestamps, self.offsets))

    @classmethod
    def from_bytes(cls, data: bytes, max_relative_offset: int) -> TimeIndex | None:
        """Parse a ``.timeindex`` file; ``None`` if it is implausible."""
        if len(data) % cls.ENTRY_SIZE:
            return None
        ts = array("q")
        offs = array("i")
        for t, o in _TIME_ENTRY.iter_unpack(data):
            ts.append(t)
            offs.append(o)
        prev_ts = prev_off = -1
        for t, o in zip(ts, offs, strict=True):
            if t <= prev_ts or o < prev_off or o > max_relative_offset:
                return None
            prev_ts, prev_off = t, o
        index = cls()
        index.timestamps, index.offsets = ts, offs
        return index
