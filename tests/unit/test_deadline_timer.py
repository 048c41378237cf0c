"""The broker's one deadline timer: it runs each service whose deadline is due, at or after that
deadline on the one clock, re-arms for the earliest of all, and survives a failing service."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from shareq.server.clock import now_ms
from shareq.server.deadline_timer import DeadlineTimer


class Service:
    def __init__(self, deadline: int | None, fail: bool = False) -> None:
        self.deadline = deadline
        self.ran: list[int] = []
        self.fail = fail

    def next_deadline(self) -> int | None:
        return self.deadline

    def run_timers(self, now: int) -> None:
        self.ran.append(now)
        self.deadline = None
        if self.fail:
            raise RuntimeError("this service's timers fail")


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):  # 5 s at most
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_each_service_runs_once_due_and_the_timer_rearms_for_the_earliest() -> None:
    async def scenario() -> None:
        timer = DeadlineTimer()
        start = now_ms()
        soon, later, idle = Service(start + 30), Service(start + 60_000), Service(None)
        for service in (later, soon, idle):
            timer.add(service)
        await _until(lambda: bool(soon.ran), "the first deadline")
        assert soon.ran[0] >= start + 30 and later.ran == [] and idle.ran == []
        # a new, earlier deadline of another service is armed at once
        due = now_ms() + 20
        later.deadline = due
        timer.arm(due)
        await _until(lambda: bool(later.ran), "the re-armed deadline")
        assert later.ran[0] >= due
        timer.stop()

    asyncio.run(scenario())


def test_a_failing_service_does_not_stop_the_others_or_the_timer() -> None:
    async def scenario() -> None:
        timer = DeadlineTimer()
        start = now_ms()
        failing, other = Service(start + 10, fail=True), Service(start + 10)
        timer.add(failing)
        timer.add(other)
        await _until(lambda: bool(failing.ran) and bool(other.ran), "both services")
        late = Service(now_ms() + 20)
        timer.add(late)
        await _until(lambda: bool(late.ran), "a service added after the failure")
        timer.stop()
        stopped = Service(now_ms() + 10)
        timer.add(stopped)
        await asyncio.sleep(0.1)
        assert stopped.ran == []  # a stopped timer arms nothing

    asyncio.run(scenario())
