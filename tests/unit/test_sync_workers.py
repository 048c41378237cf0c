"""The state persister's fsync threads: results and failures reach the loop, workers run side by side."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from shareq.persister.sync_workers import SyncWorkers, _current_cpu


def test_a_job_runs_on_its_worker_and_its_failure_reaches_the_awaiting_coroutine() -> None:
    workers = SyncWorkers(2, "test-sync")
    seen: list[str] = []

    async def main() -> None:
        await workers.submit(1, lambda name: seen.append(threading.current_thread().name + name), "!")
        with pytest.raises(OSError, match="disk gone"):
            await workers.submit(0, _fail, "disk gone")

    try:
        asyncio.run(main())
    finally:
        workers.shutdown()
    assert seen == ["test-sync-1!"]
    with pytest.raises(RuntimeError):
        workers.submit(0, print, None)


def test_jobs_given_to_different_workers_run_at_the_same_time() -> None:
    workers = SyncWorkers(2, "test-sync")
    both = threading.Barrier(2, timeout=10)  # each job waits for the other: only parallel jobs pass

    async def main() -> None:
        await asyncio.gather(
            workers.submit(0, lambda _: both.wait(), None), workers.submit(1, lambda _: both.wait(), None)
        )

    try:
        asyncio.run(main())
    finally:
        workers.shutdown()
    assert not any(t.name.startswith("test-sync") for t in threading.enumerate())


def _fail(message: str) -> None:
    raise OSError(message)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no thread affinity on this platform")
def test_a_worker_is_given_its_job_on_the_cpu_the_loop_runs_on() -> None:
    workers = SyncWorkers(1, "test-sync")
    seen: list[tuple[set[int], int]] = []

    def where(_: object) -> None:
        seen.append((os.sched_getaffinity(0), _current_cpu() if _current_cpu is not None else -1))

    async def main() -> None:
        await workers.submit(0, where, None)

    try:
        asyncio.run(main())
    finally:
        workers.shutdown()
    allowed, ran_on = seen[0]
    if _current_cpu is None:  # no sched_getcpu: the worker keeps the process's CPUs
        assert allowed == os.sched_getaffinity(0)
    else:  # moved to the one CPU the loop was on when it gave the job
        assert len(allowed) == 1
        assert ran_on in allowed
