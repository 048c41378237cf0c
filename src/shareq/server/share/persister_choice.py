"""Which persister holds this data directory's share state, and refusing to switch under it.

The two persisters keep share state in different places (``__share_group_state``, or control
records in the user partitions); neither reads the other's. A broker started with
``share.persister`` naming the other one while the first still holds state would start every share
group over from its reset policy, so it refuses to start instead. ``share-persister`` in the data
directory names the persister that last ran; a data directory from before the file existed used the
coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from shareq.log.segment import write_file_atomically
from shareq.persister.in_log_recovery import SNAPSHOT_FILE, read_snapshot_file

MARKER_FILE = "share-persister"
PERSISTERS = ("coordinator", "in-log")


class PersisterSwitchError(RuntimeError):
    """The configured persister is not the one holding the existing share state."""


def check_persister(
    data_dir: Path,
    chosen: str,
    *,
    coordinator_state: bool,
    partition_dirs: Iterable[Path],
) -> None:
    """Raise ``PersisterSwitchError`` if the other persister holds share state here; otherwise
    record ``chosen`` as the persister of this data directory.

    ``coordinator_state``: ``__share_group_state`` holds records. ``partition_dirs``: the user
    partitions' directories, whose share snapshot files say whether in-log state exists.
    """
    marker = data_dir / MARKER_FILE
    try:
        previous: str | None = marker.read_text().strip()
    except OSError:
        previous = "coordinator" if coordinator_state else None
    if previous == chosen:
        return
    if previous == "coordinator" and coordinator_state:
        held = "the __share_group_state topic"
    elif previous == "in-log" and _in_log_state(partition_dirs):
        held = "SHARE_CHECKPOINT/SHARE_DELTA control records in the topic partitions"
    else:
        held = None
    if held is not None:
        raise PersisterSwitchError(
            f"share.persister={chosen}, but this data directory's share-group state was written by "
            f"the {previous!r} persister and is kept in {held}; start with "
            f"share.persister={previous} (switching persisters on existing data is not supported: "
            "delete the share groups first, or use a new data directory)"
        )
    write_file_atomically(marker, chosen.encode() + b"\n")


def _in_log_state(partition_dirs: Iterable[Path]) -> bool:
    for directory in partition_dirs:
        if (directory / SNAPSHOT_FILE).exists():
            snap = read_snapshot_file(directory)
            if snap is None or snap.groups:  # a corrupt file may well hold state: count it
                return True
    return False
