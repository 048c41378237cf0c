"""Acquisition locks and the deadline index that expires them.

One lock per acquisition (not per record): it covers the offset span it was taken over and counts
the records it still holds. The index is a binary heap with lazy deletion: a lock whose records were
all acknowledged stays in the heap until it surfaces, so acknowledging costs nothing here.
"""

from __future__ import annotations

import heapq


class AcquisitionLock:
    """A lease taken by one acquire (or renewal): expires at ``deadline`` (ms on the injected clock).

    The member is not kept here (runs carry it); ``held`` counts the records still under the lock.
    """

    __slots__ = ("deadline", "first", "held", "last")

    def __init__(self, *, deadline: int, first: int, last: int) -> None:
        self.deadline = deadline
        self.first = first
        self.last = last
        self.held = 0

    def __lt__(self, other: AcquisitionLock) -> bool:
        return self.deadline < other.deadline

    def __repr__(self) -> str:
        return f"AcquisitionLock({self.first}..{self.last}, held={self.held}, deadline={self.deadline})"


class DeadlineIndex:
    """Locks ordered by deadline; ``pop_due`` yields the expired ones, skipping released ones."""

    __slots__ = ("_heap", "_last_deadline")

    def __init__(self) -> None:
        self._heap: list[AcquisitionLock] = []
        self._last_deadline = -1

    def new_lock(self, *, deadline: int, first: int, last: int) -> AcquisitionLock:
        # Acquisitions come in bursts with equal deadlines: share one int object between them.
        if deadline == self._last_deadline:
            deadline = self._last_deadline
        else:
            self._last_deadline = deadline
        lock = AcquisitionLock(deadline=deadline, first=first, last=last)
        heapq.heappush(self._heap, lock)
        return lock

    def pop_due(self, now: int) -> list[AcquisitionLock]:
        """Locks with ``deadline <= now`` that still hold records, earliest first."""
        heap = self._heap
        due: list[AcquisitionLock] = []
        while heap and heap[0].deadline <= now:
            lock = heapq.heappop(heap)
            if lock.held > 0:
                due.append(lock)
        return due

    def next_deadline(self) -> int | None:
        """The earliest deadline of a lock that still holds records, or None."""
        heap = self._heap
        while heap and heap[0].held <= 0:
            heapq.heappop(heap)
        return heap[0].deadline if heap else None

    def __len__(self) -> int:
        return len(self._heap)
