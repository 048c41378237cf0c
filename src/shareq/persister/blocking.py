"""A blocking adapter over an async ``Persister``, for synchronous drivers (scenario runner, tests).

It owns one private event loop, so a persister that keeps loop-bound resources between calls
works; it must not be used from inside a running event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from shareq.share.persister import Persister, SharePartitionKey, ShareState, WriteStateParams

T = TypeVar("T")


class BlockingPersister:
    """``read_state`` / ``write_state`` / ``initialize_state`` as plain calls."""

    def __init__(self, persister: Persister) -> None:
        self.persister = persister
        self._loop = asyncio.new_event_loop()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coro)

    def read_state(self, key: SharePartitionKey) -> ShareState | None:
        return self._run(self.persister.read_state(key, leader_epoch=0))

    def write_state(self, params: WriteStateParams) -> None:
        async def write() -> None:  # queued inside the running loop
            await self.persister.write_state(params)

        self._run(write())

    def end_transaction(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None:
        self._run(self.persister.end_transaction(producer_id, producer_epoch, commit=commit))

    def close(self) -> None:
        self._loop.close()

    def __enter__(self) -> BlockingPersister:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
