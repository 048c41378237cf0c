"""One segment of a partition log: a ``.log`` file of whole v2 batches plus its two indexes.

A segment is named by its base offset (``00000000000000000000.log``). Only the active (last)
segment is written; older ones are immutable. Indexes of older segments are loaded lazily, on the
first read or timestamp lookup that needs them, so an idle partition costs a few hundred bytes per
segment.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crc32c import crc32c

from .batch import ATTRIBUTES_OFFSET, HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC, MIN_BATCH_LENGTH
from .errors import LogIOError
from .index import OffsetIndex, TimeIndex

SCAN_CHUNK = 1 << 20
LOG_SUFFIX = ".log"
KEYS_SUFFIX = ".keys"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
MAX_RELATIVE_OFFSET = (1 << 31) - 1
"""The largest offset delta a segment's index can hold (relative offsets are i32)."""

# Fields of the unpacked header tuple (HEADER.unpack_from) used on hot paths.
H_BASE_OFFSET = 0
H_BATCH_LENGTH = 1
H_MAGIC = 3
H_CRC = 4
H_ATTRIBUTES = 5
H_LAST_OFFSET_DELTA = 6
H_MAX_TIMESTAMP = 8
H_PRODUCER_ID = 9
H_PRODUCER_EPOCH = 10
H_BASE_SEQUENCE = 11
H_RECORDS_COUNT = 12

RawHeader = tuple[Any, ...]


def segment_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def scan_batches(fd: int, start: int, end: int, *, verify_crc: bool) -> Iterator[tuple[int, RawHeader]]:
    """Yield ``(position, raw header)`` for each whole, well-formed batch in ``[start, end)``.

    Stops silently at the first torn, malformed or (with ``verify_crc``) CRC-failing batch; the
    caller learns where the valid prefix ends from the last batch yielded.
    """
    pos = start
    chunk = b""
    chunk_pos = start
    while pos + HEADER_SIZE <= end:
        off = pos - chunk_pos
        if off + HEADER_SIZE > len(chunk):
            chunk = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
            chunk_pos, off = pos, 0
            if len(chunk) < HEADER_SIZE:
                return
        h = HEADER.unpack_from(chunk, off)
        size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
        if (
            h[H_MAGIC] != MAGIC
            or h[H_BATCH_LENGTH] < MIN_BATCH_LENGTH
            or h[H_LAST_OFFSET_DELTA] < 0
            or pos + size > end
        ):
            return
        if verify_crc:
            if off + size > len(chunk):
                chunk = os.pread(fd, min(max(SCAN_CHUNK, size), end - pos), pos)
                chunk_pos, off = pos, 0
                if len(chunk) < size:
                    return
            if crc32c(memoryview(chunk)[off + ATTRIBUTES_OFFSET : off + size]) != h[H_CRC]:
                return
        yield pos, h
        pos += size


def scan_headers(fd: int, start: int, end: int) -> Iterator[tuple[int, RawHeader]]:
    """Yield ``(position, raw header)`` reading only the 61-byte headers (no CRC check)."""
    pos = start
    while pos + HEADER_SIZE <= end:
        raw = os.pread(fd, HEADER_SIZE, pos)
        if len(raw) < HEADER_SIZE:
            return
        h = HEADER.unpack(raw)
        size = h[H_BATCH_LENGTH] + LOG_OVERHEAD
        if h[H_MAGIC] != MAGIC or h[H_BATCH_LENGTH] < MIN_BATCH_LENGTH or pos + size > end:
            return
        yield pos, h
        pos += size


