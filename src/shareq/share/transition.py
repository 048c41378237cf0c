"""In-progress state transitions (persist before commit).

A transition records, for each run it touches, the state the run will take once the durable write
succeeds. Until then the run keeps its committed state and points at the transition, which makes it
untouchable: acquire skips it, a second acknowledgement is refused, lock expiry defers to it.
Rolling back is therefore just forgetting the transition.
"""

from __future__ import annotations

import enum

from shareq.share.in_flight import InFlightBatch
from shareq.share.persister import StateBatch
from shareq.share.record_state import TRANSITIONS, RecordState, validate_transition

_ACQUIRED = RecordState.ACQUIRED


class TransitionKind(enum.Enum):
    ACKNOWLEDGE = "acknowledge"
    EXPIRE = "expire"
    RELEASE_MEMBER = "release_member"
    ARCHIVE = "archive"
    DEAD_LETTER = "dead_letter"
    INITIALIZE = "initialize"
    LOG_START = "log_start"
    STAGE = "stage"
    ACQUISITION = "acquisition"
    """An acquisition's delivery counts written (crash-durable counts): no state changes."""


class MarkedTarget:
    """What a run takes when its records go to states of their own: the ``marks`` it will hold,
    and the spans that change (None: every record, as when an acquired run is acknowledged; a
    dead-letter round changes only the ARCHIVING records it wrote). An acknowledgement (``changed``
    None) also gives ``deltas``: the marks' equal-state stretches as the write's state batches,
    built from the segments that set them (no second scan of the marks)."""

    __slots__ = ("changed", "deltas", "marks")

    def __init__(
        self,
        marks: bytearray,
        changed: list[tuple[int, int]] | None = None,
        deltas: list[StateBatch] | None = None,
    ) -> None:
        self.marks = marks
        self.changed = changed
        self.deltas = deltas


class StateTransition:
    """The runs one pending write will change, and to what."""

    __slots__ = ("dues", "handle", "kind", "marks", "pieces", "start_offset")

    def __init__(self, handle: int, kind: TransitionKind) -> None:
        self.handle = handle
        self.kind = kind
        self.pieces: list[tuple[InFlightBatch, RecordState]] = []
        self.start_offset = -1
        self.marks: dict[int, MarkedTarget] | None = None
        """Per piece whose records take states of their own (keyed by the run's first offset):
        its target ``marks`` (the piece's target state is their summary)."""
        self.dues: dict[int, int] | None = None
        """Per piece going AVAILABLE with a redelivery delay (keyed by the run's first offset):
        the instant (epoch ms) it becomes acquirable (see ``backoff``)."""

    def check_legal(self) -> None:
        """Raise ``IllegalStateTransition`` unless every piece may go from the state it holds to its
        target; a commit asks before it applies anything, so a refused transition changes nothing.

        A renewal keeps ACQUIRED (a fresh lock, not a move); a piece taking marks moves record by
        record, as its marks were built (from ACQUIRED, or ARCHIVING to ARCHIVED). A log-start move
        archives whatever lies below the new start, outside the table."""
        if self.kind is TransitionKind.LOG_START:
            return
        forced = self.kind is TransitionKind.ARCHIVE
        marked = self.marks
        transitions = TRANSITIONS
        for run, target in self.pieces:
            if target is _ACQUIRED or (marked is not None and run.first in marked):
                continue
            if target not in transitions[run.state]:
                validate_transition(run.state, target, forced_archive=forced)  # raises unless forced

    def __repr__(self) -> str:
        return f"StateTransition(#{self.handle}, {self.kind.value}, {len(self.pieces)} runs)"
