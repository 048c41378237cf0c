"""The ``count`` in-flight window (``shareq.share.window.mode=count``).

Kafka's window is a span: no record at or past SPSO + ``max_record_locks`` is acquired for the first
time, so one record held back at the start offset (delayed, stuck) stops the partition once the
window's worth of records behind it is done. In ``count`` mode only the records still in play
(AVAILABLE, ACQUIRED, ARCHIVING, TX_PENDING) count against the cap; the terminal runs between them
cost a run each. A span guard of ``WINDOW_SPAN_GUARD`` caps from the SPSO bounds the state kept.
"""

from __future__ import annotations

from shareq.share.in_flight import InFlightMap

WINDOW_SPAN_GUARD = 100
"""In ``count`` mode no first-time acquisition reaches SPSO + this many caps."""


def in_play(runs: InFlightMap) -> int:
    """Records of ``runs`` not terminal, by a walk of the runs (what the kept count must equal)."""
    return sum(run.last - run.first + 1 - run.terminal_size() for run in runs)


def count_window_end(playing: int, spso: int, end: int, cap: int) -> int:
    """The first offset a first-time acquisition may not reach in ``count`` mode, with ``playing``
    records in play (kept as a count: covered records less terminal ones, so no walk)."""
    room = cap - playing
    return min(end + (room if room > 0 else 0), spso + WINDOW_SPAN_GUARD * cap)
