"""``shareq`` with the event loop's CPU added up per callback: where a round trip's CPU goes.

    python bench/loop_costs.py serve --data-dir ... --port ...        (any ``shareq`` command line)

Runs the ``shareq`` command line with two wrappers installed first: every ``asyncio`` handle the
loop runs (a task's step, a callback) and every selector wait add the thread CPU time they took
to a total per callback, named by the task's coroutine or the callback's qualified name. On
SIGUSR2 the totals so far are printed as one line, ``loop {"name": [ns, calls], ...}``, on
standard output, as the broker prints its I/O counters on SIGUSR1; the benchmark that started it
takes the difference over a phase (``share_consume.py --loop-costs``).

Thread CPU time, not wall time: a callback preempted by another process is not charged for the
wait. The wrappers cost about a microsecond per callback (a few per cent of a ShareFetch round
trip), which the figures include. Threads other than the loop's (the share-state fsync workers)
are not in it; ``share_consume.py`` reports their CPU separately.
"""

from __future__ import annotations

import asyncio.events
import json
import selectors
import signal
import sys
import time
from collections import defaultdict
from typing import Any

_totals: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])


def _name(handle: asyncio.events.Handle) -> str:
    callback: Any = handle._callback  # type: ignore[attr-defined]
    if callback is None:
        return "(cancelled handle)"
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        return "task " + getattr(coro, "__qualname__", type(coro).__name__)
    return str(getattr(callback, "__qualname__", type(callback).__name__))


def install() -> None:
    """Wrap ``Handle._run`` and ``EpollSelector.select`` (before the loop exists)."""
    clock = time.thread_time_ns
    run = asyncio.events.Handle._run

    def timed_run(self: asyncio.events.Handle) -> None:
        started = clock()
        run(self)
        entry = _totals[_name(self)]
        entry[0] += clock() - started
        entry[1] += 1

    select = selectors.EpollSelector.select

    def timed_select(self: selectors.EpollSelector, timeout: float | None = None) -> Any:
        started = clock()
        events = select(self, timeout)
        entry = _totals["(selector wait)"]
        entry[0] += clock() - started
        entry[1] += 1
        return events

    asyncio.events.Handle._run = timed_run  # type: ignore[method-assign]
    selectors.EpollSelector.select = timed_select  # type: ignore[method-assign,assignment]
    signal.signal(signal.SIGUSR2, lambda signum, frame: print("loop " + json.dumps(_totals), flush=True))


def main() -> None:
    install()
    sys.argv = ["shareq", *sys.argv[1:]]
    from shareq.__main__ import run

    run()


if __name__ == "__main__":
    main()
