"""The partition's checkpoint file: log start offset and recovery point.

``log.checkpoint`` is small JSON replaced atomically. The recovery point ``(base, size, offset)``
says that every byte before ``size`` in segment ``base`` (and every earlier segment) was fsynced,
that the index files describe it, and that the log ended at ``offset`` there. Opening a log rescans
only from there; a clean close moves it to the log end, so a clean restart scans almost nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .segment import write_file_atomically

CHECKPOINT_FILE = "log.checkpoint"
PRODUCER_SNAPSHOT_FILE = "producer.snapshot"


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    log_start_offset: int
    recovery_base: int
    recovery_size: int
    recovery_offset: int


def read_checkpoint(directory: Path) -> Checkpoint | None:
    """The checkpoint in ``directory``, or ``None`` if it is missing or unreadable."""
    try:
        data = json.loads((directory / CHECKPOINT_FILE).read_text())
        if data.get("version") != 1:
            return None
        return Checkpoint(
            log_start_offset=int(data["log_start_offset"]),
            recovery_base=int(data["recovery_base"]),
            recovery_size=int(data["recovery_size"]),
            recovery_offset=int(data["recovery_offset"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_checkpoint(directory: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint durably (fsync before rename)."""
    text = json.dumps(
        {
            "version": 1,
            "log_start_offset": checkpoint.log_start_offset,
            "recovery_base": checkpoint.recovery_base,
            "recovery_size": checkpoint.recovery_size,
            "recovery_offset": checkpoint.recovery_offset,
        }
    )
    write_file_atomically(directory / CHECKPOINT_FILE, text.encode())
