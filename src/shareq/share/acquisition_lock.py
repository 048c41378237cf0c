"""Acquisition locks and the deadline index that expires them.

One lock per acquisition (not per record): it covers the offset span it was taken over and counts
the records it still holds. The index is a binary heap with lazy deletion: a lock whose records were
all acknowledged stays in the heap until it surfaces, so acknowledging costs nothing here.
"""

from __future__ import annotations

import heapq
import itertools


class AcquisitionLock:
    """A lease taken by one acquire (or renewal): expires at ``deadline`` (ms on the injected clock)."""

    __slots__ = ("deadline", "first", "held", "last", "member", "seq")

    def __init__(self, *, deadline: int, first: int, last: int, member: str, seq: int) -> None:
        self.deadline = deadline
        self.first = first
        self.last = last
        self.member = member
        self.held = 0
        self.seq = seq

    def __lt__(self, other: AcquisitionLock) -> bool:
        if self.deadline != other.deadline:
            return self.deadline < other.deadline
        return self.seq < other.seq

    def __repr__(self) -> str:
        return f"AcquisitionLock({self.first}..{self.last}, {self.member}, deadline={self.deadline})"


class DeadlineIndex:
    """Locks ordered by deadline; ``pop_due`` yields the expired ones, skipping released ones."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[AcquisitionLock] = []
        self._seq = itertools.count()

    def new_lock(self, *, deadline: int, first: int, last: int, member: str) -> AcquisitionLock:
        lock = AcquisitionLock(deadline=deadline, first=first, last=last, member=member, seq=next(self._seq))
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
