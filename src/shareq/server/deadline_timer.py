"""The shell's one deadline timer (aioquic's ``get_timer()`` / ``handle_timer(now)``).

The sans-I/O cores never sleep: each service in front of one (share groups, consumer groups,
transactions) says when it next has work with ``next_deadline()`` and does it in
``run_timers(now)``. This timer keeps one ``loop.call_at`` armed for the earliest deadline of all
of them, read on the broker's one clock (:mod:`shareq.server.clock`). A service that has just made
an earlier deadline calls :meth:`DeadlineTimer.arm`; one whose deadlines may have moved later calls
:meth:`DeadlineTimer.reschedule`; after firing, the timer asks every service again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from .clock import now_ms

log = logging.getLogger("shareq.server")

_FAR = float("inf")


class Timed(Protocol):
    """A service with deadlines."""

    def next_deadline(self) -> int | None:
        """The earliest time (clock ms) it has work at, or None."""

    def run_timers(self, now: int) -> None:
        """Do the work due at ``now``."""


class DeadlineTimer:
    """One ``loop.call_at`` for every service's deadlines; started with the broker's loop running."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self._clock = clock
        self._services: list[Timed] = []
        self._handle: asyncio.TimerHandle | None = None
        self._at: float = _FAR
        self._firing = False
        self._stopped = False

    def add(self, service: Timed) -> None:
        self._services.append(service)
        self.arm(service.next_deadline())

    def arm(self, deadline: int | None) -> None:
        """Fire no later than ``deadline`` (a no-op when an earlier one is armed, or while firing:
        the timer asks every service once it has run them)."""
        if self._stopped or self._firing or deadline is None or deadline >= self._at:
            return
        if self._handle is not None:
            self._handle.cancel()
        loop = asyncio.get_running_loop()
        self._at = deadline
        # One millisecond past the deadline: the clock has millisecond steps, so firing earlier
        # could find nothing due yet and arm again at once.
        delay = max(deadline - self._clock() + 1, 0) / 1000.0
        self._handle = loop.call_at(loop.time() + delay, self._fire)

    def reschedule(self) -> None:
        """Arm for the earliest deadline of every service (some may have moved later)."""
        if self._firing:
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._at = _FAR
        deadlines = [d for d in (s.next_deadline() for s in self._services) if d is not None]
        self.arm(min(deadlines, default=None))

    def _fire(self) -> None:
        self._handle = None
        self._at = _FAR
        now = self._clock()
        self._firing = True
        try:
            for service in self._services:
                deadline = service.next_deadline()
                if deadline is not None and deadline <= now:
                    try:
                        service.run_timers(now)
                    except Exception:  # one service's failure must not stop the others' timers
                        log.exception("timers of %s failed", type(service).__name__)
        finally:
            self._firing = False
        if not self._stopped:
            self.reschedule()

    def stop(self) -> None:
        self._stopped = True
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