def write_file_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` via a temporary file and rename."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class LogSegment:
    """Bookkeeping for one segment file; the partition log decides when its file is open."""

    __slots__ = (
        "_index",
        "_time_index",
        "base_offset",
        "bytes_since_index",
        "created_ms",
        "directory",
        "fd",
        "indexes_dirty",
        "max_timestamp",
        "next_offset",
        "offset_of_max_timestamp",
        "size",
    )

    def __init__(self, directory: Path, base_offset: int, *, size: int = 0, created_ms: int = 0) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.size = size
        self.next_offset = base_offset
        self.created_ms = created_ms
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_index = 0
        self.fd = -1
        self.indexes_dirty = False
        self._index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"

    @property
    def log_path(self) -> Path:
        return self.directory / (segment_stem(self.base_offset) + LOG_SUFFIX)

    @property
    def index_path(self) -> Path:
        return self.directory / (segment_stem(self.base_offset) + INDEX_SUFFIX)

    @property
    def timeindex_path(self) -> Path:
        return self.directory / (segment_stem(self.base_offset) + TIMEINDEX_SUFFIX)

    @property
    def keys_path(self) -> Path:
        """The key-hash sidecar (``log/key_hashes.py``): a cache, deleted with the segment."""
        return self.directory / (segment_stem(self.base_offset) + KEYS_SUFFIX)

    # -- file handle -------------------------------------------------------------------------------

    def open(self, *, writable: bool) -> int:
        if self.fd < 0:
            flags = os.O_CLOEXEC | (os.O_RDWR | os.O_CREAT | os.O_APPEND if writable else os.O_RDONLY)
            try:
                self.fd = os.open(self.log_path, flags, 0o644)
            except OSError as exc:
                raise LogIOError(f"cannot open segment {self.log_path.name}: {exc}") from exc
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    # -- indexes -----------------------------------------------------------------------------------

    @property
    def index(self) -> OffsetIndex:
        if self._index is None:
            raise RuntimeError("segment indexes not loaded")
        return self._index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            raise RuntimeError("segment indexes not loaded")
        return self._time_index

    @property
    def indexes_loaded(self) -> bool:
        return self._index is not None

    def unload_indexes(self) -> None:
        """Forget the in-memory indexes of an older segment (their files are current)."""
        if self.indexes_dirty:
            self.write_indexes()
        self._index = self._time_index = None

    def discard_indexes(self) -> None:
        """Forget the in-memory indexes without writing them (their log file is being replaced)."""
        self._index = self._time_index = None
        self.indexes_dirty = False

    def peek_max_timestamp(self) -> int | None:
        """Learn the maximum timestamp from the last ``.timeindex`` entry without loading it."""
        try:
            with open(self.timeindex_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                if size % TimeIndex.ENTRY_SIZE:
                    return None
                if size == 0:
                    self.max_timestamp = -1
                    return -1
                f.seek(size - TimeIndex.ENTRY_SIZE)
                timestamp = int.from_bytes(f.read(8), "big", signed=True)
        except OSError:
            return None
        self.max_timestamp = timestamp
        return timestamp

    def reset_indexes(self) -> None:
        """Start empty indexes (for a new segment, or before a rebuild scan)."""
        self._index = OffsetIndex()
        self._time_index = TimeIndex()
        self.bytes_since_index = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.indexes_dirty = True

    def load_indexes(self, max_relative_offset: int | None = None) -> bool:
        """Load both index files; ``False`` (nothing loaded) if either is missing or implausible."""
        if max_relative_offset is None:
            max_relative_offset = max(0, self.next_offset - self.base_offset - 1)
        try:
            index = OffsetIndex.from_bytes(self.index_path.read_bytes(), self.size)
            time_index = TimeIndex.from_bytes(self.timeindex_path.read_bytes(), max_relative_offset)
        except OSError:
            return False
        if index is None or time_index is None:
            return False
        self._index, self._time_index = index, time_index
        self.max_timestamp = time_index.last_timestamp()
        self.offset_of_max_timestamp = self.base_offset + (time_index.offsets[-1] if len(time_index) else 0)
        self.bytes_since_index = self.size - index.last_position()
        self.indexes_dirty = False
        return True

    def track(
        self, position: int, base_offset: int, next_offset: int, size: int, max_timestamp: int, interval: int
    ) -> None:
        """Account for the batch just placed at ``position`` (index entries, timestamps, ends)."""
        if self.bytes_since_index > interval:
            self.index.append(base_offset - self.base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
            self.bytes_since_index = 0
        self.bytes_since_index += size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        self.next_offset = next_offset
        self.size = position + size
        self.indexes_dirty = True

    def track_header(self, position: int, header: RawHeader, interval: int) -> None:
        """:meth:`track` for a header tuple read back from the file."""
        base = header[H_BASE_OFFSET]
        self.track(
            position,
            base,
            base + header[H_LAST_OFFSET_DELTA] + 1,
            header[H_BATCH_LENGTH] + LOG_OVERHEAD,
            header[H_MAX_TIMESTAMP],
            interval,
        )

    def resume_point(self, valid_size: int) -> tuple[int, int]:
        """Cut loaded indexes back to the bytes known good; return where a rescan must start.

        Returns ``(position, offset)`` of the last index entry below ``valid_size`` (or the segment
        start); the batch there is scanned again so timestamps and ends are exact.
        """
        index, time_index = self.index, self.time_index
        index.truncate_to_position(valid_size)
        rel, position = (index.offsets[-1], index.positions[-1]) if len(index) else (0, 0)
        time_index.truncate_to_offset(rel)
        self.max_timestamp = time_index.last_timestamp()
        self.offset_of_max_timestamp = self.base_offset + (time_index.offsets[-1] if len(time_index) else 0)
        self.bytes_since_index = 0
        self.size = position
        self.next_offset = self.base_offset + rel
        self.indexes_dirty = True
        return position, self.base_offset + rel

    def seal_time_index(self) -> None:
        """Make the last time-index entry the segment's maximum timestamp (on roll and close)."""
        if self._time_index is not None and self.max_timestamp >= 0:
            before = len(self._time_index)
            self._time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
            self.indexes_dirty |= len(self._time_index) != before

    def write_indexes(self) -> None:
        """Persist both indexes (no fsync: they can always be rebuilt from the log)."""
        if self._index is None or self._time_index is None or not self.indexes_dirty:
            return
        write_file_atomically(self.index_path, self._index.to_bytes(), sync=False)
        write_file_atomically(self.timeindex_path, self._time_index.to_bytes(), sync=False)
        self.indexes_dirty = False

    def largest_timestamp(self) -> int:
        """The segment's maximum batch timestamp, or its file's mtime when it holds no timestamps."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(self.log_path.stat().st_mtime * 1000)
        except OSError:
            return -1

    def delete_files(self) -> None:
        self.close()
        for path in (self.log_path, self.index_path, self.timeindex_path, self.keys_path):
            path.unlink(missing_ok=True)
