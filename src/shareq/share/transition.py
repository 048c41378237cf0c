"""In-progress state transitions (persist before commit).

A transition records, for each run it touches, the state the run will take once the durable write
succeeds. Until then the run keeps its committed state and points at the transition, which makes it
untouchable: acquire skips it, a second acknowledgement is refused, lock expiry defers to it.
Rolling back is therefore just forgetting the transition.
"""

from __future__ import annotations

import enum

from shareq.share.in_flight import InFlightBatch
from shareq.share.record_state import RecordState


class TransitionKind(enum.Enum):
    ACKNOWLEDGE = "acknowledge"
    EXPIRE = "expire"
    RELEASE_MEMBER = "release_member"
    ARCHIVE = "archive"
    DEAD_LETTER = "dead_letter"
    INITIALIZE = "initialize"
    LOG_START = "log_start"
    STAGE = "stage"


class StateTransition:
    """The runs one pending write will change, and to what."""

    __slots__ = ("handle", "kind", "pieces", "start_offset")

    def __init__(self, handle: int, kind: TransitionKind) -> None:
        self.handle = handle
        self.kind = kind
        self.pieces: list[tuple[InFlightBatch, RecordState]] = []
        self.start_offset = -1

    def __repr__(self) -> str:
        return f"StateTransition(#{self.handle}, {self.kind.value}, {len(self.pieces)} runs)"
