"""fsync only the data of a partition log's active segment.

``PartitionLog.flush`` also rewrites indexes, the producer snapshot and the recovery checkpoint
(two fsyncs and several renames); a state write needs only its bytes on disk, since recovery
re-validates everything after the last checkpoint by CRC. Group commit therefore syncs just the
active segment file (through a descriptor of its own) and leaves full flushes to pruning and close.
A new segment's directory is fsynced too, so its name survives a power loss.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class ActiveSegmentSync:
    """Callable that makes a log's appended bytes durable."""

    __slots__ = ("_directory", "_fd", "_log", "_segments")

    def __init__(self, log: Any) -> None:
        self._log = log
        directory = getattr(log, "directory", None)
        self._directory = Path(directory) if directory is not None and hasattr(log, "segment_count") else None
        self._segments = -1
        self._fd: int | None = None

    def __call__(self) -> None:
        if self._directory is None:
            self._log.flush()  # a log we cannot see into: its own full flush
            return
        count = self._log.segment_count
        if self._fd is None or count != self._segments:
            self._reopen()
            self._segments = count
        assert self._fd is not None
        os.fsync(self._fd)

    def forget(self) -> None:
        """Segments may have been deleted or rolled: look again before the next sync."""
        self.close()

    def _reopen(self) -> None:
        self.close()
        assert self._directory is not None
        newest = max(self._directory.glob("*.log"))  # names are zero-padded base offsets
        self._fd = os.open(newest, os.O_RDONLY | os.O_CLOEXEC)
        dir_fd = os.open(self._directory, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._segments = -1
