"""The log cleaner's asyncio shell: every ``log.cleaner.backoff.ms`` each compacted partition is
planned on the event loop, cleaned in a worker process, and its cleaned segments swapped in on the
event loop (see ``log/cleaner.py``). One partition is cleaned at a time, as one Kafka cleaner
thread does.

The worker is one process at a lower scheduling priority (``nice`` 10), started on the first
cleaning: decoding records is CPU work that, in a thread, would hold the interpreter lock against
the event loop, and at a lower priority it yields the CPU to produce and fetch on a busy box."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING

from shareq.log.cleaner import ENTRY_BYTES, CleaningConfig, CleaningResult, clean
from shareq.topic_configs import topic_value

if TYPE_CHECKING:
    from .broker import Broker
    from .partitions import Partition

log = logging.getLogger("shareq.server.compaction")


def cleaning_config(broker: Broker, partition: Partition) -> CleaningConfig | None:
    """The partition's compaction settings, or ``None`` if its topic is not compacted."""
    topic = broker.topics.get(partition.topic)
    if topic is None or not partition.log.config.compact:
        return None
    configs, config = topic.configs, broker.config
    return CleaningConfig(
        min_cleanable_ratio=float(topic_value("min.cleanable.dirty.ratio", configs, config)),  # type: ignore[arg-type]
        min_lag_ms=int(topic_value("min.compaction.lag.ms", configs, config)),  # type: ignore[call-overload]
        max_lag_ms=int(topic_value("max.compaction.lag.ms", configs, config)),  # type: ignore[call-overload]
        delete_retention_ms=int(topic_value("delete.retention.ms", configs, config)),  # type: ignore[call-overload]
        max_map_entries=broker.config["log.cleaner.dedupe.buffer.size"] // ENTRY_BYTES,
    )


async def clean_partition(broker: Broker, partition: Partition, now_ms: int) -> CleaningResult | None:
    """One cleaning round of one partition; the result once swapped in, or ``None``."""
    config = cleaning_config(broker, partition)
    if config is None:
        return None
    plan = partition.log.cleaning_plan(config, now_ms)
    if plan is None:
        return None
    result = await asyncio.get_running_loop().run_in_executor(_worker(broker), clean, plan)
    if broker.partition(partition.topic, partition.index) is not partition:
        for cleaned in result.cleaned:  # the topic went away meanwhile
            cleaned.cleaned_path.unlink(missing_ok=True)
        return None
    partition.log.swap_cleaned(result)
    return result


_WORKERS: dict[int, ProcessPoolExecutor] = {}


def _lower_priority(parent: int) -> None:
    """Runs in the worker: a lower priority, and a watchdog that ends the worker once the broker
    is gone (killed, say), so no cleaner outlives it or writes into its directory."""
    os.nice(10)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="shareq-cleaner-watchdog", daemon=True).start()


def _worker(broker: Broker) -> ProcessPoolExecutor:
    pool = _WORKERS.get(id(broker))
    if pool is None:
        context = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(
            max_workers=1, mp_context=context, initializer=_lower_priority, initargs=(os.getpid(),)
        )
        _WORKERS[id(broker)] = pool
    return pool


def stop_cleaner(broker: Broker) -> None:
    """End the broker's cleaner process (an unfinished cleaning leaves a ``.cleaned`` file that
    the next open removes)."""
    pool = _WORKERS.pop(id(broker), None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


async def cleaner_loop(broker: Broker) -> None:
    from .clock import now_ms

    while True:
        await asyncio.sleep(broker.config["log.cleaner.backoff.ms"] / 1000.0)
        if not broker.config["log.cleaner.enable"]:
            continue
        for partition in list(broker.partitions.values()):
            try:
                await clean_partition(broker, partition, now_ms())
            except Exception:
                log.exception("cleaning failed on %s-%d", partition.topic, partition.index)
