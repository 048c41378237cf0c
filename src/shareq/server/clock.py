"""The broker's one clock: wall-clock milliseconds since the epoch.

Every deadline the core hands out (acquisition locks, member sessions, transaction timeouts, due
dead letters, long-poll waits) and every ``now`` passed into it is read here, so the engine and the
shell never compare readings of two clocks. Timestamps in records and durable state are epoch
milliseconds too, which is why the clock is the wall clock and not the event loop's.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000
