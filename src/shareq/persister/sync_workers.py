"""A few threads that run blocking fsyncs for the event loop, with the cheapest hand-off there is.

Group commit hands one fsync job to a thread on every state-write cycle, which on the share path
is once per ShareFetch that carries acknowledgements. ``loop.run_in_executor`` costs a
``concurrent.futures.Future``, an executor lock and semaphore, and a chained asyncio future per
job: several percent of the broker's CPU at that rate. Here a job is one ``SimpleQueue.put`` (in
C) and one ``call_soon_threadsafe`` back to the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

_Job = tuple[asyncio.AbstractEventLoop, asyncio.Future[None], Callable[[Any], None], Any] | None


class SyncWorkers:
    """``submit(worker, fn, arg)`` runs ``fn(arg)`` on thread ``worker`` (of ``count``); the future
    resolves on the submitting loop. Jobs given to different workers run in parallel."""

    def __init__(self, count: int, name: str) -> None:
        self._queues: list[queue.SimpleQueue[_Job]] = [queue.SimpleQueue() for _ in range(count)]
        self._threads = [
            threading.Thread(target=self._run, args=(q,), name=f"{name}-{i}", daemon=True)
            for i, q in enumerate(self._queues)
        ]
        self._closed = False

    def submit(self, worker: int, fn: Callable[[Any], None], arg: Any) -> asyncio.Future[None]:
        if self._closed:
            raise RuntimeError("the sync workers are shut down")
        thread = self._threads[worker]
        if thread.ident is None:  # threads start on first use: most cycles touch one partition
            thread.start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queues[worker].put((loop, future, fn, arg))
        return future

    def shutdown(self) -> None:
        """Let queued jobs finish, then stop and join the threads."""
        if self._closed:
            return
        self._closed = True
        for q, thread in zip(self._queues, self._threads, strict=True):
            if thread.ident is not None:
                q.put(None)
                thread.join()

    @staticmethod
    def _run(jobs: queue.SimpleQueue[_Job]) -> None:
        while (job := jobs.get()) is not None:
            loop, future, fn, arg = job
            error: BaseException | None = None
            try:
                fn(arg)
            except BaseException as exc:  # handed to the awaiting coroutine, never lost
                error = exc
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits the result
                loop.call_soon_threadsafe(_settle, future, error)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
