"""Crash points for the connector's crash tests: ``SHAREQ_FAULT=<point>@<batchId>[:action]``.

Unset (always, outside tests), every hook is one environment lookup. Set, the named point of the
named micro-batch acts:

- no action: SIGKILL the query's process group (the process group of the session's leader, the
  driver when it was started with ``setsid``) and this process;
- ``:stop``: stop this process (SIGSTOP) until a SIGCONT, for a test to kill the broker meanwhile;
- ``:sleep=S``: sleep S seconds.

Points: the exactly-once sink's commit (``sink.commit.start``, ``sink.after_claim``,
``sink.after_produce``, ``sink.after_endtxn``, ``sink.after_return``); the at-least-once topic
sink's tasks (``sink.before_write``, in a task before it produces) and commit
(``sink.after_return``: the tasks' output written, Spark not yet told); the at-least-once
source (``source.before_ack``: Spark committed the batch, the source has not acknowledged it).
``sink.write@N`` makes the first attempt of task 0 of batch N exit, as an executor failure.
"""

from __future__ import annotations

import logging
import os
import signal
import time

log = logging.getLogger(__name__)

FAULT_ENV = "SHAREQ_FAULT"


def fault(point: str, batch_id: int) -> None:
    """Act when ``SHAREQ_FAULT`` names this point and batch."""
    wanted = os.environ.get(FAULT_ENV, "")
    if not wanted:
        return
    where, _, action = wanted.partition(":")
    if where != f"{point}@{batch_id}":
        return
    log.warning("%s=%s: %s", FAULT_ENV, wanted, action or "killing the query")
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action.startswith("sleep="):
        time.sleep(float(action.split("=", 1)[1]))
    else:
        # Python workers run in process groups of their own; the query's driver leads the session.
        os.killpg(os.getsid(0), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


def task_batch_fault(point: str) -> None:
    """:func:`fault` in a task of a streaming micro-batch (the batch id from its task context)."""
    if not os.environ.get(FAULT_ENV, ""):
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    batch_id = None if context is None else context.getLocalProperty("streaming.sql.batchId")
    if batch_id is not None:
        fault(point, int(batch_id))


def task_fault() -> None:
    """``SHAREQ_FAULT=sink.write@N``: the first attempt of task 0 of micro-batch N dies (its Python
    worker exits), as an executor failure; Spark retries the task when its master allows retries."""
    wanted = os.environ.get(FAULT_ENV, "")
    if not wanted.startswith("sink.write@"):
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None or context.partitionId() != 0 or context.attemptNumber() != 0:
        return
    if wanted == f"sink.write@{context.getLocalProperty('streaming.sql.batchId')}":
        log.warning("%s=%s: the task's Python worker exits", FAULT_ENV, wanted)
        os._exit(1)
