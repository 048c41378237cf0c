"""The state persister's fsync threads: results and failures reach the loop, workers run side by side."""

from __future__ import annotations

import asyncio
import threading

import pytest

from shareq.persister.sync_workers import SyncWorkers


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
