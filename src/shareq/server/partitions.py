"""One partition as the server sees it: its log plus the fetchers waiting for new data.

Long polls wait on futures registered here; an append resolves them (no sleep loops).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from shareq.log import PartitionLog


class Partition:
    """A partition's log and the set of waiters to wake when it grows."""

    __slots__ = ("directory", "index", "log", "topic", "waiters")

    def __init__(self, topic: str, index: int, directory: Path, log: PartitionLog) -> None:
        self.topic = topic
        self.index = index
        self.directory = directory
        self.log = log
        self.waiters: set[asyncio.Future[None]] = set()

    def notify(self) -> None:
        """Wake every fetcher waiting on this partition."""
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()


async def wait_for_data(
    partitions: Iterable[Partition], timeout_s: float, waiter: asyncio.Future[None] | None = None
) -> None:
    """Return when any of ``partitions`` is appended to, or after ``timeout_s``.

    A caller may pass its own ``waiter`` to be woken by other events as well (a share fetch also
    parks it on share-partitions, for releases and lock expiries).
    """
    loop = asyncio.get_running_loop()
    if waiter is None:
        waiter = loop.create_future()
    watched = list(partitions)
    for partition in watched:
        partition.waiters.add(waiter)
    handle = loop.call_later(max(timeout_s, 0.0), _resolve, waiter)
    try:
        await waiter
    finally:
        handle.cancel()
        for partition in watched:
            partition.waiters.discard(waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
