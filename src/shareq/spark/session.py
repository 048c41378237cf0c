"""The query's share-group membership, on shareq's ``ShareConsumer`` in explicit-acknowledgement mode.

Lives only in the stream reader's long-lived driver process. The consumer heartbeats in its own
background thread; this wrapper serialises acquire/acknowledge calls (the lock renewer runs in a
second thread) and speaks in the connector's terms: acquired ``(topic, partition, offset, count)``
and acknowledgement ranges.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from shareq.client.errors import ClientError
from shareq.client.share_consumer import ShareConsumer

from .cluster import Acquired, _client_kwargs
from .options import ConnectOptions

log = logging.getLogger(__name__)

AckRange = tuple[str, int, int, int, int]  # topic, partition, first, last, acknowledge type


class ShareSession:
    """Acquire records for micro-batches and acknowledge them by range."""

    def __init__(self, connect: ConnectOptions, *, group_id: str, topics: Sequence[str]) -> None:
        self._lock = threading.Lock()
        self._consumer = ShareConsumer(
            connect.bootstrap, group_id=group_id, acknowledgement_mode="explicit", **_client_kwargs(connect)
        )
        self._consumer.subscribe(list(topics))

    @property
    def supports_renew(self) -> bool:
        return bool(self._consumer.supports_renew())

    def wait_for_assignment(self, timeout: float) -> bool:
        return bool(self._consumer.wait_for_assignment(timeout))

    def acquire(self, *, max_records: int | None, wait_ms: int) -> list[Acquired]:
        """One ShareFetch round: records newly acquired by this member (bytes discarded)."""
        with self._lock:
            records = self._consumer.poll(wait_ms / 1000.0, max_records=max_records or 10_000)
        return [
            Acquired(
                topic=r.topic, partition=r.partition, offset=r.offset, delivery_count=r.delivery_count or 1
            )
            for r in records
        ]

    def acknowledge(self, ranges: Sequence[AckRange]) -> list[str]:
        """Send acknowledgements now; returns per-partition failures as text (not raised: a failed
        acknowledgement means a lapsed lock, and the broker redelivers those records)."""
        if not ranges:
            return []
        with self._lock:
            for topic, partition, first, last, kind in ranges:
                self._consumer.acknowledge_range(topic, partition, first, last, int(kind))
            try:
                result = self._consumer.commit_sync()
            except ClientError as exc:
                return [str(exc)]
        return [f"{tp}: {error}" for tp, error in result.items() if error]

    def close(self) -> None:
        with self._lock:
            try:
                self._consumer.close()
            except ClientError as exc:
                log.info("closing the share consumer: %s", exc)
