"""A persister on throwaway logs, as a blocking port for synchronous drivers.

Writes go through a live ``BuiltinPersister`` (or, ``in_log=True``, an ``InLogPersister`` writing
into throwaway partition logs); every read closes it and loads a fresh one from the files on disk,
so what a reader sees is exactly what a broker restarted at that moment would replay: nothing held
only in memory can leak into a ``durable`` check or a ``restart``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from shareq.coordinators.share.shard import ShareCoordinatorConfig
from shareq.log.config import LogConfig
from shareq.log.partition_log import PartitionLog
from shareq.persister.builtin import BuiltinPersister, FlushMode
from shareq.persister.in_log import InLogPersister
from shareq.share.persister import SharePartitionKey, ShareState, WriteStateParams

T = TypeVar("T")


class ThrowawayStateLog:
    """A persister over a temporary directory, reloaded from disk on every read."""

    def __init__(
        self, *, partitions: int = 1, flush_mode: FlushMode = FlushMode.GROUP, in_log: bool = False
    ) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="shareq-state-"))
        self._config = ShareCoordinatorConfig(state_topic_num_partitions=partitions)
        self._flush_mode = flush_mode
        self._in_log = in_log
        self._loop = asyncio.new_event_loop()
        self._live: BuiltinPersister | InLogPersister | None = None
        self._logs: dict[tuple[uuid.UUID, int], PartitionLog] = {}
        self.reloads = 0

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._loop.run_until_complete(coro)

    def _persister(self) -> BuiltinPersister | InLogPersister:
        if self._live is None:
            if self._in_log:
                self._live = InLogPersister(
                    self._user_log, lambda: list(self._logs), config=self._config, flush_mode=self._flush_mode
                )
            else:
                self._live = BuiltinPersister.in_directory(
                    self.directory, config=self._config, flush_mode=self._flush_mode
                )
            self._run(self._live.load())
            self.reloads += 1
        return self._live

    def _user_log(self, topic_id: uuid.UUID, partition: int) -> PartitionLog:
        """The partition log the in-log persister writes a share-partition's state into."""
        log = self._logs.get((topic_id, partition))
        if log is None:
            config = LogConfig(segment_ms=None, retention_ms=-1, retention_bytes=-1)
            log = PartitionLog.open(self.directory / f"{topic_id}-{partition}", config, now_ms=0)
            self._logs[(topic_id, partition)] = log
        return log

    def _drop(self) -> None:
        if self._live is not None:
            self._run(self._live.close())
            self._live = None
        for key, log in list(self._logs.items()):  # reopened on the next load, as by a restart
            log.close()
            self._logs[key] = PartitionLog.open(log.directory, log.config, now_ms=0)

    def write_state(self, params: WriteStateParams) -> None:
        async def write() -> None:  # queued inside the running loop
            await self._persister().write_state(params)

        self._run(write())

    def end_transaction(self, producer_id: int, producer_epoch: int, *, commit: bool) -> None:
        self._run(self._persister().end_transaction(producer_id, producer_epoch, commit=commit))

    def read_state(self, key: SharePartitionKey) -> ShareState | None:
        self._drop()  # a read is a restart: replay the state log from disk
        return self._run(self._persister().read_state(key, leader_epoch=0))

    def close(self) -> None:
        self._drop()
        for log in self._logs.values():
            log.close()
        self._logs.clear()
        self._loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ThrowawayStateLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
