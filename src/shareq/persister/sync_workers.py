"""A few threads that run blocking fsyncs for the event loop, with the cheapest hand-off there is.

Group commit hands one fsync job to a thread on every state-write cycle, which on the share path
is once per ShareFetch that carries acknowledgements. ``loop.run_in_executor`` costs a
``concurrent.futures.Future``, an executor lock and semaphore, and a chained asyncio future per
job: several percent of the broker's CPU at that rate. Here a job is one ``SimpleQueue.put`` (in
C) and one ``call_soon_threadsafe`` back to the loop.

Each job is two wake-ups across threads: the loop wakes the worker, the worker wakes the loop.
Where the kernel tells a thread its CPU (Linux), a worker is moved to the CPU the loop runs on
before it is given a job (one ``sched_setaffinity`` when the loop has moved since, else nothing),
so both wake-ups stay on one CPU: on a VM, waking a thread on another CPU costs an
inter-processor interrupt: this saved 6-12% of the broker's CPU per shared record on a 2-vCPU VM
(see bench/README.md). The worker blocks in fsync nearly all the time, so sharing the CPU costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
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
        self._cpus = [-1] * count  # the CPU each worker was last moved to

    def submit(self, worker: int, fn: Callable[[Any], None], arg: Any) -> asyncio.Future[None]:
        if self._closed:
            raise RuntimeError("the sync workers are shut down")
        thread = self._threads[worker]
        if thread.ident is None:  # threads start on first use: most cycles touch one partition
            thread.start()
        if _current_cpu is not None:
            cpu = _current_cpu()
            if cpu != self._cpus[worker] and cpu >= 0 and thread.native_id is not None:
                self._cpus[worker] = cpu
                with contextlib.suppress(OSError):  # e.g. the CPU left the process's cpuset
                    os.sched_setaffinity(thread.native_id, {cpu})
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


def _cpu_reader() -> Callable[[], int] | None:
    """libc's ``sched_getcpu`` (the calling thread's CPU), where it and thread affinity exist."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    try:
        getcpu: Callable[[], int] = ctypes.CDLL(None).sched_getcpu
    except (OSError, AttributeError):
        return None
    return getcpu


_current_cpu = _cpu_reader()
